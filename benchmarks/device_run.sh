#!/usr/bin/env bash
# One call on a lent GPU machine (offline: Python 3.12, torch with CUDA, numpy, scipy, scikit-learn, pandas; none of
# the project's other packages): unpack the offline bundle carried in the tree, run `claims` on the GPU with
# benchmarks/claims_device.py, and write the records (claims_device-<GPU>-<date>.json) into $OUT.
#
#   bash benchmarks/device_run.sh            # STEPS="default llama-small" by default
#
# Expects, under .offline/ (ignored by git; made on a machine with the project's .venv):
#   .offline/bundle/      bash scripts/offline_bundle.sh .offline/bundle --packages analysis --python-version 3.12
#   .offline/llama-1b/    python benchmarks/llama_config.py .offline/llama-1b   (a config and SmolLM2's tokenizer)
#   .offline/claims-cpu.json, .offline/claims-cpu-small.json  (optional) this commit's CPU `claims --json`, at the book's
#                         sizes and at SMALL below, for verdicts_equal_cpu
# The tree's own helpers/ runs (it comes first on PYTHONPATH), with the bundle's pinned packages behind it.
# STEPS, run in order, each within STEP_TIMEOUT seconds (default 540):
#   default        the default model at the book's sizes on cuda
#   default-small  the default model at SMALL on cuda
#   llama-small    the 1B Llama shape, --random-init all, at the issue's small sizes (LLAMA_SMALL)
#   llama          the 1B Llama shape, --random-init all, at the book's sizes
#   cpu            the default model at the book's sizes on this machine's CPU (a later `default` compares with it
#                  when .offline/claims-cpu.json is missing)
#   cpu-small      the default model at SMALL on this machine's CPU (likewise for `default-small`)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
OUT="${OUT:-$root/.offline/out}"
mkdir -p "$OUT"
bundle="${BUNDLE:-$root/.offline/bundle}"
llama="${LLAMA:-$root/.offline/llama-1b}"
export UNPACK_DIR="${UNPACK_DIR:-$root/.offline/unpacked}" PYTHON="${PYTHON:-python3}"
STEPS="${STEPS:-default llama-small}"
STEP_TIMEOUT="${STEP_TIMEOUT:-540}"
SMALL="--segments 40 --max-sentences 150 --max-documents 4 --epochs 2"
LLAMA_SMALL="--segments 50 --max-sentences 100 --max-documents 2 --seeds 1 --epochs 1"

# A command in the bundle's environment, with the tree's helpers/ first on PYTHONPATH.
inbundle=(bash "$bundle/unpack_and_run.sh" bash -c 'export PYTHONPATH="$0:$PYTHONPATH"; exec "$@"' "$root")
record() {  # a step: claims_device.py with the given options; its record in $OUT, its output in $OUT/NAME.log
  local name="$1"; shift
  echo "== $name: claims_device.py $* (at most $STEP_TIMEOUT s)"
  timeout -k 15 "$STEP_TIMEOUT" "${inbundle[@]}" "$PYTHON" benchmarks/claims_device.py --results "$OUT" \
    --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "   exit $? ($(tail -n 2 "$OUT/$name.log" | tr '\n' ' '))"
}
compare() {  # --compare-cpu with the first of the files given that exists
  local f; for f in "$@"; do [ -f "$f" ] && { echo "--compare-cpu $f"; return; }; done
}

(nvidia-smi || true) > "$OUT/nvidia-smi.txt" 2>&1
start=$(date +%s)
"${inbundle[@]}" "$PYTHON" -c 'import sys, torch, transformers, helpers; print("python", sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", "transformers",
transformers.__version__, "helpers from", helpers.__file__)' > "$OUT/versions.txt" 2>&1 || { cat "$OUT/versions.txt"; exit 2; }
echo "unpacked and imported in $(( $(date +%s) - start )) s: $(cat "$OUT/versions.txt")"
for step in $STEPS; do
  case "$step" in
    default)       record default --device cuda $(compare "$root/.offline/claims-cpu.json" "$OUT/cpu.json") ;;
    default-small) record default-small --device cuda $SMALL $(compare "$root/.offline/claims-cpu-small.json" "$OUT/cpu-small.json") ;;
    llama-small)   record llama-small --device cuda --model "$llama" --random-init all $LLAMA_SMALL ;;
    llama)         record llama --device cuda --model "$llama" --random-init all ;;
    cpu)           record cpu --device cpu ;;
    cpu-small)     record cpu-small --device cpu $SMALL ;;
    *) echo "STEPS: unknown step $step (default, default-small, llama-small, llama, cpu, cpu-small)" >&2; exit 2 ;;
  esac
done
echo "records in $OUT: $(ls "$OUT" | tr '\n' ' ')"
