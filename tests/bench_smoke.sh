#!/usr/bin/env bash
# ctest bench.smoke: every workload of sqlock_bench for every contender, with
# windows of a fraction of a second, on the test servers (and Redis when
# SQLOCK_TEST_REDIS names one, host:port). It proves the harness still runs
# end to end and keeps its own checks (no two holders at once, every grant
# released); it measures nothing worth reading.
#
#   bench_smoke.sh PATH/TO/sqlock_bench
set -euo pipefail
bench=$1
out=$(mktemp -d /tmp/sqlock-bench-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT

args=(--sqlite "$out/bench.db" --out "$out" --reps 1 --seconds 0.2 --hot-seconds 0.2 --warmup 0.05
  --workers 1 --hot-workers 2 --holds 1 --waiter-threads 3 --handoff-processes 2 --handoff-seconds 0.3
  --fairness-processes 2 --fairness-seconds 0.3 --renewal-leases 5 --renewal-rounds 1
  --recovery-lease-ms 400 --recovery-kill-after-ms 150)
labels=("sqlock insert" "sqlock update" "raw update" "ShedLock SQL" "Spring SQL")
if [[ -n "${SQLOCK_TEST_POSTGRES_URL:-}" ]]; then
  args+=(--postgres "$SQLOCK_TEST_POSTGRES_URL")
  labels+=("advisory lock" "sqlock for-update" "sqlock update relaxed")
fi
if [[ -n "${SQLOCK_TEST_MYSQL_URL:-}" ]]; then
  args+=(--mysql "$SQLOCK_TEST_MYSQL_URL")
  labels+=("GET_LOCK")
fi
if [[ -n "${SQLOCK_TEST_REDIS:-}" ]]; then
  args+=(--redis "$SQLOCK_TEST_REDIS")
  labels+=("Redis")
fi

"$bench" "${args[@]}" 2>"$out/progress.log" || {
  tail -n 20 "$out/progress.log" >&2
  exit 1
}
fail=0
for section in "Uncontended: distinct keys" "One hot key" "One key, many waiting threads of one process" "Handoff latency" "Fairness" "Keeping leases alive" \
  "Recovery after kill -9 of the holder" "Reader-writer locks, semaphores and multi-key locks"; do
  grep -qxF "### $section" "$out/report.md" || { echo "bench.smoke: no section '$section'" >&2; fail=1; }
done
for label in "${labels[@]}"; do
  grep -qF "| $label |" "$out/report.md" || { echo "bench.smoke: no row for '$label'" >&2; fail=1; }
done
grep -q "^plot " "$out/charts.gp" || { echo "bench.smoke: charts.gp has no plot" >&2; fail=1; }
exit "$fail"
