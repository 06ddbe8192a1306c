"""Orpheus engine speed on one GPU with the `--backend cuda` generator: how many real-time streams it holds.

    python -m benchmarks.gpu [--json out/gpu.json] [--tiny] [--seconds 20] [--fp8] [--attention flex|sdpa]
                             [--compile auto|on|off] [--batches 1,16,64,128,256]

Random weights of the real Orpheus 3B shape (speed does not depend on the weights' values), bf16, the same
generator, sampling and SNAC decoder the engine serves with, driven as the engine drives it: the host one step
ahead (launch step n+1, then collect step n), batched prefill between steps, every CUDA graph captured
before timing (`graphs_captured_after_ready` says if any was not). Measured:
- `step_ms` {batch: ms}: wall time per decode step in a steady state at that many streams: rows spread over
  positions 0..`max_position` ids, and each row that ends is replaced at once by a new 6-second utterance
  (prefill included), i.e. admissions at the rate that load needs;
- `kernels_per_step`: kernels one decode step launches (CUDA profiler; on CPU the aten ops, a proxy);
- `kv_ids_read_per_step` {batch: {length_aware, padded, ratio}}: KV ids the attention reads per step on the
  same position mix (arithmetic, no clock);
- `snac_ms` {batch: ms}: one SNAC decode of that many 6-frame windows (the engine's steady-state window);
- `streams_realtime`: the largest measured batch whose step, plus its share of SNAC work (one window per
  stream every 28 ids), fits the real-time step budget (1000 / 82.03 ms) with 20 % headroom (SNAC counted
  as if it ran between steps; `benchmarks.gpu_check` also measures it running beside them, as it does in
  the engine: `steps_with_snac`, `streams_realtime_alongside`);
- `ttfb_ms` {load: {p50, p90, p99}}: Poisson arrivals at 50 % and 90 % of that capacity through the
  generator; first audio = the id that completes the first decodable window (21 ids) plus one SNAC decode of
  the window batch in flight at that moment;
- `gpu_memory_gb`: weights, KV cache, peak;
- `cpu_us_per_token`: host time per generated id: the generator's own host work (launch, bookkeeping, not the
  wait for the device) plus the engine's frame assembler on the same ids.
Without CUDA it runs the same code at tiny shapes on CPU and says so in `device` (a correctness run, not a
speed figure). Needs only torch, numpy and snac.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from benchmarks.cli import emit, percentiles
from plugins.orpheus.engine import ids

REALTIME_STEP_MS = 1000.0 / ids.TOKENS_PER_SECOND  # 12.19 ms: one id per stream per step
HEADROOM = 1.2
STEADY_WINDOW_FRAMES = 8  # the engine's window: 2 frames of left context + 4 emitted + 2 of look-ahead
IDS_PER_WINDOW = 4 * ids.FRAME_TOKENS
# the realistic mix: a reply is spoken as sentence pieces, each its own utterance starting fresh after its
# prompt; piece lengths are the engine's own chunker (ChunkerOptions of plugins/orpheus/engine/text.py) over
# agent replies of the kind the worker speaks, at Orpheus's ~2.7 words/s (~30 ids per word)
REPLY_TEXTS = (
    "Sure, I can help with that. Your table for two is booked at seven. Anything else?",
    "Let me check. The store opens at nine tomorrow, and closes at six in the evening.",
    "Thanks for waiting. Your order shipped this morning, so it should arrive on Friday.",
    "Of course. I have moved your appointment to Tuesday afternoon. See you then!",
    "I'm sorry to hear that. I can send a replacement today at no cost, or refund the full amount to "
    "your card, whichever you prefer.",
    "Your balance is forty two dollars and ten cents, due on the fifteenth. Would you like to pay it now?",
    "Got it. I'll transfer you to billing now; it may take a minute.",
    "The clinic has openings on Monday at ten thirty and on Wednesday at two. Which works better for you, "
    "and should I book it under the same phone number?",
)
IDS_PER_WORD = ids.TOKENS_PER_SECOND / 2.7
PIECE_PROMPT_IDS = 30  # a piece's prompt: voice, its text, the framing ids
MIXES = ("stress", "reply")
CAPACITY_RULE = "1.2 × (p90 step + SNAC batch of ⌈b/28⌉ 8-frame windows + b × host µs/id) ≤ 12.19 ms"


@dataclass(frozen=True)
class GpuBenchOptions:
    tiny: bool = False
    batches: tuple[int, ...] = (1, 16, 64, 128, 192, 256)
    snac_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 64)  # the batcher's ⌈b/28⌉ at b ≤ 448, and 64
    rows: int = 256
    max_seq: int = 1664  # 13 KV blocks: positions up to 1500 + a 6-s utterance's headroom; 256 rows ≈ 49 GB
    prompt_len: int = 32
    max_position: int = 1500  # step timing: rows spread over positions 0..1500
    utterance_ids: int = 490  # 70 frames ≈ 6 s of speech per utterance
    steady_steps: int = 60  # timed steps per batch (after 5 untimed)
    seconds_per_load: float = 20.0
    loads: tuple[float, ...] = (0.5, 0.9)
    prefill_tokens: int = 1024
    attention: str = "flex"
    kv_fp8: bool = False  # FP8 KV cache (attention "triton" only)
    mix: str = "stress"  # "stress": positions uniform 0..max_position; "reply": sentence pieces of replies
    engine_us_per_id: float = 10.0  # the engine's own host work per id (benchmarks.tts --overhead), added
    compile: str = "auto"  # the generator's Inductor-compiled step ("off": the eager step in graphs)
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
            max_position=200,
            utterance_ids=70,
            steady_steps=5,
            seconds_per_load=2.0,
            shape=dict(hidden_size=64, intermediate_size=128, layers=2, heads=4, kv_heads=2),
            snac=dict(decoder_dim=64, encoder_dim=16),
        )


def build_model(o: GpuBenchOptions, device: str) -> Any:
    import torch

    from plugins.orpheus.engine.cuda.model import LlamaShape, OrpheusLlama

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = OrpheusLlama.random(replace(LlamaShape(), **o.shape), dtype, device, seed=o.seed)
    if o.fp8:
        model.use_fp8()
    return model


def build_generator(model: Any, o: GpuBenchOptions, attention: str) -> Any:
    from plugins.orpheus.engine.cuda.generator import BatchGenerator, GeneratorOptions

    opts = GeneratorOptions(
        rows=o.rows,
        max_seq=o.max_seq,
        attention=attention,
        kv_fp8=o.kv_fp8 and attention == "triton",
        compile=o.compile,
    )
    return BatchGenerator(model, opts)


def build(o: GpuBenchOptions, device: str) -> tuple[Any, Any, dict[str, float]]:
    from snac import SNAC

    from plugins.orpheus.engine.snac_decoder import SNAC_24KHZ_CONFIG, DecoderOptions, SnacDecoder

    model = build_model(o, device)
    weights = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    # SNAC first, as the engine does: its graphs are captured before the KV cache takes the memory
    snac = SNAC(**{**SNAC_24KHZ_CONFIG, **o.snac, "noise": False}).eval()
    decoder = SnacDecoder(snac, DecoderOptions(device=device, max_batch=max(o.snac_batches)))
    gen = build_generator(model, o, o.attention)
    mem = {"weights": weights / 1e9, "kv_cache": model.kv_bytes() / 1e9}
    return gen, decoder, mem


def warm(gen: Any, batches: tuple[int, ...]) -> dict[str, Any]:
    """Capture every graph the measured batches can need, as the engine does before it reports ready."""
    from plugins.orpheus.engine.cuda.generator import bucket

    t = time.perf_counter()
    need = sorted({bucket(min(b, gen.options.rows), gen.batch_buckets) for b in batches} | {1})
    n = gen.warm_graphs(need)
    gen.mark_ready()
    return {"graphs": n, "seconds": round(time.perf_counter() - t, 1)}


def _prompt(rng: np.random.Generator, n: int) -> list[int]:
    p = rng.integers(0, ids.BOS, n).tolist()
    p[-1] = ids.START_OF_SPEECH
    return p


def _admissions(rng: np.random.Generator, o: GpuBenchOptions, n: int) -> list[Any]:
    """`n` prompts of the benchmark's length, 8 ids each, sampled as serving samples."""
    from plugins.orpheus.engine.cuda.generator import Admission

    return [Admission(_prompt(rng, o.prompt_len), 8, 0.6, 0.9, 1.1) for _ in range(n)]


def piece_ids(seed: int = 0) -> np.ndarray:
    """Ids each sentence piece of REPLY_TEXTS speaks (the engine's chunker, IDS_PER_WORD)."""
    from plugins.orpheus.engine.text import TextOptions
    from plugins.text_chunker import split_text

    words = [len(p.split()) for t in REPLY_TEXTS for p in split_text(t, TextOptions().chunker)]
    return np.maximum(ids.FRAME_TOKENS, np.round(np.asarray(words) * IDS_PER_WORD)).astype(np.int64)


def draw_rows(
    rng: np.random.Generator, o: GpuBenchOptions, b: int, mix: str
) -> tuple[np.ndarray, np.ndarray]:
    """(position, ids left) of `b` rows in the steady state of a mix. "stress": positions uniform over
    0..max_position, each row with a uniform share of an `utterance_ids` utterance left. "reply": each row
    inside one sentence piece (drawn in proportion to its length, as a busy row is), at a uniform point of
    it: position = prompt + ids spoken so far."""
    top = min(o.max_position, o.max_seq - 2)
    if mix == "stress":
        pos = rng.integers(0, top + 1, b)
        left = np.minimum(rng.integers(1, o.utterance_ids + 1, b), o.max_seq - 1 - pos)
        return pos, np.maximum(1, left)
    if mix != "reply":
        raise ValueError(f"mix {mix!r}: one of {', '.join(MIXES)}")
    pieces = np.minimum(piece_ids(), o.max_seq - 2 - PIECE_PROMPT_IDS)
    length = rng.choice(pieces, size=b, p=pieces / pieces.sum())
    spoken = (rng.random(b) * length).astype(np.int64)
    return PIECE_PROMPT_IDS + spoken, np.maximum(1, length - spoken)


def new_utterance_ids(rng: np.random.Generator, o: GpuBenchOptions, mix: str) -> int:
    """Ids a newly admitted utterance of the mix generates."""
    if mix == "reply":
        return int(rng.choice(np.minimum(piece_ids(), o.max_seq - 2 - PIECE_PROMPT_IDS)))
    return o.utterance_ids


def mean_position(o: GpuBenchOptions, mix: str, b: int = 4096, seed: int = 0) -> float:
    return float(draw_rows(np.random.default_rng(seed), o, b, mix)[0].mean())


def _release_all(gen: Any) -> None:
    for row in np.flatnonzero(gen.busy).tolist():
        gen.release(int(row))


def steady_step_ms(
    gen: Any,
    o: GpuBenchOptions,
    b: int,
    rng: np.random.Generator,
    on_step: Callable[[], None] | None = None,
    stats: dict[str, float] | None = None,
) -> tuple[float, float]:
    """Mean and p90 wall ms per step with `b` streams of `o.mix` (`draw_rows`), each row ending after its
    share of an utterance and replaced at once by a new one (batched prefill), the host one step ahead as in
    serving. `on_step` is told of every launched step; `stats` gets the generator's host µs per id. Returns
    (mean, p90 of the per-step intervals)."""
    from plugins.orpheus.engine.cuda.generator import Admission

    pos, left = draw_rows(rng, o, b, o.mix)
    # residual lengths uniform over an utterance: the equilibrium, so rows end (and new ones are admitted)
    # at the mix's rate from the first step
    gen.occupy(b, pos.tolist(), left.tolist())
    prompt = PIECE_PROMPT_IDS if o.mix == "reply" else o.prompt_len
    ticket, marks = None, []
    host0, made = gen.host_s, 0
    for _ in range(o.steady_steps + 6):
        marks.append(time.perf_counter())
        ended = b - gen.active_rows
        if ended > 0:
            gen.admit_many(
                [
                    Admission(_prompt(rng, prompt), new_utterance_ids(rng, o, o.mix), 0.6, 0.9, 1.1)
                    for _ in range(ended)
                ]
            )
        made += gen.active_rows
        nxt = gen.launch()
        if on_step is not None:
            on_step()
        if ticket is not None:
            gen.collect(ticket)
        ticket = nxt
    times = np.diff(marks)[5:]  # one interval per step, pipeline filled
    gen.collect(ticket)
    if stats is not None:
        stats["host_us_per_id"] = (gen.host_s - host0) / max(1, made) * 1e6
    _release_all(gen)
    a = np.asarray(times) * 1000
    return float(a.mean()), float(np.percentile(a, 90))


def step_parts(
    gen: Any, o: GpuBenchOptions, b: int, rng: np.random.Generator, admissions: bool = True
) -> dict[str, float]:
    """The steady step split in two: a decode step alone (`b` rows at spread positions, none ending) and
    one admission pass of 1 and of 8 prompts (wall ms until its first ids are on the device; `_host_ms`:
    until the pass is launched, so the rest is the device's)."""
    import torch

    cuda = gen.device.type == "cuda"
    top = min(o.max_position, o.max_seq - 2)
    gen.occupy(b, rng.integers(0, top + 1, b).tolist(), 1 << 20)
    for _ in range(3):
        gen.step()
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(o.steady_steps):
        gen.step()
    out = {"decode_ms": (time.perf_counter() - t) * 1000 / o.steady_steps}
    _release_all(gen)
    for n in (1, 8) if admissions else ():
        times, host = [], []
        for _ in range(4):
            batch = _admissions(rng, o, n)
            t = time.perf_counter()
            rows = gen.admit_many(batch)
            host.append((time.perf_counter() - t) * 1000)  # until the pass is launched: the host's share
            if cuda:
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1000)
            gen.collect(gen.launch())
            _release_all(gen)
            del rows
        out[f"admit_{n}_ms"] = float(np.median(times[1:]))
        out[f"admit_{n}_host_ms"] = float(np.median(host[1:]))
    return {k: round(v, 3) for k, v in out.items()}


def admission_profile(gen: Any, o: GpuBenchOptions, n: int = 1, top: int = 8) -> dict[str, Any]:
    """Where one admission pass of `n` prompts spends device time: the CUDA profiler's kernels, summed and
    the `top` costliest by name (a replayed graph's kernels are traced one by one)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    rng = np.random.default_rng(o.seed)

    def admit() -> None:
        gen.admit_many(_admissions(rng, o, n))
        torch.cuda.synchronize()

    admit()  # the pass's graph is captured (or the eager path warmed) outside the trace
    gen.collect(gen.launch())
    _release_all(gen)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        admit()
    gen.collect(gen.launch())
    _release_all(gen)
    kernels = [
        e
        for e in prof.key_averages()
        if getattr(e, "device_time_total", 0) and not e.key.startswith(("cudaLaunch", "cudaStream"))
    ]
    kernels.sort(key=lambda e: -e.device_time_total)
    return {
        "prompts": n,
        "device_ms": round(sum(e.device_time_total for e in kernels) / 1000, 3),
        "kernels": int(sum(e.count for e in kernels)),
        "top": [[e.key[:80], e.count, round(e.device_time_total / 1000, 3)] for e in kernels[:top]],
    }


def step_profile(gen: Any, o: GpuBenchOptions, b: int, mix: str, top: int = 10) -> dict[str, Any]:
    """One decode step of `b` rows of `mix` (a graph replay where graphs are on) under the profiler: device
    time and the `top` costliest kernels with their share (CPU: the aten ops' own time, a dry run)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = gen.device.type == "cuda"
    b = min(b, gen.options.rows)
    pos, _ = draw_rows(np.random.default_rng(o.seed), o, b, mix)
    gen.occupy(b, pos.tolist(), 1 << 20)
    try:
        for _ in range(2):
            gen.step()  # warm outside the trace
        with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
            gen.step()
            if cuda:
                torch.cuda.synchronize()
    finally:
        _release_all(gen)
    attr = "device_time_total" if cuda else "self_cpu_time_total"
    skip = ("cudaLaunch", "cudaStream", "cudaGraph", "Memset", "ProfilerStep")
    kernels = [e for e in prof.key_averages() if getattr(e, attr, 0) and not e.key.startswith(skip)]
    kernels.sort(key=lambda e: -getattr(e, attr))
    total = sum(getattr(e, attr) for e in kernels) or 1.0
    return {
        "batch": b,
        "mix": mix,
        "mean_position": round(float(pos.mean()), 1),
        "device_ms" if cuda else "cpu_ms": round(total / 1000, 3),
        "kernels": int(sum(e.count for e in kernels)),
        "top": [
            [e.key[:90], e.count, round(getattr(e, attr) / 1000, 3), round(100 * getattr(e, attr) / total, 1)]
            for e in kernels[:top]
        ],
    }


def kv_ids_read(o: GpuBenchOptions, b: int, seed: int = 0, draws: int = 200) -> dict[str, float]:
    """Mean KV ids one decode step reads at `b` streams spread over positions 0..max_position: length-aware
    (each row its own 128-id blocks) against padded (every row up to the batch's KV bucket). Arithmetic on
    the step timing's position mix, no clock: the bandwidth the attention change saves."""
    from plugins.orpheus.engine.cuda.generator import bucket
    from plugins.orpheus.engine.cuda.model import KV_BLOCK

    rng = np.random.default_rng(seed)
    kv, k = [], 128
    while k < o.max_seq:
        kv.append(k)
        k *= 2
    buckets = (*kv, o.max_seq)
    top = min(o.max_position, o.max_seq - 2)
    aware = padded = 0.0
    for _ in range(draws):
        pos = rng.integers(0, top + 1, b)
        aware += float((-(-(pos + 1) // KV_BLOCK) * KV_BLOCK).sum())
        padded += b * bucket(int(pos.max()) + 1, buckets)
    return {
        "length_aware": round(aware / draws),
        "padded": round(padded / draws),
        "ratio": round(aware / padded, 3),
    }


def measure_steps(
    gen: Any, o: GpuBenchOptions, batches: tuple[int, ...], host: list[float] | None = None
) -> tuple[dict[int, float], dict[int, float]]:
    """Mean and p90 step ms per batch; `host` collects the generator's host µs per id at each batch."""
    rng = np.random.default_rng(o.seed)
    mean: dict[int, float] = {}
    p90: dict[int, float] = {}
    for b in batches:
        if b > o.rows:
            continue
        stats: dict[str, float] = {}
        mean[b], p90[b] = steady_step_ms(gen, o, b, rng, stats=stats)
        if host is not None:
            host.append(stats["host_us_per_id"])
    return mean, p90


def kernels_per_step(gen: Any, b: int, device: str) -> dict[str, Any]:
    """Kernels one eager decode step launches (a replayed graph launches the same ones): the CUDA profiler's
    device events on a GPU; on CPU the aten ops dispatched (a proxy for the count, not for the cost)."""
    import torch

    b = min(b, gen.options.rows)
    gen.occupy(b, 100)
    try:
        with gen._device():
            gen._step(b, gen.kv_buckets[-1])  # warm (compile) outside the count
            if device == "cuda":
                from torch.profiler import ProfilerActivity, profile

                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    gen._step(b, gen.kv_buckets[-1])
                    torch.cuda.synchronize()
                n = sum(
                    e.count
                    for e in prof.key_averages()
                    if getattr(e, "device_time_total", 0)
                    and not e.key.startswith(("Memcpy", "Memset", "cudaLaunch", "cudaStream"))
                )
                how = "cuda profiler, device kernels"
            else:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    gen._step(b, gen.kv_buckets[-1])
                leaves = [
                    e
                    for e in prof.events()
                    if e.name.startswith("aten::")
                    and not any(c.name.startswith("aten::") for c in e.cpu_children)
                ]
                n, how = len(leaves), "leaf aten ops (cpu proxy)"
    finally:
        _release_all(gen)
    return {"batch": b, "kernels": int(n), "how": how}


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


class SnacAlongside:
    """The engine's SNAC thread in miniature, run beside the decode steps: every stream completes a window
    each `IDS_PER_WINDOW` ids, so `b / IDS_PER_WINDOW` windows fall due per step. A batch fires as soon as a
    window is due and takes every waiting window (at most `max_batch`), as `DecodeBatcher` and
    `OrpheusEngine.collect` do. On a GPU its kernels run on the default stream while the generator's run on
    its own, so the two overlap as far as the device lets them; the GIL and the host copies are shared as in
    the engine's one process."""

    def __init__(self, decoder: Any, b: int, rng: np.random.Generator, max_batch: int = 64) -> None:
        self.decoder, self.max_batch = decoder, max_batch
        self.rate = b / IDS_PER_WINDOW
        self.windows = [rng.integers(0, ids.CODEBOOK, (STEADY_WINDOW_FRAMES, 7)) for _ in range(max_batch)]
        self.due, self.done, self.batches, self.decode_s = 0.0, 0, 0, 0.0
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="snac-alongside", daemon=True)

    def warm(self) -> None:
        """Every batch size this run can ask for, once, so no graph is captured while steps are timed."""
        from plugins.orpheus.engine.snac_decoder import BATCH_BUCKETS

        for n in BATCH_BUCKETS:
            if n <= self.max_batch:
                self.decoder.decode(self.windows[:n])

    def step(self) -> None:
        with self._cv:
            self.due += self.rate
            self._cv.notify()

    def backlog(self) -> float:
        """Windows due but not decoded yet."""
        with self._cv:
            return self.due - self.done

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stop and int(self.due) <= self.done:
                    self._cv.wait()
                if self._stop:
                    return
                n = min(int(self.due) - self.done, self.max_batch)
            t = time.perf_counter()
            self.decoder.decode(self.windows[:n])
            with self._cv:
                self.done += n
                self.batches += 1
                self.decode_s += time.perf_counter() - t

    def __enter__(self) -> SnacAlongside:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join(timeout=30)


def steps_with_snac(
    gen: Any, decoder: Any, o: GpuBenchOptions, b: int, rng: np.random.Generator
) -> dict[str, float]:
    """`steady_step_ms` at `b` streams with `SnacAlongside` decoding their windows as they fall due: what a
    step costs when SNAC shares the device, and whether SNAC keeps up (`backlog_windows` at the end; more
    than `b` means a stream would be a window behind)."""
    snac = SnacAlongside(decoder, b, rng)
    snac.warm()
    with snac:
        mean, p90 = steady_step_ms(gen, o, b, rng, on_step=snac.step)
        backlog = snac.backlog()
    return {
        "step_ms": round(mean, 3),
        "step_ms_p90": round(p90, 3),
        "snac_batches": snac.batches,
        "snac_windows": snac.done,
        "snac_ms_per_batch": round(1000 * snac.decode_s / max(1, snac.batches), 3),
        "backlog_windows": round(backlog, 1),
    }


def streams_realtime_alongside(measured: dict[int, dict[str, float]]) -> int:
    """Largest measured batch whose step, with SNAC decoding beside it, fits the real-time step budget with
    the same headroom, and whose SNAC kept up (less than one window per stream behind at the end)."""
    best = 0
    for b, m in sorted(measured.items()):
        if HEADROOM * m["step_ms"] <= REALTIME_STEP_MS and m["backlog_windows"] <= b:
            best = b
    return best


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


def snac_batch(b: int) -> int:
    """Windows one SNAC batch holds at `b` streams: each stream's 4-frame window falls due every 28 ids, one
    id per step, and the batcher fires as windows fall due, so ~b / 28 windows per step, once a step."""
    return max(1, math.ceil(b / IDS_PER_WINDOW))


def capacity_rule(
    step_p90_ms: dict[int, float], snac_ms: dict[int, float], host_us_per_id: float
) -> tuple[int, dict[str, dict[str, float | bool]]]:
    """The honest real-time rule: the largest measured batch b whose p90 step, plus one SNAC batch of the
    windows falling due per step (`snac_batch(b)`, timed at the engine's 8-frame windows), plus the host's
    work for b ids, fits the step budget with 20 % margin: 1.2 × (p90(b) + SNAC(⌈b/28⌉) + b · host) ≤
    12.19 ms. Returns (capacity, per batch {step_p90, snac, host, total, fits})."""
    best, detail = 0, {}
    for b, p90 in sorted(step_p90_ms.items()):
        snac = interpolate(snac_ms, snac_batch(b)) if snac_ms else 0.0
        host = b * host_us_per_id / 1000.0
        total = p90 + snac + host
        fits = HEADROOM * total <= REALTIME_STEP_MS
        detail[str(b)] = {
            "step_p90_ms": round(p90, 3),
            "snac_ms": round(snac, 3),
            "host_ms": round(host, 3),
            "total_ms": round(total, 3),
            "fits": fits,
        }
        if fits:
            best = b
    return best, detail


def streams_realtime(step_p90_ms: dict[int, float], snac_ms: dict[int, float], host_us_per_id: float) -> int:
    """`capacity_rule`'s capacity alone."""
    return capacity_rule(step_p90_ms, snac_ms, host_us_per_id)[0]


def first_audio_tokens() -> int:
    """Ids until the engine's window planner can emit the first window, fed one id at a time through its
    frame assembler (tests/orpheus/test_windows.py checks the windows against a whole-utterance decode)."""
    from plugins.orpheus.engine.frames import FrameAssembler
    from plugins.orpheus.engine.windows import plan_window

    asm = FrameAssembler(1, 64)
    asm.open(0, 7 * 64)
    rng = np.random.default_rng(0)
    for n in range(1, 7 * 64):
        asm.push(np.array([0]), np.array([ids.audio_id((n - 1) % 7, int(rng.integers(0, 4096)))]))
        if plan_window(0, int(asm.nframes[0]), finished=False) is not None:
            return n
    return -1


def measure_ttfb(
    gen: Any, o: GpuBenchOptions, capacity: int, load: float, snac_ms: dict[int, float], first_ids: int
) -> tuple[dict[str, float | None], float]:
    """Poisson arrivals at `load` × capacity streams through the engine's own loop shape (batched prefill
    within a token budget, host one step ahead); returns TTFB {p50, p90, p99} and host µs per id."""
    from plugins.orpheus.engine.cuda.generator import Admission
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
    nxt_arrival, host_s, ids_made = 0, 0.0, 0
    gen.host_s = 0.0
    ticket = None
    t0 = time.perf_counter()
    while True:
        now = time.perf_counter() - t0
        while nxt_arrival < arrivals.size and arrivals[nxt_arrival] <= now:
            waiting.append(float(arrivals[nxt_arrival]))
            nxt_arrival += 1
        idle = not waiting and not gen.active_rows and ticket is None
        # past the window (a slow CPU dry run goes on, up to a minute, until one first audio is timed)
        late = now > horizon + 2 * utterance_s and (ttfb or now > horizon + 2 * utterance_s + 60)
        if late or (nxt_arrival == arrivals.size and idle):
            break
        budget, batch, starts = o.prefill_tokens, list[Any](), list[float]()
        while waiting and len(batch) < gen.free_rows and budget > 0:
            batch.append(Admission(_prompt(rng, o.prompt_len), o.utterance_ids, 0.6, 0.9, 1.1))
            starts.append(waiting.pop(0))
            budget -= o.prompt_len
        if batch:
            for row, start in zip(gen.admit_many(batch), starts, strict=True):
                row_start[row], row_count[row] = start, 0
                asm.open(row, o.utterance_ids)
        if not gen.active_rows and ticket is None:
            time.sleep(0.0005)
            continue
        launched = gen.launch() if gen.active_rows else None
        res = gen.collect(ticket) if ticket is not None else None
        ticket = launched
        if res is None or not res.rows.size:
            continue
        t = time.perf_counter()
        asm.push(res.rows, res.tokens)  # the engine's own frame assembly of the same ids
        host_s += time.perf_counter() - t
        ids_made += res.rows.size
        np.add.at(row_count, res.rows, 1)
        first = np.unique(res.rows[row_count[res.rows] == first_ids])
        if first.size:
            now = time.perf_counter() - t0
            snac = interpolate(snac_ms, snac_batch(gen.active_rows))  # the batch in flight then
            ttfb.extend(((now - row_start[first]) * 1000 + snac).tolist())
            row_count[first] += 1  # counted once
        for row in res.rows[res.finished].tolist():
            asm.close(row)
    if ticket is not None:
        gen.collect(ticket)
    _release_all(gen)
    host_us = (gen.host_s + host_s) / max(1, ids_made) * 1e6
    return {**percentiles(ttfb, (50, 90, 99), 2), "streams": streams, "utterances": len(ttfb)}, host_us


def run(o: GpuBenchOptions) -> dict[str, Any]:
    import torch

    device = "cuda" if torch.cuda.is_available() and not o.tiny else "cpu"
    if device == "cpu" and not o.tiny:
        o = replace(GpuBenchOptions.cpu_tiny(), fp8=False, attention=o.attention)
    torch.manual_seed(o.seed)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    gen, decoder, mem = build(o, device)
    capacity_batches = tuple(b for b in o.batches if b <= o.rows)
    warmed = warm(gen, capacity_batches)
    gen_host: list[float] = []
    step_ms, step_p90 = measure_steps(gen, replace(o, mix="stress"), capacity_batches, gen_host)
    reply_ms, reply_p90 = measure_steps(gen, replace(o, mix="reply"), capacity_batches, gen_host)
    kernels = kernels_per_step(gen, 64, device)
    snac_ms = measure_snac(decoder, o)
    rule_host_us = float(np.median(gen_host)) + o.engine_us_per_id
    capacity, detail = capacity_rule(step_p90, snac_ms, rule_host_us)
    capacity_reply, detail_reply = capacity_rule(reply_p90, snac_ms, rule_host_us)
    first_ids = first_audio_tokens()
    ttfb: dict[str, Any] = {}
    host_us: list[float] = []
    for load in o.loads:
        # a CPU run has no real-time capacity; it drives the same loop at the largest batch it measured
        stats, us = measure_ttfb(gen, o, capacity_reply or max(capacity_batches), load, snac_ms, first_ids)
        ttfb[f"{round(load * 100)}%"] = stats
        host_us.append(us)
    after_ready = gen.captures_after_ready
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        label = f"cuda: {props.name} (torch {torch.__version__}, CUDA {torch.version.cuda})"
        mem["peak"] = torch.cuda.max_memory_allocated() / 1e9
    else:
        label = f"cpu (tiny shapes, not a speed figure; torch {torch.__version__})"
    return {
        "device": label,
        "shape": "tiny" if o.tiny else "orpheus-3b (Llama-3.2-3B, vocab 156 940), random weights",
        "dtype": dtype_label(o, device),
        "attention_backend": o.attention,
        "compiled": gen.compiled,
        "compile_error": gen.compile_error,
        "streams_realtime": capacity,
        "streams_realtime_reply": capacity_reply,
        "capacity_rule": CAPACITY_RULE,
        "capacity": detail,
        "capacity_reply": detail_reply,
        "host_us_per_id_in_rule": round(rule_host_us, 3),
        "mean_position": {m: round(mean_position(o, m), 1) for m in MIXES},
        "realtime_step_budget_ms": round(REALTIME_STEP_MS / HEADROOM, 3),
        "step_ms": {str(b): round(v, 3) for b, v in step_ms.items()},
        "step_ms_p90": {str(b): round(v, 3) for b, v in step_p90.items()},
        "step_ms_reply": {str(b): round(v, 3) for b, v in reply_ms.items()},
        "step_ms_reply_p90": {str(b): round(v, 3) for b, v in reply_p90.items()},
        "positions": f"rows spread over 0..{o.max_position}, replaced by {o.utterance_ids}-id utterances",
        "kernels_per_step": kernels,
        "kv_ids_read_per_step": {str(b): kv_ids_read(o, b) for b in capacity_batches},
        "graphs_warmed": warmed,
        "graphs_captured_after_ready": after_ready,
        "ttfb_ms": ttfb,
        "first_audio_ids": first_ids,
        "snac_ms": {str(b): round(v, 3) for b, v in snac_ms.items()},
        "snac_window_frames": STEADY_WINDOW_FRAMES,
        "gpu_memory_gb": {k: round(v, 3) for k, v in mem.items()},
        "cpu_us_per_token": round(float(np.median(host_us)), 3),
        "options": {k: v for k, v in asdict(o).items() if k not in ("shape", "snac")},
        "seconds": round(time.perf_counter() - started, 1),
    }


def dtype_label(o: GpuBenchOptions, device: str) -> str:
    """What the run's weights and KV cache were (an FP8 run is not labelled bf16)."""
    if device != "cuda":
        return "float32"
    weights = "fp8 weights" if o.fp8 else "bf16 weights"
    cache = "fp8 KV cache" if o.kv_fp8 and o.attention == "triton" else "bf16 KV cache"
    return f"{weights}, {cache}"


def print_table(r: dict[str, Any]) -> None:
    print(f"device: {r['device']}  ({r['shape']}, {r['dtype']}, attention {r['attention_backend']})")
    budget = r["realtime_step_budget_ms"]
    print(f"{'batch':>6} {'step ms':>9} {'p90':>8}   real-time step budget (20% headroom): {budget} ms")
    for b, ms in r["step_ms"].items():
        print(f"{b:>6} {ms:>9.3f} {r['step_ms_p90'][b]:>8.3f}")
    print(f"{'windows':>7} {'SNAC ms':>9}")
    for b, ms in r["snac_ms"].items():
        print(f"{b:>7} {ms:>9.3f}")
    print(f"capacity rule: {r['capacity_rule']} (host {r['host_us_per_id_in_rule']} µs/id)")
    for name, key in (("stress", "capacity"), ("reply", "capacity_reply")):
        for b, c in r[key].items():
            print(
                f"  {name:>6} b={b:>4}: p90 {c['step_p90_ms']} + SNAC {c['snac_ms']} + host {c['host_ms']}"
                f" = {c['total_ms']} ms  {'yes' if c['fits'] else 'no'}"
            )
    print(
        f"streams_realtime: {r['streams_realtime']} (stress), {r['streams_realtime_reply']} (reply mix, mean "
        f"position {r['mean_position']['reply']})   kernels per step: {r['kernels_per_step']}"
    )
    print(f"graphs warmed: {r['graphs_warmed']}, captured after ready: {r['graphs_captured_after_ready']}")
    for load, s in r["ttfb_ms"].items():
        print(
            f"TTFB at {load:>4} ({s['streams']} streams): p50 {s['p50']} ms  p90 {s['p90']} ms  "
            f"p99 {s['p99']} ms"
        )
    print(
        f"memory GB: {r['gpu_memory_gb']}  engine CPU per id: {r['cpu_us_per_token']} µs  ({r['seconds']} s)"
    )


def _ints(raw: str) -> tuple[int, ...]:
    return tuple(sorted(int(x) for x in raw.split(",") if x.strip()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--json", default="", help="write the results here")
    p.add_argument("--tiny", action="store_true", help="tiny shapes on CPU even where CUDA exists")
    p.add_argument("--seconds", type=float, default=0.0, help="arrival window per load (default 20 s GPU)")
    p.add_argument("--fp8", action="store_true", help="FP8 weights (torch._scaled_mm); Hopper only")
    p.add_argument("--attention", default="flex", choices=["flex", "sdpa", "triton"])
    p.add_argument("--kv-fp8", action="store_true", help="FP8 KV cache (with --attention triton)")
    p.add_argument("--compile", default="auto", choices=["auto", "on", "off"], help="Inductor-compiled step")
    p.add_argument("--batches", default="", help="comma-separated decode batches to measure")
    args = p.parse_args(argv)
    o = GpuBenchOptions.cpu_tiny() if args.tiny else GpuBenchOptions()
    o = replace(
        o,
        fp8=args.fp8 or o.fp8,
        attention=args.attention,
        kv_fp8=args.kv_fp8,
        compile=args.compile,
    )
    if args.seconds > 0:
        o = replace(o, seconds_per_load=args.seconds)
    try:
        if args.batches:
            batches = _ints(args.batches)
            o = replace(o, batches=batches, rows=max(o.rows, batches[-1]))
    except ValueError:
        print("benchmarks.gpu: --batches takes comma-separated integers", file=sys.stderr)
        return 2
    result = run(o)
    return emit(result, print_table, args.json)


if __name__ == "__main__":
    sys.exit(main())
