#!/usr/bin/env bash
# Inside an offline bundle (scripts/offline_bundle.sh): check every part's SHA-256, reassemble and unpack the
# model, the corpora and the wheels (once; later runs reuse the unpacked folder after checking the parts
# again), set the environment and run the command given:
#
#   bash unpack_and_run.sh python -m helpers claims --device cuda --json claims.json
#
# UNPACK_DIR: where to unpack (default: unpacked/ beside this script); PYTHON: the interpreter that runs pip
# and a command starting with "python" (default: python3). A damaged or missing part stops it (exit 2) with
# one line naming the part. The environment set: PYTHONPATH (the unpacked packages first), BERT_ATTENTION_MODEL
# (the unpacked model), BERT_ATTENTION_DATA (the corpora), BERT_ATTENTION_CACHE (an analysis cache beside
# them), HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
target="${UNPACK_DIR:-$here/unpacked}"
env_lines="$("$PYTHON" "$here/unpack.py" "$here" "$target")" || exit 2
while IFS= read -r line; do
  name="${line%%=*}"
  value="${line#*=}"
  if [ "$name" = PYTHONPATH ] && [ -n "${PYTHONPATH:-}" ]; then value="$value:$PYTHONPATH"; fi
  export "$name=$value"
done <<< "$env_lines"
echo "unpacked in $target (model: ${BERT_ATTENTION_MODEL:-none}; corpora: $BERT_ATTENTION_DATA)" >&2
if [ "$#" -eq 0 ]; then
  echo "nothing to run: give a command, e.g. bash unpack_and_run.sh python -m helpers claims --json claims.json" >&2
  exit 0
fi
if [ "$1" = python ] || [ "$1" = python3 ]; then
  shift
  exec "$PYTHON" "$@"
fi
exec "$@"
