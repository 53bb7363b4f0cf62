#!/usr/bin/env bash
# A Slurm job array with one task per shard. From the repository's root, submit the shards, then the merge
# once every task succeeded:
#
#   export PROTOCOL=ladder RUN=rung-r2 RESULTS=/shared/results
#   jid=$(sbatch --parsable --array=1-4 scripts/launch/slurm-shards.sh --model openai:qwen3-8b@http://node7:8000/v1)
#   sbatch --dependency=afterok:"$jid" --wrap "scripts/launch/merge.sh 4"
#
# Every task writes its own run directory under RESULTS (a folder all nodes share); a failed task is
# resumed by submitting it again (sbatch --array=K ...). The options after the script name go to
# preregbench run.
#SBATCH --job-name=preregbench-shard
#SBATCH --array=1-4
#SBATCH --cpus-per-task=2
#SBATCH --time=24:00:00
set -euo pipefail
: "${SLURM_ARRAY_TASK_ID:?run this script as a job array: sbatch --array=1-N}"
count=${SLURM_ARRAY_TASK_COUNT:-$((SLURM_ARRAY_TASK_MAX - SLURM_ARRAY_TASK_MIN + 1))}
cd "${SLURM_SUBMIT_DIR:-.}"  # Slurm runs a copy of this script elsewhere; the checkout is where it was submitted
exec scripts/launch/shard.sh "$SLURM_ARRAY_TASK_ID" "$count" "$@"
