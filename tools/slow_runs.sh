#!/usr/bin/env bash
# The converted (formerly wall-clock-racing) integration tests, RUNS times in a row (default 5), each run as
# `make test` does it (the peaceful tests on 3 xdist workers, then the serial ones alone), on a machine made
# slow on purpose by tools/slow_machine.sh.  Stops at the first failing run; logs in ${LOGS:-/tmp/slow-runs}.
#   tools/slow_machine.sh tools/slow_runs.sh
set -u
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
logs=${LOGS:-/tmp/slow-runs}
mkdir -p "$logs"
files=(
  tests/integration/operators/test_indexed_job_queueing.py
  tests/integration/operators/test_indexed_job_outcomes.py
  tests/integration/operators/test_indexed_job_reattach.py
  tests/integration/operators/test_parallelism_ramp.py
  tests/integration/operators/test_checkpointing.py
  tests/integration/devcluster/test_kueue_admission.py
  tests/integration/triggers/test_kueue_job_trigger.py
  tests/integration/triggers/test_namespace_watch.py
  tests/integration/examples/test_monte_carlo_fair_share.py
)
py=.venv/bin/python
for i in $(seq "$runs"); do
  start=$(date +%s)
  $py -m pytest -p no:cacheprovider -q -n 3 -m "not serial" "${files[@]}" > "$logs/run-$i-parallel.log" 2>&1; a=$?
  $py -m pytest -p no:cacheprovider -q -m serial "${files[@]}" > "$logs/run-$i-serial.log" 2>&1; b=$?
  echo "run $i: parallel exit $a ($(tail -1 "$logs/run-$i-parallel.log")), serial exit $b" \
    "($(tail -1 "$logs/run-$i-serial.log")), $(( $(date +%s) - start )) s"
  [ "$a" -eq 0 ] && [ "$b" -eq 0 ] || exit 1
done
