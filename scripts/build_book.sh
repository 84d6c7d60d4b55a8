#!/usr/bin/env bash
# Set up .venv (if needed) and build the book with the offline default model on the full corpora.
# Warnings are errors. Output: _build/html/index.html. Chapters re-run only when their code changed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
jupyter-book build . -W -n --keep-going
python scripts/check_pages.py _build/html --max-mb 5
echo "book built: $PWD/_build/html/index.html"
