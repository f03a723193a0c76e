#!/usr/bin/env bash
# Run a command on a machine made slow on purpose: one busy loop per core (HOGS, default: every core) at the
# same priority as the command, for as long as the command runs.  Used to show that the tests hold no
# wall-clock races, e.g.:  tools/slow_machine.sh make test PYTEST_ARGS="tests/integration/operators"
set -u
hogs=${HOGS:-$(nproc)}
pids=()
for _ in $(seq "$hogs"); do
  python3 -c 'while True: pass' &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
echo "slow_machine: $hogs busy loop(s) on $(nproc) core(s) while: $*" >&2
"$@"
