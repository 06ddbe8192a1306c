#!/usr/bin/env bash
# Engine image entrypoint.
#   prepare  fetch weights into the cache volume and build the FP8 engine for this GPU (idempotent)
#   serve    prepare (a no-op when the pod's init container already did it), then run the engine
# Anything else runs `python -m plugins.orpheus <args>` (synth, make-test-model, ...).
set -euo pipefail
cd /app

cache="${PARLEY_MODEL_CACHE:-/models}"
key="${PARLEY_ENGINE_KEY:-default}"
max_batch="${PARLEY_ENGINE_MAX_STREAMS:-32}"
socket="${PARLEY_ENGINE_SOCKET:-/run/parley/orpheus.sock}"

prepare() {
  python deploy/engine_prepare.py --cache-dir "$cache" --engine-key "$key" --max-batch "$max_batch" "$@"
}

case "${1:-serve}" in
  prepare)
    shift
    prepare "$@"
    ;;
  serve)
    shift || true
    env_lines="$(prepare --print-env)"
    eval "$env_lines"
    exec python -m plugins.orpheus serve \
      --backend trtllm \
      --model "$PARLEY_ORPHEUS_CHECKPOINT" \
      --engine-dir "$PARLEY_TRTLLM_ENGINE_DIR" \
      --snac "$PARLEY_SNAC_DIR" \
      --listen "unix://$socket" \
      --max-streams "$max_batch" \
      "$@"
    ;;
  *)
    exec python -m plugins.orpheus "$@"
    ;;
esac
