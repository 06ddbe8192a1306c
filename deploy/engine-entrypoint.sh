#!/usr/bin/env bash
# Engine image entrypoint.
#   prepare  fetch weights into the cache volume and build the FP8 engine for this GPU (idempotent)
#   serve    prepare (a no-op when the pod's init container already did it), then run the engine with the
#            backend PARLEY_ORPHEUS_BACKEND names: cuda (default, the measured one: PyTorch + CUDA graphs on
#            the fetched checkpoint, no build), trtllm (builds/loads the FP8 engine; not yet run on a GPU) or
#            torch (eager, any device)
# Anything else runs `python -m plugins.orpheus <args>` (synth, make-test-model, ...).
set -euo pipefail
cd "$(dirname "$0")/.."  # /app in the image, the repository root elsewhere

# the same names as the worker's (README, "Configuration"): the engine listens where the worker connects
cache="${PARLEY_MODEL_CACHE_DIR:-/models}"
key="${PARLEY_ENGINE_KEY:-default}"
max_batch="${PARLEY_ENGINE_MAX_STREAMS:-32}"
address="${PARLEY_ENGINE_ADDRESS:-unix:///run/parley/engine/orpheus.sock}"
http_port="${PARLEY_ENGINE_HTTP_PORT:-9101}"
runtime=pytorch  # TensorRT-LLM's PyTorch runtime; `prepare --runtime engine` + `--trtllm-runtime engine` to try the other
backend="${PARLEY_ORPHEUS_BACKEND:-cuda}"
device="${PARLEY_ORPHEUS_DEVICE:-cuda}"

prepare() {
  local build=()
  if [ -n "${PARLEY_ENGINE_BUILD_COMMAND:-}" ]; then build=(--build-command "$PARLEY_ENGINE_BUILD_COMMAND"); fi
  python deploy/engine_prepare.py --cache-dir "$cache" --engine-key "$key" --max-batch "$max_batch" \
    --runtime "$runtime" "${build[@]}" "$@"
}

case "${1:-serve}" in
  prepare)
    shift
    prepare "$@"
    ;;
  serve)
    shift || true
    case "$backend" in
      trtllm) env_lines="$(prepare --print-env)" ;;
      cuda | torch) env_lines="$(prepare --fetch-only --print-env)" ;;  # a checkpoint, no engine build
      *)
        echo "error: PARLEY_ORPHEUS_BACKEND must be trtllm, cuda or torch (got '$backend')" >&2
        exit 2
        ;;
    esac
    eval "$env_lines"
    if [ "$backend" = trtllm ]; then
      # The build output dir itself is self-contained (FP8 weights or TensorRT engine, plus the tokenizer):
      # the engine loads it directly; "pytorch" = TensorRT-LLM's PyTorch runtime, "engine" = a built engine.
      # The build is for the same runtime (prepare passes --runtime), so the two always match.
      model=(--trtllm-runtime "$runtime" --model-dir "$PARLEY_TRTLLM_ENGINE_DIR")
    else
      model=(--model-dir "$PARLEY_ORPHEUS_CHECKPOINT")
    fi
    exec python -m plugins.orpheus serve \
      --backend "$backend" \
      "${model[@]}" \
      --snac-dir "$PARLEY_SNAC_DIR" \
      --device "$device" \
      --max-streams "$max_batch" \
      --address "$address" \
      --http-port "$http_port" \
      "$@"
    ;;
  *)
    exec python -m plugins.orpheus "$@"
    ;;
esac
