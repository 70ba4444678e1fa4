// sqlock_campaign: the fault campaign's workload client and cell
// orchestrator (scripts/faults.sh drives it; sqlock_campaign_check judges).
//
//   sqlock_campaign run --url URL --prefix P --fault F [--fault F...] --trials N --dir DIR ...
//   sqlock_campaign client ...   (started by `run`)

#include "campaign/client.hpp"
#include "campaign/run.hpp"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
    CLI::App app{"sqlock fault campaign: workload clients and one cell's orchestrator"};
    app.require_subcommand(1);

    campaign::client_config cc;
    auto* client = app.add_subcommand("client", "One workload process (started by run)");
    client->add_option("--url", cc.url)->required();
    client->add_option("--prefix", cc.prefix)->required();
    client->add_option("--id", cc.id)->required();
    client->add_option("--slot", cc.slot)->required()->check(CLI::Range(0, 63));
    client->add_option("--role", cc.role)->check(CLI::IsMember({"lock", "job", "rw", "sem"}));
    client->add_option("--permits", cc.permits)->check(CLI::Range(1, 100));
    client->add_option("--mode", cc.mode);
    client->add_option("--keys", cc.keys)->check(CLI::Range(1, 100));
    client->add_option("--lease-ms", cc.lease_ms)->check(CLI::Range(100, 600000));
    client->add_option("--sweep-ms", cc.sweep_ms)->check(CLI::Range(1, 600000));
    client->add_option("--job-period-ms", cc.job_period_ms)->check(CLI::Range(100, 600000));
    client->add_option("--log", cc.log)->required();
    client->add_option("--board", cc.board)->required();
    client->add_option("--seed", cc.seed);
    client->add_flag("--unfenced", cc.unfenced);
    client->add_flag("--broken-clock", cc.broken_clock);
    client->add_flag("--relaxed", cc.relaxed);

    campaign::cell_config rc;
    auto* run = app.add_subcommand("run", "One cell: workload, faults, sweep, dumps");
    run->add_option("--url", rc.url, "Database URL (the servers' superuser, for killing connections)")->required();
    run->add_option("--prefix", rc.prefix, "Table prefix of the cell (fresh)")->required();
    run->add_option("--mode", rc.mode, "A lock mode, or mixed");
    run->add_option("--fault", rc.faults, "Fault to apply (repeatable; in turn)")
        ->required()
        ->check(CLI::IsMember(campaign::all_faults()));
    run->add_option("--trials", rc.trials, "Trials per fault")->check(CLI::Range(1, 1000));
    run->add_option("--lock-clients", rc.lock_clients)->check(CLI::Range(1, 48));
    run->add_option("--job-clients", rc.job_clients)->check(CLI::Range(0, 8));
    run->add_option("--rw-clients", rc.rw_clients, "Readers and writers of one key")->check(CLI::Range(0, 16));
    run->add_option("--sem-clients", rc.sem_clients, "Takers of one semaphore's permits")->check(CLI::Range(0, 16));
    run->add_option("--permits", rc.permits, "That semaphore's N")->check(CLI::Range(1, 100));
    run->add_option("--keys", rc.keys)->check(CLI::Range(1, 100));
    run->add_option("--lease-ms", rc.lease_ms)->check(CLI::Range(500, 60000));
    run->add_option("--dir", rc.dir, "Output directory")->required();
    run->add_option("--servers-script", rc.servers_script, "scripts/test-servers.sh (server faults)");
    run->add_option("--server-dir", rc.server_dir, "Its DIR");
    run->add_option("--control", rc.control)->check(CLI::IsMember({"none", "unfenced", "broken-clock", "relaxed-durability"}));
    run->add_option("--cli", rc.cli, "The sqlock program (force_release)");
    run->add_option("--seed", rc.seed);

    CLI11_PARSE(app, argc, argv);
    try {
        if (client->parsed()) return campaign::run_client(cc);
        char self[PATH_MAX];
        const auto n = ::readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) throw std::runtime_error("cannot find this program (/proc/self/exe)");
        rc.self.assign(self, static_cast<std::size_t>(n));
        return campaign::run_cell(rc);
    } catch (const std::exception& e) {
        std::cerr << "sqlock_campaign: " << e.what() << "\n";
        return 1;
    }
}
