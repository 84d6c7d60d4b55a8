#!/usr/bin/env bash
# Set up .venv (if needed) and run every test: unit and integration tests (tiny random models, no network), and
# two small builds of the whole book (BERT_ATTENTION_SMALL=1; tests/book/conftest.py): one with the default model,
# which executes every chapter notebook and renders it with warnings as errors (a browser opens it), one with a
# tiny random decoder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The browser test opens a small build of the book in headless Chromium with networking disabled.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium for the browser test (Debian package)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: chromium is missing and cannot be installed here: the browser test will be skipped" >&2
  fi
fi
export PATH="$PWD/.venv/bin:$PATH"
# The distributed engine's tests run on a local two-worker Dask cluster: install the optional extra if missing.
python -c "import distributed" 2>/dev/null || python -m pip install -q -r requirements-distributed.txt
export BERT_ATTENTION_SMALL=1 HF_HUB_OFFLINE=1
# Each worker (and every kernel and command it starts) on its share of the cores, and OpenMP threads that sleep
# at a barrier instead of spinning: with two workers on two cores, torch's default (every core, spinning) made
# the two fight for each core. Measured on the 2-core machine, chapter 3 beside a two-thread torch process:
# 81 s by default, 32 s with one thread each and the passive policy (36 s alone). Results do not depend on it:
# the work whose sums must not depend on the machine sets its own threads (helpers/core/threads.py).
workers="${TEST_WORKERS:-2}"
threads=$(( $(nproc) / (workers > 0 ? workers : 1) ))
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( threads > 0 ? threads : 1 ))}"
export MKL_NUM_THREADS="${MKL_NUM_THREADS:-$OMP_NUM_THREADS}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# Two worker processes (pytest-xdist): much of a test's time uses one core (kernel start, imports, numpy). Tests
# that share work (each small book build and the tests that read it) stay together on one worker: see
# tests/conftest.py. The chapter notebooks run inside the small book build (default model), not a second time.
# --durations: the slowest tests, printed at the end of every run, to keep CI under 12 minutes.
python -m pytest tests -q --durations=25 -n "$workers" --dist loadgroup "$@"
