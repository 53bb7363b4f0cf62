#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the suite's tests: the default run, then
# the self-checks on real bundled models (marked slow).  Arguments, when given,
# replace both and go to one pytest call (scripts/test.sh benchmarks/res -x).
# pytest's exit status 5 (no tests collected) counts as a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
export HF_HUB_OFFLINE=1
export PYTHONDONTWRITEBYTECODE=1

run_pytest() {
    set +e
    .venv/bin/python -m pytest "$@"
    local status=$?
    set -e
    if [ "$status" -eq 5 ]; then
        echo "pytest $* collected no tests: a run without tests is not a pass" >&2
        return 1
    fi
    return "$status"
}
if [ "$#" -gt 0 ]; then
    run_pytest "$@"
else
    run_pytest
    run_pytest -m slow
fi
