#!/usr/bin/env bash
# Run ONE Orpheus engine pinned to ONE MIG slice (or a whole GPU): deploy/orpheus/serve_slice.sh N
# Reads deploy/orpheus/slices.env (copy slices.env.example). The engine owns the slice; workers on this host
# reach it at unix:///run/parley/orpheus-N.sock (PARLEY_ENGINE_ADDRESS) and read its load from /capacity.
set -euo pipefail
N="${1:?slice index}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ENV_FILE="${SLICES_ENV:-$HERE/slices.env}"
# shellcheck disable=SC1090
source "$ENV_FILE"
uuid_var="SLICE_${N}_UUID"; max_var="SLICE_${N}_MAX_STREAMS"
UUID="${!uuid_var:?no $uuid_var in $ENV_FILE}"
MAX_STREAMS="${!max_var:-128}"
mkdir -p /run/parley

export CUDA_VISIBLE_DEVICES="$UUID"     # the process sees exactly one device: its slice
export CUDA_DEVICE_ORDER=PCI_BUS_ID
export OMP_NUM_THREADS=2                # the engine's own CPU work is small and vectorised
export TLLM_LOG_LEVEL=warning

args=(
  serve
  --address "unix:///run/parley/orpheus-${N}.sock"
  --http-port "$((9400 + N))"
  --backend trtllm
  --trtllm-runtime "${ORPHEUS_RUNTIME:-pytorch}"
  --model-dir "$ORPHEUS_MODEL_DIR"
  --snac-dir "$ORPHEUS_SNAC_DIR"
  --device cuda
  --max-streams "$MAX_STREAMS"
  --trtllm-max-batch "$MAX_STREAMS"
  --trtllm-kv-fp8 on
  --gpu-memory-fraction "${ORPHEUS_GPU_MEMORY_FRACTION:-0.80}"
  --temperature 0.5 --top-p 0.9 --repetition-penalty 1.1
)
[[ -n "${ORPHEUS_TOKENIZER_DIR:-}" ]] && args+=(--tokenizer-dir "$ORPHEUS_TOKENIZER_DIR")
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m plugins.orpheus "${args[@]}"
