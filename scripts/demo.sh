#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the RES Step 0 gate on the bundled SmolLM2
# 135M Instruct, offline.  The last two lines name the classification and the
# report.  Exit status: 0 when the run is complete (whether the gate passed or
# failed: that outcome is the result), otherwise preregbench run's own (2 broken,
# 4 usage).  Extra arguments go to `preregbench run res`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export HF_HUB_OFFLINE=1
set +e
.venv/bin/preregbench run res --model smollm2-135m-instruct "$@"
status=$?
set -e
case "$status" in
    0) echo "demo: the RES gate passed (preregbench run exit 0)" ;;
    1) echo "demo: the run is complete and the RES gate failed for this model (preregbench run exit 1: a result, not an error)"; status=0 ;;
esac
exit "$status"
