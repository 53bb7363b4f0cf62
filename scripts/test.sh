#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the suite's tests: the default run, then
# the self-checks on real bundled models (marked slow).  Arguments, when given,
# replace both and go to one pytest call (scripts/test.sh benchmarks/res -x).
# pytest's exit status 5 (no tests collected) counts as a failure.  Python writes its
# bytecode caches (__pycache__, git-ignored): every pytest the self-checks start in a
# subprocess then reuses the compiled and assertion-rewritten modules instead of
# compiling them again, which on a fresh checkout is most of such a process's time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
export HF_HUB_OFFLINE=1
unset PYTHONDONTWRITEBYTECODE

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
    run_pytest --durations=20
    run_pytest -m slow --durations=10
fi
