#!/usr/bin/env bash
# The whole test suite in two parts: first every test not marked `serial`, spread over
# pytest-xdist workers (whole files per worker, so a module's private Slurm or Ray cluster
# starts once); then the `serial` tests alone, which assert on timing that another test on
# the same cores would disturb. Usage: scripts/test.sh PYTHON [PYTEST_ARGS...]
# SCALEBENCH_TEST_WORKERS sets the number of parallel workers (default 3, one more than this
# machine's 2 cores: several tests wait out a time limit asleep, and a third worker fills the
# idle core; 0: no xdist). Each part lists its 20 slowest tests (where the 15 minutes go), and
# writes JUnit XML to SCALEBENCH_TEST_REPORT (default .test-report/): at the end
# scripts/suite_budget.py prints each test file's time against its budget (tests/budgets.toml),
# worst first (docs/testing.md).
set -uo pipefail
PY=$1
shift
workers=${SCALEBENCH_TEST_WORKERS:-3}
parallel=()
[ "$workers" -gt 0 ] && parallel=(-n "$workers" --dist loadfile)

# (busy idle) jiffies of all cores since boot: each part prints how busy it kept the cores,
# which says whether more parallel workers could help (docs/testing.md)
cpu_jiffies() { awk 'NR == 1 {print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat 2>/dev/null; }
busy_share() {  # busy share between two cpu_jiffies readings, as a percentage
    awk -v a="$1" -v b="$2" 'BEGIN {split(a, x, " "); split(b, y, " "); busy = y[1] - x[1];
        all = busy + y[2] - x[2]; if (all > 0) printf "%.0f%%", 100 * busy / all; else print "?"}'
}

# Without arguments the serial part collects only the files that mention the serial mark
# (collecting every file again took 5 s of its time). Any mention: a mark on a method or a
# module's pytestmark too, for a serial test in a file left out would run in neither part.
serial_files=()
if [ "$#" -eq 0 ]; then
    mapfile -t serial_files < <(grep -lE "mark\.serial" "$(dirname "$0")"/../tests/test_*.py)
fi

# One cache folder for both parts (tests/conftest.py makes one per pytest run otherwise): the
# serial GPU check uses the bundle and the private environment the parallel part made.
if [ -z "${SCALEBENCH_TEST_CACHE:-}" ]; then
    SCALEBENCH_TEST_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/scalebench-test-cache-XXXXXX")
    export SCALEBENCH_TEST_CACHE SCALEBENCH_CACHE=$SCALEBENCH_TEST_CACHE
    trap 'rm -rf "$SCALEBENCH_TEST_CACHE"' EXIT
fi

report=${SCALEBENCH_TEST_REPORT:-.test-report}
mkdir -p "$report"
rm -f "$report"/parallel.xml "$report"/serial.xml

start=$(date +%s)
cpu0=$(cpu_jiffies)
"$PY" -m pytest -q -p no:cacheprovider --durations=20 --junitxml="$report/parallel.xml" \
    "${parallel[@]}" -m "not serial" "$@"
first=$?
middle=$(date +%s)
cpu1=$(cpu_jiffies)
"$PY" -m pytest -q -p no:cacheprovider --durations=20 --junitxml="$report/serial.xml" -m serial \
    "${serial_files[@]}" "$@"
second=$?
end=$(date +%s)
cpu2=$(cpu_jiffies)
"$PY" "$(dirname "$0")/suite_budget.py" "$report" || true  # a file over budget is shown, not failed
echo "test.sh: parallel part $((middle - start)) s (exit $first, cores $(busy_share "$cpu0" "$cpu1")" \
     "busy), serial part $((end - middle)) s (exit $second, cores $(busy_share "$cpu1" "$cpu2") busy)," \
     "$((end - start)) s in all"
# 5 is pytest's "no tests collected": fine for one part (arguments may select none), not both
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then exit 5; fi
[ "$first" -eq 5 ] && first=0
[ "$second" -eq 5 ] && second=0
[ "$first" -ne 0 ] && exit "$first"
exit "$second"
