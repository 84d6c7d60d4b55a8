#!/usr/bin/env bash
# Set up .venv and the corpora (if needed: scripts/setup.sh), then build the book with the offline default model on
# the full corpora.
# Warnings are errors. Output: _build/html/index.html. Chapters re-run only when their code changed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# jupyter-book's execution cache notices code changes only: a build for another model
# ($BERT_ATTENTION_MODEL), size ($BERT_ATTENTION_SMALL) or comparison ($BERT_ATTENTION_COMPARE, the models of
# chapter 8) re-executes every chapter. The analyses' own results stay cached on disk, keyed by the model, so
# switching back is cheap.
stamp="model=${BERT_ATTENTION_MODEL:-default} small=${BERT_ATTENTION_SMALL:-0} compare=${BERT_ATTENTION_COMPARE:-default}"
if [ -d _build ] && [ "$(cat _build/.built-for 2>/dev/null)" != "$stamp" ]; then
  echo "building for $stamp (was: $(cat _build/.built-for 2>/dev/null || echo unknown)): chapters re-execute"
  rm -rf _build/.jupyter_cache _build/html _build/jupyter_execute
fi
mkdir -p _build && echo "$stamp" > _build/.built-for
# The pages are executed two at a time into jupyter-book's execution cache (scripts/execute_book.py: pages
# whose results others read go first); jupyter-book then finds them executed and renders the book.
python scripts/execute_book.py --jobs "${BOOK_JOBS:-2}"
jupyter-book build . -W -n --keep-going
python scripts/check_pages.py _build/html --max-mb 5
echo "book built: $PWD/_build/html/index.html"
