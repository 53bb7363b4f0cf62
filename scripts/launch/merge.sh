#!/usr/bin/env bash
# Join the N shards made by scripts/launch/shard.sh into RESULTS/PROTOCOL/RUN, decide it and verify it:
# scripts/launch/merge.sh N
#
# Environment: as for shard.sh (PROTOCOL, RESULTS, RUN). Exit status: that of preregbench merge
# (0 passed, 1 gate failed, 2 broken, 4 refused: nothing written); verify's findings are printed.
set -euo pipefail
if [ "$#" -ne 1 ]; then
    echo "usage: scripts/launch/merge.sh N" >&2
    exit 4
fi
n=$1
: "${PROTOCOL:?set PROTOCOL to the protocol of the shards}"
results=${RESULTS:-results}
run=${RUN:-sharded}
shards=()
for k in $(seq 1 "$n"); do
    shards+=("$results/$PROTOCOL/$run-shard$k-of-$n")
done
status=0
preregbench merge "$results/$PROTOCOL/$run" "${shards[@]}" || status=$?
if [ "$status" -ne 4 ]; then
    preregbench verify "$results/$PROTOCOL/$run" || true
fi
exit "$status"
