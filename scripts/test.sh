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

report=${SCALEBENCH_TEST_REPORT:-.test-report}
mkdir -p "$report"
rm -f "$report"/parallel.xml "$report"/serial.xml

start=$(date +%s)
"$PY" -m pytest -q -p no:cacheprovider --durations=20 --junitxml="$report/parallel.xml" \
    "${parallel[@]}" -m "not serial" "$@"
first=$?
middle=$(date +%s)
"$PY" -m pytest -q -p no:cacheprovider --durations=20 --junitxml="$report/serial.xml" -m serial "$@"
second=$?
end=$(date +%s)
"$PY" "$(dirname "$0")/suite_budget.py" "$report" || true  # a file over budget is shown, not failed
echo "test.sh: parallel part $((middle - start)) s (exit $first), serial part $((end - middle)) s" \
     "(exit $second), $((end - start)) s in all"
# 5 is pytest's "no tests collected": fine for one part (arguments may select none), not both
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then exit 5; fi
[ "$first" -eq 5 ] && first=0
[ "$second" -eq 5 ] && second=0
[ "$first" -ne 0 ] && exit "$first"
exit "$second"
