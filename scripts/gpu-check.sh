#!/usr/bin/env bash
# Checks a GPU machine end to end with random-weight checkpoints built on it from scripts/gpu/*.json:
# the suite's gpu-marked tests, P-Zombie at the 1B scale, RES, CWR, and CPU float32 against CUDA bfloat16
# logits.  Needs no network: missing test dependencies install from a wheel folder (fill it beforehand with
# --fill-wheels).  Every step logs to OUT_DIR/logs/STEP.log under its own timeout; a failing step does not stop
# the later ones; OUT_DIR/summary.json collects them, and the exit status is 0 only when every step passed.
# --device cpu --tiny rehearses every step on the CPU (benchmarks/pzombie/tests/test_gpu_check.py runs it).
# docs/scale-out.md ("Checking a GPU machine") describes the steps, their time and the tolerance.
set -euo pipefail

usage() {
    echo "usage: scripts/gpu-check.sh [--device cuda|cpu] [--tiny] [--wheels DIR] [--max-new-tokens N] [--pzombie-cap SECONDS] [--budget SECONDS] OUT_DIR" >&2
    echo "       scripts/gpu-check.sh --fill-wheels [--from-installed] [DIR]   (default DIR: .gpu-wheels)" >&2
    exit 4
}

root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
device=cuda
tiny=0
wheels="$root/.gpu-wheels"
tokens=""
pzombie_cap=150
budget=540
fill=0
from_installed=()
out=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --device) [ "$#" -ge 2 ] || usage; device="$2"; shift 2 ;;
        --tiny) tiny=1; shift ;;
        --wheels) [ "$#" -ge 2 ] || usage; wheels="$2"; shift 2 ;;
        --max-new-tokens) [ "$#" -ge 2 ] || usage; tokens="$2"; shift 2 ;;
        --pzombie-cap) [ "$#" -ge 2 ] || usage; pzombie_cap="$2"; shift 2 ;;
        --budget) [ "$#" -ge 2 ] || usage; budget="$2"; shift 2 ;;
        --fill-wheels) fill=1; shift ;;
        --from-installed) from_installed=(--from-installed); shift ;;
        -*) usage ;;
        *) [ -z "$out" ] || usage; out="$1"; shift ;;
    esac
done
case "$device" in cuda|cpu) ;; *) usage ;; esac
case "$pzombie_cap$budget" in ''|*[!0-9]*) usage ;; esac
case "$tokens" in *[!0-9]*) usage ;; esac

export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
if [ "$fill" -eq 1 ]; then
    exec "$python" "$root/scripts/gpu/steps.py" fill "${out:-$root/.gpu-wheels}" "${from_installed[@]}"
fi
[ -n "$out" ] || usage
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    echo "gpu-check: $out is not empty; give a new folder" >&2
    exit 4
fi
if ! ls "$wheels"/*.whl >/dev/null 2>&1 || [ ! -f "$wheels/bundled-tokenizers.tar.gz" ]; then
    echo "gpu-check: $wheels holds no wheels or no tokenizer archive; fill it first: scripts/gpu-check.sh --fill-wheels" >&2
    exit 4
fi
mkdir -p "$out/logs" "$out/runs" "$out/tokenizers"
out="$(cd "$out" && pwd)"
# The bundled models' tokenizers, for the tests that read one (models.bundled_tokenizer_folder) and the checkpoints.
tar -xzf "$wheels/bundled-tokenizers.tar.gz" -C "$out/tokenizers"
export PREREGBENCH_TOKENIZERS="$out/tokenizers"
wheels="$(cd "$wheels" && pwd)"
cd "$root"

if [ "$device" = cuda ]; then marker=gpu; else marker=cpu; fi
# Tokens per P-Zombie prompt, and CWR's reduced pass (units per condition, tokens): small on the CPU.
if [ "$tiny" -eq 1 ]; then cwr_units=1 cwr_tokens=4 default_tokens=1 layout_tokens=1
else cwr_units=2 cwr_tokens=16 default_tokens=16 layout_tokens=2; fi
tokens="${tokens:-$default_tokens}"
tiny_flag=()
[ "$tiny" -eq 1 ] && tiny_flag=(--tiny)
models="$out/models"
export PYTHONPATH="$root:$out/site"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"
printf '{"device": "%s", "tiny": %s, "pzombie_max_new_tokens": %s, "pzombie_cap_s": %s, "budget_s": %s, "python": "%s", "wheels": "%s"}\n' \
    "$device" "$([ "$tiny" -eq 1 ] && echo true || echo false)" "$tokens" "$pzombie_cap" "$budget" "$python" "$wheels" \
    > "$out/settings.json"

SECONDS=0
"$python" scripts/gpu/steps.py monitor "$out/memory.samples" --pid $$ --device "$device" &
monitor_pid=$!

# step NAME TIMEOUT_S COMMAND...: run COMMAND with its output in logs/NAME.log, killed (its whole process group)
# after TIMEOUT_S or when the --budget runs out; the exit status (124 on timeout, 125 when no budget was left to
# start it) goes to steps.tsv, and summary.json is rewritten after every step, so a killed script leaves one.
step() {
    local name="$1" limit="$2" status start left
    shift 2
    start="$(date +%s.%N)"
    left=$((budget - SECONDS))
    [ "$left" -ge "$limit" ] || limit="$left"
    if [ "$limit" -lt 5 ]; then
        echo "== $name: not run, the budget of ${budget} s is spent" | tee "$out/logs/$name.log"
        printf '%s\t%s\t%s\t%s\n' "$name" 125 "$start" "$(date +%s.%N)" >> "$out/steps.tsv"
        return 0
    fi
    echo "== $name (limit ${limit} s): $*" | tee "$out/logs/$name.log"
    set +e
    timeout -k 20 "$limit" "$@" >>"$out/logs/$name.log" 2>&1
    status=$?
    set -e
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$start" "$(date +%s.%N)" >> "$out/steps.tsv"
    echo "   $name: exit $status" | tee -a "$out/logs/$name.log"
    "$python" scripts/gpu/steps.py summary "$out" --device "$device" >/dev/null 2>&1 || true
}

pytest_run=("$python" -m pytest -p no:cacheprovider -n 0 -rs)
preregbench=("$python" -m benchmarks.core.cli run)

# 1. The test dependencies this machine lacks, from the wheel folder, into OUT_DIR/site (first on PYTHONPATH).
# shellcheck disable=SC2016  # the inner script reads its arguments as $0, $1, $2
step install 120 bash -c '"$0" -m pip install --quiet --no-index --no-deps --target "$1/site" "$2"/*.whl &&
    "$0" -c "import sys, syrupy, pytest_jsonreport, pytest_metadata as m; sys.exit(not m.__file__.startswith(sys.argv[1]))" "$1/site"' \
    "$python" "$out" "$wheels"

# 2. Random-weight checkpoints of the four layouts, built here from the JSON configs.
step build 420 "$python" scripts/gpu/checkpoints.py build --out "$models" --device "$device" "${tiny_flag[@]}" \
    --tokenizer "$out/tokenizers/gemma-3-270m" --record "$out/build.json"

# 3. Each layout loaded and run through the PX-Engine (in-process, both presets, its scale's constants).
step layouts 300 "$python" scripts/gpu/checkpoints.py layouts --out "$models" --device "$device" \
    --max-new-tokens "$layout_tokens" --record "$out/layouts.json"

# 4. Every gpu-marked test of the suite.  --device cpu leaves the protocols' own runs unselected (they are marked
#    cpu then); they run in the steps below.  On the CPU these tests skip, naming the missing device.
step marked-tests 300 "${pytest_run[@]}" -m gpu --device cpu --junitxml="$out/logs/marked-tests.xml"

# 5. P-Zombie at 1B with the device's preregistered isolation (cuda: spawn, one process per prompt; cpu: fork),
#    stopped at --pzombie-cap seconds: a stopped run keeps every prompt it measured (the summary gives the cost per
#    prompt and the full run's estimate).
step pzombie-default "$pzombie_cap" "${pytest_run[@]}" benchmarks/pzombie --scale 1B -m "$marker" --device "$device" \
    --model="$models/gemma3-1b" --pzombie-max-new-tokens="$tokens" --results-dir="$out/runs" --run-id=pzombie-default

# 6. P-Zombie at 1B, all 90 prompts under both presets in one process (a recorded deviation): the whole run to its
#    verdicts within the budget.
step pzombie-inprocess 480 "${pytest_run[@]}" benchmarks/pzombie --scale 1B -m "$marker" --device "$device" \
    --model="$models/gemma3-1b" --pzombie-max-new-tokens="$tokens" --pzombie-isolation=inprocess \
    --results-dir="$out/runs" --run-id=pzombie-inprocess

# 7-8. RES and CWR on the random 270M layout (CWR reduced: 2 units per condition and 16 new tokens; tiny: 1 and 4).
step res 300 "${preregbench[@]}" benchmarks/res --device "$device" --model="$models/gemma3-270m" \
    --results-dir="$out/runs" --run-id=res -p no:cacheprovider -n 0
step cwr 300 "${preregbench[@]}" benchmarks/cwr --device "$device" --model="$models/gemma3-270m" \
    --cwr-units-per-condition="$cwr_units" --cwr-max-new-tokens="$cwr_tokens" --results-dir="$out/runs" --run-id=cwr -p no:cacheprovider -n 0

# 9. First-token logits: CPU float32 against this device in its P-Zombie dtype (the CPU: bfloat16).
step logits 240 "$python" scripts/gpu/logits.py "$models/gemma3-270m" --device "$device" --dtype bfloat16 \
    --record "$out/logits.json"

kill "$monitor_pid" 2>/dev/null || true
wait "$monitor_pid" 2>/dev/null || true
"$python" scripts/gpu/steps.py summary "$out" --device "$device" | tee "$out/logs/summary.log"
exit "${PIPESTATUS[0]}"
