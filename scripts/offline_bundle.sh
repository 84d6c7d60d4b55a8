#!/usr/bin/env bash
# Pack what an offline GPU node needs and lacks (the model, the corpora, the wheels a stock CUDA PyTorch image
# does not have, and the project) into OUT, in parts of at most --max-part-mb each with its SHA-256:
#
#   bash scripts/offline_bundle.sh OUT --max-part-mb 60 [--model SPEC] [--packages analysis] [--python-version 3.12]
#
# Then copy OUT to the node and run `bash OUT/unpack_and_run.sh python -m helpers claims ...` there.
# Every option: python scripts/offline_bundle.py --help.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python=python3
exec "$python" "$root/scripts/offline_bundle.py" "$@"
