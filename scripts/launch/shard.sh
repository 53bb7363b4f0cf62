#!/usr/bin/env bash
# Measure one shard of a preregistered run: scripts/launch/shard.sh K N [preregbench run options...]
#
# Environment: PROTOCOL (required), RESULTS (default: results), RUN (default: sharded).
# The shard's run directory is RESULTS/PROTOCOL/RUN-shardK-of-N; running the same command again
# resumes a killed shard. Exit status: that of preregbench run (0 when the shard is complete).
set -euo pipefail
if [ "$#" -lt 2 ]; then
    echo "usage: scripts/launch/shard.sh K N [preregbench run options...]" >&2
    exit 4
fi
k=$1
n=$2
shift 2
: "${PROTOCOL:?set PROTOCOL to the protocol to run (preregbench list)}"
exec preregbench run "$PROTOCOL" --shard "$k/$n" --run-id "${RUN:-sharded}-shard$k-of-$n" \
    --results-dir "${RESULTS:-results}" "$@"
