// Redis through hiredis: SET key owner NX PX lease, with compare-and-delete
// and compare-and-pexpire Lua scripts run by EVALSHA (the single-instance
// pattern of the Redis documentation, what Redlock does per node).

#include "lockers.hpp"

#ifdef SQLOCK_BENCH_REDIS

#include <hiredis/hiredis.h>

#include <map>

namespace bench {

namespace {

constexpr const char* release_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
constexpr const char* renew_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

struct reply_deleter {
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply = std::unique_ptr<redisReply, reply_deleter>;

class connection {
public:
    explicit connection(const std::string& host_port) {
        const auto colon = host_port.rfind(':');
        if (colon == std::string::npos) failure("redis address '" + host_port + "' is not host:port");
        const timeval timeout{5, 0};
        ctx_ = redisConnectWithTimeout(host_port.substr(0, colon).c_str(), std::stoi(host_port.substr(colon + 1)),
                                       timeout);
        if (!ctx_ || ctx_->err) {
            const std::string why = ctx_ ? ctx_->errstr : "out of memory";
            if (ctx_) redisFree(ctx_);
            failure("cannot connect to redis at " + host_port + ": " + why);
        }
        redisSetTimeout(ctx_, timeval{10, 0});
    }
    ~connection() { redisFree(ctx_); }
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    reply command(const std::vector<std::string>& args) {
        std::vector<const char*> argv;
        std::vector<std::size_t> lens;
        for (const auto& a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        auto* r = static_cast<redisReply*>(
            redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data()));
        if (!r) failure(std::string("redis: ") + ctx_->errstr);
        reply out(r);
        if (out->type == REDIS_REPLY_ERROR) failure("redis: " + std::string(out->str, out->len));
        return out;
    }

private:
    redisContext* ctx_ = nullptr;
};

class redis_locker final : public locker {
public:
    redis_locker(const contender& c, const target& t, const locker_settings& s)
        : conn_(c.backend == "redis" ? t.redis : t.redis_aof), lease_ms_(std::to_string(s.lease.count())) {
        release_sha_ = load(release_script);
        renew_sha_ = load(renew_script);
    }

    bool try_lock(const std::string& key) override {
        const std::string& owner = owners_.next();
        ++statements_;
        auto r = conn_.command({"SET", key, owner, "NX", "PX", lease_ms_});
        if (r->type != REDIS_REPLY_STATUS) return false;  // nil: taken
        held_[key] = owner;
        return true;
    }
    void unlock(const std::string& key) override {
        auto it = held_.find(key);
        if (it == held_.end()) failure("redis: unlock of '" + key + "', which is not held");
        ++statements_;
        auto r = conn_.command({"EVALSHA", release_sha_, "1", key, it->second});
        held_.erase(it);
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) failure("redis: '" + key + "' was not held at release");
    }
    bool renew(const std::string& key) override {
        auto it = held_.find(key);
        if (it == held_.end()) return false;
        ++statements_;
        auto r = conn_.command({"EVALSHA", renew_sha_, "1", key, it->second, lease_ms_});
        return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    }
    std::uint64_t statements() const override { return statements_; }

private:
    std::string load(const char* script) {
        auto r = conn_.command({"SCRIPT", "LOAD", script});
        return std::string(r->str, r->len);
    }

    connection conn_;
    std::string lease_ms_;
    std::string release_sha_, renew_sha_;
    owner_source owners_;
    std::map<std::string, std::string, std::less<>> held_;
    std::uint64_t statements_ = 0;
};

}  // namespace

std::unique_ptr<locker> open_redis_locker(const contender& c, const target& t, const locker_settings& s) {
    return std::make_unique<redis_locker>(c, t, s);
}

void redis_flush(const target& t, const std::string& backend) {
    connection c(backend == "redis" ? t.redis : t.redis_aof);
    c.command({"FLUSHALL"});
}

std::vector<std::string> redis_facts(const target& t, const std::string& backend) {
    connection c(backend == "redis" ? t.redis : t.redis_aof);
    auto info = c.command({"INFO", "server"});
    const std::string text(info->str, info->len);
    auto field = [&text](const std::string& name) {
        const auto at = text.find(name + ":");
        if (at == std::string::npos) return std::string("?");
        const auto end = text.find('\r', at);
        return text.substr(at + name.size() + 1, end - at - name.size() - 1);
    };
    auto config = [&c](const std::string& name) {
        auto r = c.command({"CONFIG", "GET", name});
        return r->elements == 2 ? std::string(r->element[1]->str, r->element[1]->len) : std::string("?");
    };
    const std::string save = config("save");
    return {
        "Server: Redis " + field("redis_version") + ", hiredis " + std::to_string(HIREDIS_MAJOR) + "." +
            std::to_string(HIREDIS_MINOR) + "." + std::to_string(HIREDIS_PATCH) + ", TCP to 127.0.0.1",
        "Settings: appendonly=" + config("appendonly") + ", appendfsync=" + config("appendfsync") + ", save=\"" + save +
            "\"",
    };
}

}  // namespace bench

#else

namespace bench {
std::unique_ptr<locker> open_redis_locker(const contender&, const target&, const locker_settings&) {
    failure("this bench was built without hiredis (install libhiredis-dev)");
}
void redis_flush(const target&, const std::string&) { failure("this bench was built without hiredis"); }
std::vector<std::string> redis_facts(const target&, const std::string&) {
    failure("this bench was built without hiredis");
}
}  // namespace bench

#endif
