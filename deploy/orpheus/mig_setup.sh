#!/usr/bin/env bash
# Carve one H100 80GB into MIG slices for Orpheus engines (one engine process per slice).
#
#   sudo deploy/orpheus/mig_setup.sh [GPU_INDEX] [LAYOUT]
#
# LAYOUT (H100 80GB GPU-instance profile ids: 0=7g.80gb 5=4g.40gb 9=3g.40gb 14=2g.20gb 15=1g.20gb 19=1g.10gb):
#   halves   (default) 3g.40gb + 3g.40gb — the "MIG half" the published 16–24 streams figure refers to
#   4+3      4g.40gb + 3g.40gb — uses all 7 compute slices; give the 4g slice the larger max-streams
#   full     no MIG (7g.80gb as one instance is pointless; this turns MIG off)
# Enabling MIG needs an idle GPU (no processes) and, on some hosts, a GPU reset. Prints the MIG UUIDs to
# put in deploy/orpheus/slices.env. Every command, the UUID listing included, is limited to GPU_INDEX: other GPUs
# on the host (and their slices) are neither touched nor listed.
set -euo pipefail
GPU="${1:-0}"
LAYOUT="${2:-halves}"

if [[ "$LAYOUT" == "full" ]]; then
  nvidia-smi mig -i "$GPU" -dci || true
  nvidia-smi mig -i "$GPU" -dgi || true
  nvidia-smi -i "$GPU" -mig 0
  exit 0
fi

case "$LAYOUT" in
  halves) PROFILES="9,9" ;;
  4+3) PROFILES="5,9" ;;
  *) echo "unknown layout $LAYOUT (halves | 4+3 | full)" >&2; exit 2 ;;
esac

if [[ "$(nvidia-smi -i "$GPU" --query-gpu=mig.mode.current --format=csv,noheader)" != "Enabled" ]]; then
  nvidia-smi -i "$GPU" -mig 1
  if [[ "$(nvidia-smi -i "$GPU" --query-gpu=mig.mode.current --format=csv,noheader)" != "Enabled" ]]; then
    echo "MIG mode is pending: stop all GPU processes and reset the GPU (nvidia-smi -r -i $GPU), then re-run" >&2
    exit 1
  fi
fi

# start from a clean slate, then create the GPU instances with their default compute instance (-C)
nvidia-smi mig -i "$GPU" -dci >/dev/null 2>&1 || true
nvidia-smi mig -i "$GPU" -dgi >/dev/null 2>&1 || true
nvidia-smi mig -i "$GPU" -cgi "$PROFILES" -C
nvidia-smi -L -i "$GPU" | grep -E "MIG" | sed -E 's/.*(MIG-[0-9a-f-]+).*/\1/' | nl -v0 -w1 -s' ' | while read -r idx uuid; do
  echo "SLICE_${idx}_UUID=${uuid}"
done
