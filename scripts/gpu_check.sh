#!/usr/bin/env bash
# gpu_check.sh — Parley's one-call GPU check of the `--backend cuda` Orpheus engine (H100/H200), made for a
# lent, torch-only box (Python 3.12 + torch, numpy, transformers, aiohttp, pytest; no network, no weights).
#
#   make gpu-check-stage        # on the dev box: copies the Python 3.12 wheels the box lacks into .gpucheck/
#   bash scripts/gpu_check.sh   # on the GPU box (device tool: carry [".gpucheck"], timeout_s 480)
#   make gpu-check              # the same, where the tree and the GPU are on one machine
#
# 1. installs the carried wheels (snac, pydantic(-settings), pytest-asyncio, ...) into a private dir, no index;
# 2. `python -m benchmarks.gpu_check`: the full Orpheus 3B shape with random weights, graphs warmed first,
#    steady-state steps at BATCHES on two position mixes (stress: uniform 0..1500; reply: sentence pieces
#    starting fresh), admissions with prefill, kernels per step, the kernel profile of one 256-row step,
#    SNAC at the engine's 8-frame windows, capacity by the p90 rule (step + SNAC batch + host, 20 % margin),
#    steps with SNAC beside them, TTFB at 50/90 % of capacity, the step split, and the Triton split-KV
#    attention (bf16 and FP8 KV cache) against flex at COMPARE_TRITON rows; $OUT/gpu.json is rewritten
#    after every phase;
# 2b. the host speech engine on the GPU (PyTorch Whisper, `--backend torch`): the packaged tiny.en, carried
#    as an int8 copy, decoded on the GPU and the CPU over the carried speech (do the texts agree?), then
#    `python -m benchmarks.stt_engine` at STT_STREAMS concurrent streams: decodes/s, latency p50/p95;
# 3. `pytest -m gpu tests/orpheus` (collects without the serving extras: tests/orpheus/conftest.py);
# 4. prints a summary ($OUT/summary.txt).
# Files in $OUT (at most eight, what a device call returns): gpu.json, bench.log, stt_engine.json, stt.log,
# pytest-gpu.log, pytest-gpu.xml, env.txt, summary.txt.
# Knobs (env): GPU_CHECK_BUDGET_S=450 (whole run)  WHEELS=.gpucheck/wh  OUT=/tmp/gpu-check-out (or the device
# tool's $OUT)  BATCHES=1,16,64,128,256  LOADS=0.5,0.9  SECONDS_PER_LOAD=8  COMPARE_TRITON=64,128,256
#   TRITON_FP8=1  PROFILE_BATCH=256  FP8=0 (1: FP8 weights)  COMPILE=auto (the step: auto/on/off)
#   SNAC_ALONGSIDE=64,96,128,192,256  TESTS=1 (0: no pytest step); an empty list skips its phase.  ORPHEUS=1 (0: no engine benchmark)  STT=1 (0: no speech engine step)
#   STT_STREAMS=64,256  STT_SECONDS=15  STT_MAX_BATCH=64  STT_RESERVE_S=80 (kept for step 2b)
#   TEST_RESERVE_S=105 (kept for step 3 and the summary)
#   STT_PROFILE=1,16,64,128 (batch sizes timed phase by phase: features, encoder, greedy decoding)
#   STT_BESIDE=96x2 (off by default; the Orpheus steps and first audio again while the speech engine decodes
#   for 96 callers at 2 decodes/s each on the same GPU: stt_beside.json, gpu.json's `beside`)
#   STT_BESIDE_SECONDS=45
set -u
set -o pipefail

T_START=$SECONDS
BUDGET=${GPU_CHECK_BUDGET_S:-450}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
OUT=${OUT:-/tmp/gpu-check-out}
WHEELS=${WHEELS:-$ROOT/.gpucheck/wh}
PY=${PYTHON:-python3}
SITE=/tmp/gpu-check-site
mkdir -p "$OUT"
export OUT PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false

log() { printf '[gpu_check %4ss] %s\n' "$((SECONDS - T_START))" "$*"; }
left() { echo $((BUDGET - (SECONDS - T_START))); }

# ---- 1. setup -------------------------------------------------------------------------------------------
rm -rf "$SITE" && mkdir -p "$SITE"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  if timeout 90 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
    "$WHEELS"/*.whl >/tmp/gpu-check-pip.log 2>&1; then
    log "installed $(ls "$WHEELS"/*.whl | wc -l) carried wheels"
  else
    log "WARN: carried wheel install failed; going on with what the image has"
    tail -20 /tmp/gpu-check-pip.log
  fi
else
  log "no wheels at $WHEELS: using the image's packages only"
fi
export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
timeout 60 "$PY" - >"$OUT/env.txt" 2>&1 <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("torch", "numpy", "snac", "transformers", "safetensors", "pydantic", "pydantic_settings", "aiohttp",
          "pytest", "pytest_asyncio", "pytest_timeout", "soundfile", "prometheus_client", "livekit"):
    try:
        print(f"{m:18s} {getattr(importlib.import_module(m), '__version__', 'ok')}")
    except Exception as e:  # noqa: BLE001
        print(f"{m:18s} MISSING ({type(e).__name__})")
import torch
print("cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, f"sm_{p.major}{p.minor}", round(p.total_memory / 2**30, 1), "GiB")
PY
log "environment in env.txt ($(grep -c MISSING "$OUT/env.txt") modules missing)"

# ---- 2. benchmark, phase by phase -----------------------------------------------------------------------
STT_MODEL=${STT_MODEL:-$ROOT/.gpucheck/whisper}
# what the later steps took on an H200 (2026-11-27): the speech engine step ~85 s, the gpu tests ~85 s
STT_RESERVE=0
[ "${STT:-1}" != 0 ] && [ -f "$STT_MODEL/model.bin" ] && STT_RESERVE=${STT_RESERVE_S:-80}
TEST_RESERVE=${TEST_RESERVE_S:-105} # the tests and the summary
[ "${TESTS:-1}" = 0 ] && TEST_RESERVE=20
T_BENCH=$(($(left) - TEST_RESERVE - STT_RESERVE))
((T_BENCH < 60)) && T_BENCH=60
# STT_BESIDE=STREAMSxRATE (e.g. 96x2): the Orpheus steps and first audio measured again while the speech engine
# decodes for STREAMS callers at RATE decodes/s each (paced), on the same GPU (gpu.json's `beside`)
if [ -n "${STT_BESIDE:-}" ] && [ -f "$STT_MODEL/model.bin" ]; then
  export BESIDE_READY=/tmp/gpu-check-beside.ready
  export BESIDE="$PY -u -m benchmarks.stt_engine --device ${STT_DEVICE:-cuda} --backend torch --model $STT_MODEL \
--streams ${STT_BESIDE%x*} --rate-per-stream ${STT_BESIDE#*x} --seconds ${STT_BESIDE_SECONDS:-45} \
--max-batch ${STT_MAX_BATCH:-64} --audio $ROOT/.gpucheck/speech --ready-file $BESIDE_READY \
--json $OUT/stt_beside.json > $OUT/stt_beside.log 2>&1"
fi
if [ "${ORPHEUS:-1}" = 0 ]; then
  bench_rc=0
  log "benchmark: skipped (ORPHEUS=0)"
else
  log "benchmark: up to ${T_BENCH}s"
  timeout -k 15 "$T_BENCH" "$PY" -u -m benchmarks.gpu_check --out "$OUT" --budget-s $((T_BENCH - 20)) 2>&1 |
    tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
  log "benchmark rc=$bench_rc"
fi

# ---- 2b. the host speech engine on the GPU --------------------------------------------------------------
if [ "$STT_RESERVE" = 0 ]; then
  stt_rc=0
  log "speech engine: skipped (STT=0, or no $STT_MODEL: run make gpu-check-stage)"
else
  T_STT=$(($(left) - TEST_RESERVE))
  ((T_STT < 60)) && T_STT=60
  log "speech engine (PyTorch Whisper on the GPU): up to ${T_STT}s"
  timeout -k 10 "$T_STT" "$PY" -u -m benchmarks.stt_engine --device cuda --backend torch --model "$STT_MODEL" \
    --streams "${STT_STREAMS:-64,256}" --seconds "${STT_SECONDS:-15}" --max-batch "${STT_MAX_BATCH:-64}" \
    --audio "$ROOT/.gpucheck/speech" --agree "$ROOT/.gpucheck/speech" --profile "${STT_PROFILE-1,16,64,128}" \
    --json "$OUT/stt_engine.json" 2>&1 |
    tee "$OUT/stt.log"
  stt_rc=${PIPESTATUS[0]}
  log "speech engine rc=$stt_rc"
fi

# ---- 3. gpu-marked tests --------------------------------------------------------------------------------
if [ "${TESTS:-1}" = 0 ]; then
  test_rc=0
  log "pytest -m gpu: skipped (TESTS=0)"
else
  T_TEST=$(($(left) - 15))
  ((T_TEST < 30)) && T_TEST=30
  log "pytest -m gpu tests/orpheus: up to ${T_TEST}s"
  timeout -k 10 "$T_TEST" "$PY" -m pytest -m gpu -q -rA --show-capture=no -p no:cacheprovider -o timeout=120 \
    --junitxml="$OUT/pytest-gpu.xml" tests/orpheus 2>&1 | tee "$OUT/pytest-gpu.log"
  test_rc=${PIPESTATUS[0]}
  log "pytest rc=$test_rc"
fi

# ---- 4. summary -----------------------------------------------------------------------------------------
timeout 30 "$PY" - <<'PY' 2>&1 | tee "$OUT/summary.txt"
import json, os
import xml.etree.ElementTree as ET
out = os.environ["OUT"]
try:
    r = json.load(open(os.path.join(out, "gpu.json")))
except Exception as e:  # noqa: BLE001
    r = {}
    print("gpu.json: none (", type(e).__name__, e, ")")
if r:
    print("device:", r.get("device"), "| dtype:", r.get("dtype"), "| attention:", r.get("attention_backend"),
          "| partial:", r.get("partial"))
    print("compiled step:", r.get("compiled"), "| compile error:", r.get("compile_error") or "-",
          "| prefill graphs:", r.get("prefill_graphs"))
    print("capacity rule:", r.get("capacity_rule"), "| host in it:", r.get("host_us_per_id_in_rule"), "µs/id",
          "| mean positions:", r.get("mean_position"))
    for mix, key, cap in (("stress", "capacity", "streams_realtime"), ("reply", "capacity_reply",
                                                                      "streams_realtime_reply")):
        print(f"{mix} mix: {'batch':>6} {'mean ms':>8} {'p90':>8} {'+SNAC':>7} {'+host':>7} {'total':>8}  fits")
        mean = r.get("step_ms" if mix == "stress" else "step_ms_reply", {})
        for b, c in (r.get(key) or {}).items():
            print(f"{'':11}{b:>6} {mean.get(b, '-'):>8} {c['step_p90_ms']:>8} {c['snac_ms']:>7} {c['host_ms']:>7} "
                  f"{c['total_ms']:>8}  {'yes' if c['fits'] else 'no'}")
        print(f"  {cap}: {r.get(cap)}")
    print("snac_ms (windows: ms, 8-frame windows):", r.get("snac_ms"), "| bf16:", r.get("snac_ms_bf16"))
    att = r.get("attention_compare") or {}
    if att:
        print("decode attention, step ms [mean, p90] by rows:")
        for name in (r.get("attention_backend"), "triton", "triton_fp8_kv"):
            for mix, row in (att.get(name) or {}).items():
                print(f"  {name:>14} {mix:>6}: {row}")
        print("  triton compiled:", att.get("triton_compiled"), att.get("triton_compile_error") or "",
              "| fp8 KV compiled:", att.get("triton_fp8_kv_compiled"), att.get("triton_fp8_kv_compile_error") or "")
    profiles = dict(r.get("step_profile") or {})
    if att.get("triton_profile"):
        profiles["triton, stress"] = att["triton_profile"]
    for name, pr in profiles.items():
        print(f"kernel profile, one {pr.get('batch')}-row step ({name}, mean position {pr.get('mean_position')}):",
              pr.get("device_ms", pr.get("cpu_ms")), "ms,", pr.get("kernels"), "kernels")
        for k, n, ms, share in pr.get("top", []):
            print(f"  {share:>5} % {ms:>8} ms x{n:<4} {k}")
    for b, m in (r.get("steps_with_snac") or {}).items():
        print(f"  steps_with_snac, b={b}: {m}")
    print("streams_realtime_alongside:", r.get("streams_realtime_alongside"))
    for load, t in (r.get("ttfb_ms") or {}).items():
        print(f"TTFB {load} ({t.get('streams')} streams, {t.get('utterances')} utt): p50 {t.get('p50')} "
              f"p90 {t.get('p90')} p99 {t.get('p99')} ms")
    bs = r.get("beside")
    if bs:
        print("BESIDE the speech engine's load (ready after", r.get("beside_ready_after_s"), "s, exit",
              r.get("beside_exit"), "): step ms", bs.get("step_ms"), "p90", bs.get("step_ms_p90"))
        for b, m in (bs.get("steps_with_snac") or {}).items():
            print(f"  beside, steps_with_snac, b={b}: {m}")
        print("  beside, streams_realtime_alongside:", bs.get("streams_realtime_alongside"))
        for load, t in (bs.get("ttfb_ms") or {}).items():
            print(f"  beside, TTFB {load} ({t.get('streams')} streams): p50 {t.get('p50')} p90 {t.get('p90')} "
                  f"p99 {t.get('p99')} ms")
        try:
            sb = json.load(open(os.path.join(out, "stt_beside.json")))
            for row in sb.get("by_streams", []):
                print(f"  the speech engine meanwhile: {row['streams']} streams, offered {row['offered_per_s']}/s, "
                      f"{row['decodes_per_s']} decodes/s, latency {row['latency_ms']}, final {row['final_ms']}, "
                      f"mean batch {row['mean_batch']}, errors {row['errors']}")
        except Exception as e:  # noqa: BLE001
            print("stt_beside.json: none (", type(e).__name__, e, ")")
    print("kernels/step:", r.get("kernels_per_step"), "| graphs:", r.get("graphs_warmed"),
          "| captured after ready:", r.get("graphs_captured_after_ready"))
    print("cpu_us_per_token:", r.get("cpu_us_per_token"), "| memory GB:", r.get("gpu_memory_gb"))
    print("step parts (decode alone, one admission pass of 1 / 8):", r.get("step_parts"))
    ap = r.get("admission_profile") or {}
    print("admission pass on the device:", ap.get("device_ms"), "ms,", ap.get("kernels"), "kernels")
    print("phase s:", r.get("phase_s"))
    for k, v in (r.get("errors") or {}).items():
        print(f"ERROR {k}: {str(v)[:300]}")
    for k, v in (r.get("skipped") or {}).items():
        print(f"skipped for time: {k} ({v})")
try:
    s = json.load(open(os.path.join(out, "stt_engine.json")))
    print("speech engine:", s.get("backend"), s.get("model"), "| GPU/CPU texts:", s.get("gpu_cpu_agreement"))
    print("  phases by batch (ms):", s.get("torch_phases_ms"))
    for row in s.get("by_streams", []):
        print(f"  {row['streams']} streams: {row['decodes_per_s']} decodes/s, latency {row['latency_ms']} ms, "
              f"final {row['final_ms']}, mean batch {row['mean_batch']}, errors {row['errors']}")
except Exception as e:  # noqa: BLE001
    print("stt_engine.json: none (", type(e).__name__, e, ")")
try:
    root = ET.parse(os.path.join(out, "pytest-gpu.xml")).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    a = suite.attrib
    print(f"pytest -m gpu: {a.get('tests')} tests, {a.get('failures')} failed, {a.get('errors')} errors, "
          f"{a.get('skipped')} skipped, {a.get('time')} s")
    for tc in suite.iter("testcase"):
        for bad in ("failure", "error"):
            el = tc.find(bad)
            if el is not None:
                msg = (el.get("message") or el.text or "").strip().splitlines()
                print(f"  {bad.upper()} {tc.get('name')}: {msg[0][:200] if msg else ''}")
except Exception as e:  # noqa: BLE001
    print("pytest-gpu.xml: none (", type(e).__name__, e, ")")
PY
log "done: bench rc=$bench_rc, speech engine rc=$stt_rc, pytest rc=$test_rc, $(left)s of the budget left"
[ "$bench_rc" = 0 ] && [ "$stt_rc" = 0 ] && [ "$test_rc" = 0 ]
