"""Orpheus engine speed on one GPU with the `--backend cuda` generator: how many real-time streams it holds.

    python -m benchmarks.gpu [--json out/gpu.json] [--tiny] [--seconds 20] [--fp8]

Random weights of the real Orpheus 3B shape (speed does not depend on the weights' values), bf16, the same
generator, sampling and SNAC decoder the engine serves with. Measured:
- `step_ms` {batch: ms}: one decode step (every stream +1 id) at a mid-utterance KV length, CUDA graphs;
- `snac_ms` {batch: ms}: one SNAC decode of that many 6-frame windows (the engine's steady-state window);
- `streams_realtime`: the largest measured batch whose step, plus its share of SNAC work (one window per
  stream every 28 ids), fits the real-time step budget (1000 / 82.03 ms) with 20 % headroom;
- `ttfb_ms` {load: {p50, p99}}: Poisson arrivals at 50/75/90 % of that capacity through the generator
  (prefill between decode steps), first audio = the id that completes the first decodable window (21 ids)
  plus one SNAC decode of the window batch in flight at that moment;
- `gpu_memory_gb`: weights, KV cache, peak;
- `cpu_us_per_token`: host time per generated id: the generator's own host work per step (launch and
  bookkeeping, not the wait for the device) plus the engine's frame assembler on the same ids.
Without CUDA it runs the same code at tiny shapes on CPU and says so in `device` (a correctness run, not a
speed figure). Needs only torch, numpy and snac.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from plugins.orpheus.engine import ids

REALTIME_STEP_MS = 1000.0 / ids.TOKENS_PER_SECOND  # 12.19 ms: one id per stream per step
HEADROOM = 1.2
STEADY_WINDOW_FRAMES = 6  # 2 frames of left context + 4 new frames
IDS_PER_WINDOW = 4 * ids.FRAME_TOKENS


@dataclass(frozen=True)
class GpuBenchOptions:
    tiny: bool = False
    batches: tuple[int, ...] = (1, 8, 32, 64, 128, 192, 256, 320, 384, 448, 512)
    snac_batches: tuple[int, ...] = (1, 8, 32, 64, 128)
    rows: int = 512
    max_seq: int = 1024  # 512 rows × 1024 ids of bf16 KV for 28 layers ≈ 60 GB
    prompt_len: int = 32
    kv_position: int = 400  # mid-utterance: prompt + ~4.5 s of audio
    utterance_ids: int = 490  # TTFB runs: 70 frames ≈ 6 s of speech per utterance
    step_repeats: int = 30
    seconds_per_load: float = 20.0
    loads: tuple[float, ...] = (0.5, 0.75, 0.9)
    prefill_tokens: int = 1024
    fp8: bool = False
    seed: int = 0
    shape: dict[str, Any] = field(default_factory=dict)  # LlamaShape overrides (tiny runs)
    snac: dict[str, Any] = field(default_factory=dict)  # SNAC config overrides (tiny runs)

    @classmethod
    def cpu_tiny(cls) -> GpuBenchOptions:
        return cls(
            tiny=True,
            batches=(1, 2, 4, 8),
            snac_batches=(1, 2, 4),
            rows=8,
            max_seq=256,
            prompt_len=16,
            kv_position=100,
            utterance_ids=70,
            step_repeats=5,
            seconds_per_load=2.0,
            shape=dict(hidden_size=64, intermediate_size=128, layers=2, heads=4, kv_heads=2),
            snac=dict(decoder_dim=64, encoder_dim=16),
        )


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def build(o: GpuBenchOptions, device: str) -> tuple[Any, Any, dict[str, float]]:
    import torch
    from snac import SNAC

    from plugins.orpheus.engine.cuda.generator import BatchGenerator, GeneratorOptions
    from plugins.orpheus.engine.cuda.model import LlamaShape, OrpheusLlama
    from plugins.orpheus.engine.snac_decoder import SNAC_24KHZ_CONFIG, DecoderOptions, SnacDecoder

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    shape = replace(LlamaShape(), **o.shape)
    model = OrpheusLlama.random(shape, dtype, device, seed=o.seed)
    if o.fp8:
        model.use_fp8()
    weights = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    # SNAC first, as the engine does: its graphs are captured before the KV cache takes the memory
    snac = SNAC(**{**SNAC_24KHZ_CONFIG, **o.snac, "noise": False}).eval()
    decoder = SnacDecoder(snac, DecoderOptions(device=device, max_batch=max(o.snac_batches)))
    gen = BatchGenerator(model, GeneratorOptions(rows=o.rows, max_seq=o.max_seq))
    mem = {"weights": weights / 1e9, "kv_cache": model.kv_bytes() / 1e9}
    return gen, decoder, mem


def measure_steps(gen: Any, o: GpuBenchOptions, device: str) -> dict[int, float]:
    import torch

    out: dict[int, float] = {}
    for b in o.batches:
        gen.occupy(b, o.kv_position)
        for _ in range(3):  # graph capture + warm-up
            gen.step()
        times = []
        for _ in range(o.step_repeats):
            _sync(torch, device)
            t = time.perf_counter()
            gen.step()
            times.append(time.perf_counter() - t)  # step() ends with the device→host copy of the ids
        out[b] = float(np.median(times) * 1000)
        for row in range(b):
            gen.release(row)
    return out


def measure_snac(decoder: Any, o: GpuBenchOptions) -> dict[int, float]:
    rng = np.random.default_rng(o.seed)
    decoder.decode([rng.integers(0, ids.CODEBOOK, (STEADY_WINDOW_FRAMES, 7))])
    out: dict[int, float] = {}
    for b in o.snac_batches:
        windows = [rng.integers(0, ids.CODEBOOK, (STEADY_WINDOW_FRAMES, 7)) for _ in range(b)]
        decoder.decode(windows)  # capture / warm-up
        times = []
        for _ in range(5):
            t = time.perf_counter()
            decoder.decode(windows)
            times.append(time.perf_counter() - t)
        out[b] = float(np.median(times) * 1000)
    return out


def interpolate(table: dict[int, float], x: float) -> float:
    """Piecewise-linear in the measured points; linear extrapolation past the largest."""
    xs = sorted(table)
    if x <= xs[0]:
        return table[xs[0]]
    for a, b in itertools.pairwise(xs):
        if x <= b:
            return table[a] + (table[b] - table[a]) * (x - a) / (b - a)
    a, b = xs[-2], xs[-1]
    return table[b] + (table[b] - table[a]) * (x - b) / (b - a) if len(xs) > 1 else table[b] * x / b


def streams_realtime(step_ms: dict[int, float], snac_ms: dict[int, float]) -> int:
    """Largest measured batch b with 1.2 × (step(b) + SNAC(b windows) / 28) ≤ 12.19 ms."""
    best = 0
    for b, ms in sorted(step_ms.items()):
        per_step = ms + interpolate(snac_ms, b) / IDS_PER_WINDOW
        if HEADROOM * per_step <= REALTIME_STEP_MS:
            best = b
    return best


def measure_ttfb(
    gen: Any, o: GpuBenchOptions, capacity: int, load: float, snac_ms: dict[int, float], first_ids: int
) -> tuple[dict[str, float], float]:
    """Poisson arrivals at `load` × capacity streams; returns TTFB {p50, p99} and host µs per id."""
    from plugins.orpheus.engine.frames import FrameAssembler

    rng = np.random.default_rng(o.seed + int(load * 100))
    streams = max(1, round(load * capacity))
    utterance_s = o.utterance_ids / ids.TOKENS_PER_SECOND
    rate = streams / utterance_s  # Little's law: `streams` busy on average when each lasts its audio time
    horizon = o.seconds_per_load
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=int(rate * horizon * 2) + 4))
    arrivals = arrivals[arrivals < horizon]
    if arrivals.size == 0:  # a short window at a low rate may draw none: one sample is the minimum
        arrivals = np.zeros(1)
    asm = FrameAssembler(o.rows, o.utterance_ids // 7 + 2)
    row_start = np.zeros(o.rows)
    row_count = np.zeros(o.rows, dtype=np.int64)
    ttfb: list[float] = []
    waiting: list[float] = []
    nxt, host_s, ids_made = 0, 0.0, 0
    gen.host_s = 0.0
    t0 = time.perf_counter()
    while True:
        now = time.perf_counter() - t0
        while nxt < arrivals.size and arrivals[nxt] <= now:
            waiting.append(float(arrivals[nxt]))
            nxt += 1
        if now > horizon + 2 * utterance_s or (nxt == arrivals.size and not waiting and not gen.active_rows):
            break
        budget = o.prefill_tokens
        while waiting and gen.free_rows and budget > 0:
            prompt = rng.integers(0, ids.BOS, o.prompt_len).tolist()
            prompt[-1] = ids.START_OF_SPEECH
            row, _, _ = gen.admit(prompt, o.utterance_ids, 0.6, 0.9, 1.1)
            budget -= o.prompt_len
            row_start[row], row_count[row] = waiting.pop(0), 1
            asm.open(row, o.utterance_ids)
        if not gen.active_rows:
            time.sleep(0.0005)
            continue
        res = gen.step()
        t = time.perf_counter()
        asm.push(res.rows, res.tokens)  # the engine's own frame assembly of the same ids
        host_s += time.perf_counter() - t
        ids_made += res.rows.size
        row_count[res.rows] += 1
        first = res.rows[row_count[res.rows] == first_ids]
        if first.size:
            now = time.perf_counter() - t0
            windows = max(1, math.ceil(gen.active_rows / 4))  # ~¼ of streams have a window due at once
            snac = interpolate(snac_ms, windows)
            ttfb.extend(((now - row_start[first]) * 1000 + snac).tolist())
        for row in res.rows[res.finished].tolist():
            asm.close(row)
    host_us = (gen.host_s + host_s) / max(1, ids_made) * 1e6
    if not ttfb:
        return {"p50": float("nan"), "p99": float("nan"), "streams": streams}, host_us
    a = np.asarray(ttfb)
    return {
        "p50": round(float(np.percentile(a, 50)), 2),
        "p99": round(float(np.percentile(a, 99)), 2),
        "streams": streams,
        "utterances": int(a.size),
    }, host_us


def run(o: GpuBenchOptions) -> dict[str, Any]:
    import torch

    from benchmarks.decoder import first_audio_tokens

    device = "cuda" if torch.cuda.is_available() and not o.tiny else "cpu"
    if device == "cpu" and not o.tiny:
        o = replace(GpuBenchOptions.cpu_tiny(), fp8=False)
    torch.manual_seed(o.seed)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    gen, decoder, mem = build(o, device)
    step_ms = measure_steps(gen, o, device)
    snac_ms = measure_snac(decoder, o)
    capacity = streams_realtime(step_ms, snac_ms)
    first_ids = first_audio_tokens()
    ttfb: dict[str, Any] = {}
    host_us: list[float] = []
    for load in o.loads:
        # a CPU run has no real-time capacity; it drives the same loop at the largest batch it measured
        stats, us = measure_ttfb(gen, o, capacity or max(o.batches), load, snac_ms, first_ids)
        ttfb[f"{round(load * 100)}%"] = stats
        host_us.append(us)
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        label = f"cuda: {props.name} (torch {torch.__version__}, CUDA {torch.version.cuda})"
        mem["peak"] = torch.cuda.max_memory_allocated() / 1e9
    else:
        label = f"cpu (tiny shapes, not a speed figure; torch {torch.__version__})"
    return {
        "device": label,
        "shape": "tiny" if o.tiny else "orpheus-3b (Llama-3.2-3B, vocab 156 940), random weights",
        "dtype": ("fp8 weights" if o.fp8 else "bf16") if device == "cuda" else "float32",
        "streams_realtime": capacity,
        "realtime_step_budget_ms": round(REALTIME_STEP_MS / HEADROOM, 3),
        "step_ms": {str(b): round(v, 3) for b, v in step_ms.items()},
        "kv_position": o.kv_position,
        "ttfb_ms": ttfb,
        "first_audio_ids": first_ids,
        "snac_ms": {str(b): round(v, 3) for b, v in snac_ms.items()},
        "snac_window_frames": STEADY_WINDOW_FRAMES,
        "gpu_memory_gb": {k: round(v, 3) for k, v in mem.items()},
        "cpu_us_per_token": round(float(np.median(host_us)), 3),
        "options": {k: v for k, v in asdict(o).items() if k not in ("shape", "snac")},
        "seconds": round(time.perf_counter() - started, 1),
    }


def print_table(r: dict[str, Any]) -> None:
    print(f"device: {r['device']}  ({r['shape']}, {r['dtype']})")
    budget = r["realtime_step_budget_ms"]
    print(f"{'batch':>6} {'step ms':>9}   real-time step budget with 20% headroom: {budget} ms")
    for b, ms in r["step_ms"].items():
        print(f"{b:>6} {ms:>9.3f}")
    print(f"{'windows':>7} {'SNAC ms':>9}")
    for b, ms in r["snac_ms"].items():
        print(f"{b:>7} {ms:>9.3f}")
    print(f"streams_realtime: {r['streams_realtime']}")
    for load, s in r["ttfb_ms"].items():
        print(f"TTFB at {load:>4} ({s['streams']} streams): p50 {s['p50']} ms  p99 {s['p99']} ms")
    print(
        f"memory GB: {r['gpu_memory_gb']}  engine CPU per id: {r['cpu_us_per_token']} µs  ({r['seconds']} s)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--json", default="", help="write the results here")
    p.add_argument("--tiny", action="store_true", help="tiny shapes on CPU even where CUDA exists")
    p.add_argument("--seconds", type=float, default=0.0, help="arrival window per load (default 20 s GPU)")
    p.add_argument("--fp8", action="store_true", help="FP8 weights (torch._scaled_mm); Hopper only")
    p.add_argument("--batches", default="", help="comma-separated decode batches to measure")
    args = p.parse_args(argv)
    o = GpuBenchOptions.cpu_tiny() if args.tiny else GpuBenchOptions()
    if args.fp8:
        o = replace(o, fp8=True)
    if args.seconds > 0:
        o = replace(o, seconds_per_load=args.seconds)
    if args.batches:
        try:
            batches = tuple(sorted(int(x) for x in args.batches.split(",")))
        except ValueError:
            print(f"benchmarks.gpu: --batches must be integers, got {args.batches!r}", file=sys.stderr)
            return 2
        o = replace(o, batches=batches, rows=max(o.rows, batches[-1]))
    result = run(o)
    print_table(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
