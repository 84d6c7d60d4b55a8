#!/usr/bin/env bash
# Set up .venv (if needed) and run every test: unit and integration tests (tiny random BERT, no
# network), then each chapter notebook on a small configuration (BERT_ATTENTION_SMALL=1) via nbmake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
export BERT_ATTENTION_SMALL=1 HF_HUB_OFFLINE=1
python -m pytest tests notebooks --nbmake --nbmake-timeout=900 -q "$@"
