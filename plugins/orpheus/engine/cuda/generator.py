"""Batched generation over the slotted KV cache: admit (prefill) requests between decode steps, step all rows.

Every request owns one cache row while it generates. A decode step runs rows 0..B-1, with B the smallest
batch bucket covering the highest busy row (free rows inside run too, harmlessly). Length-aware attention
(FlexAttention, the default) reads each row's own KV blocks, so one graph per batch bucket serves every
length; the padded SDPA reference also needs a KV-length bucket. All per-row state (next input id, position,
generated count, token limit, sampling settings, repetition window) lives on the device and is advanced -
rows that end (stop id or limit) switched off - inside the step, so a step is one graph replay on CUDA.

The host runs one step ahead: `launch()` enqueues a step and a non-blocking copy of its ids into pinned
memory and returns a ticket; `collect(ticket)` waits for that copy only. A serving loop launches step n+1
before it collects step n, so the device never idles on the host's bookkeeping, and there is no sync per step
beyond the copy of the step being collected. Admissions are batched (`admit_many`: one padded prefill forward
for the pass) and their first ids ride along with the next launch's copy. Ids of a row that ended or was
released after its step was launched are dropped by comparing per-row epochs.

On CUDA the step is compiled with Inductor (`compile`): one decode step is otherwise ~1 600 small kernels
(norms, RoPE, sampling), whose launch floor alone costs more than the weights' read at small batches.
Admission passes replay CUDA graphs too, one per (prompts, padded length) bucket: an eager prefill is ~1 500
launches of host time, and every running stream waits behind it. Bucket padding goes to a scratch cache row
no request owns.

All graphs are captured by `warm_graphs()` before the engine reports ready, in thread-local capture mode;
`captures_after_ready` counts any capture after `mark_ready()` (there should be none). `graph_mode="record"`
runs the same capture/warm-up/replay bookkeeping on CPU with eager "graphs" (a test double for the GPU).
Not thread-safe: one thread drives it (the cuda backend's worker, or a benchmark) once it is ready.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.cuda.model import OrpheusLlama
from plugins.orpheus.engine.cuda.sampling import penalise, restrict, sample, to_token_ids

log = logging.getLogger("parley.orpheus.cuda")

# the padded SDPA path's batch buckets: powers of two and 1.5× steps between them (pads ≤ ~1.33×)
BATCH_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 320, 384, 448, 512)
# FlexAttention compiles one kernel set per batch shape at start-up: powers of two keep that short, and a
# padded row costs a GEMM row and one KV block, not its length
FLEX_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# admission passes: prompts per pass and padded prompt length, captured where prompts × length ≤ the cap
PREFILL_ROW_BUCKETS = (1, 2, 4, 8, 16, 32)
PREFILL_GRAPH_TOKENS = 2048
COMPILE_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class GeneratorOptions:
    rows: int = 256  # concurrent requests (KV cache rows)
    max_seq: int = 2048  # prompt + generated tokens per request (25 s of audio)
    history: int = 128  # repetition-penalty window, in tokens
    cuda_graphs: bool = True  # on CUDA only
    min_kv_bucket: int = 128  # the padded SDPA path's smallest KV bucket
    attention: str = "flex"  # "flex" (length-aware), "triton" (split-KV kernel) or "sdpa" (padded reference)
    kv_fp8: bool = False  # FP8 (e4m3) KV cache, per-KV-head scales; read by attention="triton" only
    prefill_pad: int = 32  # prompts of one admission pass pad to a multiple of this (few prefill shapes)
    graph_mode: str = "auto"  # "auto": CUDA graphs on CUDA; "record": eager stand-in graphs (CPU tests)
    compile: str = "auto"  # Inductor-fused step: "auto" (CUDA, flex), "on" (any device/attention), "off"
    # "dynamic": one compile for every batch bucket; "static": one per bucket (start-up pays each), which
    # lets flex pick its split-KV decode kernel (it needs a static batch). H100, 256 streams: decode alone
    # 14.1 vs 16.2 ms, but the steady step with admissions 17.4 vs 16.5 ms, so "dynamic" stays
    compile_batch: str = "dynamic"
    prefill_graphs: bool = True  # admission passes as graphs too (wherever decode steps are graphs)
    # the admission pass Inductor-fused too, one layer's code shared by every layer (model.compile_prefill):
    # uncompiled it is ~1 500 small kernels, 4.8 ms on an H200 for one prompt, its GEMMs ~1.7 ms of that.
    # Off until timed: the whole pass compiled at once was still compiling after 159 s on an H200
    compile_prefill: bool = False


@dataclass(frozen=True)
class StepResult:
    rows: np.ndarray  # cache rows that produced a token (an admitted row's first id comes before its step id)
    tokens: np.ndarray  # their token ids
    finished: np.ndarray  # bool per entry: stop id, or max_tokens reached (the row is free again)


@dataclass(frozen=True)
class Admission:
    prompt: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    penalty: float


@dataclass
class Ticket:
    """One launched step (and the admissions before it) whose ids are on their way to pinned memory."""

    rows: np.ndarray  # rows stepped
    epochs: np.ndarray  # their epochs at launch: a row ended or released since then is dropped
    gen_after: np.ndarray  # their generated count once this step's id is in
    pos_after: np.ndarray  # their position once it is in (a row reaching max_seq ends)
    admitted: np.ndarray  # rows admitted since the previous launch: their first ids ride along
    admitted_epochs: np.ndarray
    buf: torch.Tensor  # host buffer: step ids (b), then the `first` ids of every row when admissions
    b: int
    event: Any = None  # CUDA event recorded after the copies (None on CPU: the copies were synchronous)


def bucket(n: int, buckets: tuple[int, ...]) -> int:
    return next(b for b in buckets if b >= n)


class _RecordedGraph:
    """CPU test double for a CUDA graph: replay runs the captured step eagerly."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def replay(self) -> None:
        self.fn()


class BatchGenerator:
    def __init__(self, model: OrpheusLlama, options: GeneratorOptions = GeneratorOptions()) -> None:
        o = options
        self.model, self.options = model, o
        dev = model.head.weight.device
        self.device = dev
        if o.compile not in COMPILE_MODES:
            raise ValueError(f"compile {o.compile!r}: one of {', '.join(COMPILE_MODES)}")
        self.scratch = o.rows  # one cache row past the requests' rows: admission padding writes there
        model.allocate(o.rows + 1, o.max_seq, o.kv_fp8)
        model.set_attention(o.attention)
        n, i64, f32 = o.rows + 1, torch.int64, torch.float32
        self.tok = torch.full((n,), ids.PAD, dtype=i64, device=dev)  # next input id per row
        self.pos = torch.zeros(n, dtype=i64, device=dev)  # its position
        self.gen = torch.zeros(n, dtype=i64, device=dev)  # ids generated so far (frame position = gen % 7)
        self.limit = torch.ones(n, dtype=i64, device=dev)  # ids this request may generate
        self.active = torch.zeros(n, dtype=torch.bool, device=dev)
        self.temperature = torch.ones(n, dtype=f32, device=dev)
        self.top_p = torch.ones(n, dtype=f32, device=dev)
        self.penalty = torch.ones(n, dtype=f32, device=dev)
        self.hist = torch.full((n, o.history), -1, dtype=i64, device=dev)
        self.out = torch.zeros(n, dtype=i64, device=dev)  # the step's ids
        self.first = torch.zeros(n, dtype=i64, device=dev)  # an admission's first id
        # an admission pass's inputs, static so a captured prefill reads them (padding → the scratch row)
        self._pf_rows = torch.full((PREFILL_ROW_BUCKETS[-1],), self.scratch, dtype=i64, device=dev)
        self._pf_tok = torch.full((PREFILL_ROW_BUCKETS[-1], o.max_seq), ids.PAD, dtype=i64, device=dev)
        self._pf_len = torch.ones(PREFILL_ROW_BUCKETS[-1], dtype=i64, device=dev)
        self._pf_lim = torch.ones(PREFILL_ROW_BUCKETS[-1], dtype=i64, device=dev)
        self._pf_f = torch.ones(PREFILL_ROW_BUCKETS[-1], 3, dtype=f32, device=dev)
        pin = dev.type == "cuda"
        self._bufs = [torch.zeros(2 * o.rows, dtype=i64, pin_memory=pin) for _ in range(3)]
        self._buf_i = 0
        # host mirrors, for scheduling and end detection without reading the device
        self.busy = np.zeros(o.rows, dtype=bool)
        self.pos_h = np.zeros(o.rows, dtype=np.int64)
        self.gen_h = np.zeros(o.rows, dtype=np.int64)
        self.max_h = np.zeros(o.rows, dtype=np.int64)
        self.epoch = np.zeros(o.rows, dtype=np.int64)
        self._admitted: list[int] = []  # admitted since the last launch, first ids not yet copied
        self._outstanding = 0  # launched tickets not yet collected
        # "auto" leaves the padded SDPA reference eager: compiled with a dynamic KV length it tripped an
        # index bounds assertion on the H200 (2026-11-26), which kills the CUDA context
        self.compiled = o.compile == "on" or (
            o.compile == "auto" and dev.type == "cuda" and o.attention in ("flex", "triton")
        )
        self.compile_error = ""
        if o.compile_batch not in ("dynamic", "static"):
            raise ValueError(f"compile_batch {o.compile_batch!r}: dynamic or static")
        dynamic = o.compile_batch == "dynamic"
        length_aware = o.attention in ("flex", "triton")
        buckets: tuple[int, ...] = FLEX_BATCH_BUCKETS if length_aware else BATCH_BUCKETS
        if self.compiled and dynamic and o.rows > 1:
            buckets = tuple(b for b in buckets if b > 1)  # a batch of 1 would be one more (static) compile
        self.batch_buckets = (*(b for b in buckets if b < o.rows), o.rows)
        self._step_fn: Callable[[int, Any], None] = self._step_body
        if self.compiled:
            # no graph of its own: the step is captured in the generator's CUDA graphs like the eager one
            if not dynamic:  # every bucket is a recompile of the same code: let dynamo keep them all
                cfg = torch._dynamo.config
                limit = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
                setattr(cfg, limit, max(getattr(cfg, limit), len(self.batch_buckets) + 2))
            self._step_fn = torch.compile(self._step_body, dynamic=dynamic)
        model.compile_prefill(o.compile_prefill)
        pad = o.prefill_pad
        self.prefill_lengths = tuple(
            t for t in (pad << k for k in range(12)) if t <= min(o.max_seq, PREFILL_GRAPH_TOKENS)
        )
        if length_aware:
            self.kv_buckets: tuple[int, ...] = (
                o.max_seq,
            )  # each row's length bounds the reads, not a bucket
        else:
            kv, k = [], o.min_kv_bucket
            while k < o.max_seq:
                kv.append(k)
                k *= 2
            self.kv_buckets = (*kv, o.max_seq)
        if o.graph_mode not in ("auto", "record"):
            raise ValueError(f"graph_mode {o.graph_mode!r}: auto or record")
        self.graph_mode = (
            "record" if o.graph_mode == "record" else ("cuda" if o.cuda_graphs and dev.type == "cuda" else "")
        )
        self.use_graphs = bool(self.graph_mode)
        self.stream = torch.cuda.Stream(device=dev) if dev.type == "cuda" else None
        self._graphs: dict[tuple[int, int], Any] = {}
        self._prefill_graphs: dict[tuple[int, int], Any] = {}
        self._pool: Any = None
        self.ready = False
        self.captures = 0
        self.captures_after_ready = 0
        self.steps = 0
        self.host_s = 0.0  # host time spent in launch()/collect() other than waiting for the device

    # -- rows -----------------------------------------------------------------------------------------
    @property
    def free_rows(self) -> int:
        return int((~self.busy).sum())

    @property
    def active_rows(self) -> int:
        return int(self.busy.sum())

    def admit(
        self, prompt: list[int], max_tokens: int, temperature: float, top_p: float, penalty: float
    ) -> tuple[int, int, bool]:
        """Prefill one prompt into the lowest free row and sample its first id → (row, id, finished).
        Synchronous (reads the id back); serving uses `admit_many` and gets the id with the next step."""
        (row,) = self.admit_many([Admission(prompt, max_tokens, temperature, top_p, penalty)], deliver=False)
        with self._device():
            first = int(self.first[row])
        finished = first == ids.END_OF_SPEECH or self.max_h[row] <= 1
        if finished:
            self._end(np.array([row]))
        return row, first, finished

    def check(self, a: Admission) -> None:
        """Refuse a request that cannot fit, before any device work (ValueError, one line)."""
        if not a.prompt or len(a.prompt) >= self.options.max_seq:
            raise ValueError(f"prompt of {len(a.prompt)} ids does not fit max_seq {self.options.max_seq}")

    def admit_many(self, admissions: Sequence[Admission], deliver: bool = True) -> list[int]:
        """Prefill a pass of prompts into the lowest free rows and sample their first ids on the device
        (one padded forward per PREFILL_ROW_BUCKETS[-1] prompts); returns the rows. With `deliver`, the
        first ids come with the next `collect`."""
        for a in admissions:
            self.check(a)
        free = np.flatnonzero(~self.busy)
        if free.size < len(admissions):
            raise RuntimeError(f"{len(admissions)} admissions, {free.size} free cache rows")
        rows = free[: len(admissions)]
        most = PREFILL_ROW_BUCKETS[-1]
        for i in range(0, len(admissions), most):
            self._prefill_pass(admissions[i : i + most], rows[i : i + most])
        if deliver:
            self._admitted.extend(rows.tolist())
        return [int(r) for r in rows]

    def _prefill_pass(self, admissions: Sequence[Admission], rows: np.ndarray) -> None:
        o, n = self.options, len(admissions)
        lengths = np.array([len(a.prompt) for a in admissions], dtype=np.int64)
        t = min(o.max_seq, -(-int(lengths.max()) // o.prefill_pad) * o.prefill_pad)
        graph_key = None
        if self.use_graphs and o.prefill_graphs:
            nb = bucket(n, PREFILL_ROW_BUCKETS)
            tb = next((x for x in self.prefill_lengths if x >= t and nb * x <= PREFILL_GRAPH_TOKENS), 0)
            if tb:
                graph_key, n, t = (nb, tb), nb, tb
        tokens = np.full((n, t), ids.PAD, dtype=np.int64)
        for i, a in enumerate(admissions):
            tokens[i, : len(a.prompt)] = a.prompt
        limits = np.ones(n, dtype=np.int64)
        limits[: len(admissions)] = [max(1, min(a.max_tokens, o.max_seq - len(a.prompt))) for a in admissions]
        floats = np.ones((n, 3), dtype=np.float32)
        floats[: len(admissions)] = [[a.temperature, a.top_p, a.penalty] for a in admissions]
        d_rows = np.full(n, self.scratch, dtype=np.int64)  # bucket padding: the scratch row
        d_rows[: len(admissions)] = rows
        d_len = np.ones(n, dtype=np.int64)
        d_len[: len(admissions)] = lengths
        with self._device():
            self._pf_rows[:n].copy_(self._to_device(d_rows), non_blocking=True)
            self._pf_tok[:n, :t].copy_(self._to_device(tokens), non_blocking=True)
            self._pf_len[:n].copy_(self._to_device(d_len), non_blocking=True)
            self._pf_lim[:n].copy_(self._to_device(limits), non_blocking=True)
            self._pf_f[:n].copy_(self._to_device(floats), non_blocking=True)
            if graph_key is None:
                self._prefill(n, t)
            else:
                graph = self._prefill_graphs.get(graph_key)
                if graph is None:
                    graph = self._prefill_graphs[graph_key] = self._capture_prefill(*graph_key)
                graph.replay()
        self.busy[rows] = True
        self.epoch[rows] += 1
        self.pos_h[rows], self.gen_h[rows], self.max_h[rows] = lengths, 1, limits[: len(admissions)]

    def _prefill(self, n: int, t: int) -> None:
        """The pass on the device, from the static inputs' first n prompts × t ids (graph-capturable)."""
        d_rows, d_tok, d_len, d_lim = (
            self._pf_rows[:n],
            self._pf_tok[:n, :t],
            self._pf_len[:n],
            self._pf_lim[:n],
        )
        d_f = self._pf_f[:n]
        self.temperature[d_rows] = d_f[:, 0]
        self.top_p[d_rows] = d_f[:, 1]
        self.penalty[d_rows] = d_f[:, 2]
        self.hist.index_fill_(0, d_rows, -1)  # not `hist[rows] = -1`: a CPU scalar copy, refused in capture
        logits = self.model.prefill(d_tok, d_rows, d_len)
        zero = torch.zeros_like(d_rows)
        z = penalise(restrict(logits, zero), zero, self.hist[d_rows], self.penalty[d_rows])
        choice = sample(z, self.temperature[d_rows], self.top_p[d_rows])
        token, column = to_token_ids(choice, zero)
        self.hist[d_rows, 0] = column
        self.first[d_rows] = token
        self.tok[d_rows] = token
        self.pos[d_rows] = d_len
        self.gen.index_fill_(0, d_rows, 1)
        self.limit[d_rows] = d_lim
        self.active[d_rows] = (token != ids.END_OF_SPEECH) & (d_lim > 1)

    def _to_device(self, a: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(a)
        if self.device.type != "cuda":
            return t
        return t.pin_memory().to(self.device, non_blocking=True)

    def release(self, row: int) -> None:
        """Free a row at once (cancel); its cache contents are simply overwritten by the next request."""
        if self.busy[row]:
            self._end(np.array([row]))

    def _end(self, rows: np.ndarray) -> None:
        if rows.size == 0:
            return
        self.busy[rows] = False
        self.epoch[rows] += 1
        with self._device():
            self.active[self._to_device(rows.astype(np.int64))] = False

    @contextlib.contextmanager
    def _device(self) -> Iterator[None]:
        """Inference mode, and on CUDA the generator's own stream: every write to the row state and every
        step is ordered on it, and SNAC (another thread, the default stream) overlaps instead of queueing."""
        with torch.inference_mode():
            if self.stream is None:
                yield
            else:
                with torch.cuda.stream(self.stream):
                    yield

    # -- decode ---------------------------------------------------------------------------------------
    def step(self) -> StepResult:
        """One token for every busy row, synchronously (tests, benchmarks): launch, then collect."""
        return self.collect(self.launch())

    def launch(self) -> Ticket:
        """Enqueue one step for every busy row (and the copy of its ids, and of pending admissions' first
        ids, to pinned memory); returns at once. At most two tickets may be outstanding."""
        if self._outstanding >= 2:
            raise RuntimeError("collect a ticket before launching a third step")
        t0 = time.perf_counter()
        rows = np.flatnonzero(self.busy)
        admitted = np.array(self._admitted, dtype=np.int64)
        self._admitted.clear()
        buf = self._bufs[self._buf_i]
        self._buf_i = (self._buf_i + 1) % len(self._bufs)
        b = bucket(int(rows[-1]) + 1, self.batch_buckets) if rows.size else 0
        event = None
        with self._device():
            if b:
                kv_len = bucket(int(self.pos_h[rows].max()) + 1, self.kv_buckets)
                if self.use_graphs:
                    self._replay(b, kv_len)
                else:
                    self._step(b, kv_len)
                buf[:b].copy_(self.out[:b], non_blocking=True)
            if admitted.size:
                n = self.options.rows
                buf[n : 2 * n].copy_(self.first[:n], non_blocking=True)
            if self.stream is not None:
                event = torch.cuda.Event()
                event.record(self.stream)
        self.pos_h[rows] += 1
        self.gen_h[rows] += 1
        ticket = Ticket(
            rows,
            self.epoch[rows].copy(),
            self.gen_h[rows].copy(),
            self.pos_h[rows].copy(),
            admitted,
            self.epoch[admitted].copy(),
            buf,
            b,
            event,
        )
        self._outstanding += 1
        if b:
            self.steps += 1
        self.host_s += time.perf_counter() - t0
        return ticket

    def collect(self, ticket: Ticket) -> StepResult:
        """Wait for a launched step's ids (only its copy, not later work) → its result; ends finished rows."""
        if ticket.event is not None:
            ticket.event.synchronize()
        t0 = time.perf_counter()
        self._outstanding -= 1
        host = ticket.buf.numpy()
        n = self.options.rows
        parts_r, parts_t, parts_f = [], [], []
        if ticket.admitted.size:
            keep = self.epoch[ticket.admitted] == ticket.admitted_epochs
            r = ticket.admitted[keep]
            tok = host[n + r]
            fin = (tok == ids.END_OF_SPEECH) | (self.max_h[r] <= 1)
            self._end(r[fin])
            parts_r.append(r)
            parts_t.append(tok)
            parts_f.append(fin)
        if ticket.rows.size:
            keep = self.epoch[ticket.rows] == ticket.epochs
            r = ticket.rows[keep]
            tok = host[: ticket.b][r]
            fin = (tok == ids.END_OF_SPEECH) | (ticket.gen_after[keep] >= self.max_h[r])
            fin |= ticket.pos_after[keep] >= self.options.max_seq
            if fin.any():
                self._end(r[fin])
            parts_r.append(r)
            parts_t.append(tok)
            parts_f.append(fin)
        self.host_s += time.perf_counter() - t0
        if not parts_r:
            empty = np.zeros(0, dtype=np.int64)
            return StepResult(empty, empty, np.zeros(0, dtype=bool))
        return StepResult(np.concatenate(parts_r), np.concatenate(parts_t), np.concatenate(parts_f))

    def abandon(self) -> None:
        """After a failed step: forget the tickets in flight (their rows are being released)."""
        self._outstanding = 0

    def occupy(
        self, n: int, position: int | Sequence[int], max_tokens: int | Sequence[int] = 1 << 30
    ) -> None:
        """Benchmarks: mark rows 0..n-1 busy at `position` (one for all, or one per row) for `max_tokens`
        more ids, without a prefill (speed does not depend on the cache contents). Not for serving: those
        rows generate from whatever their cache holds."""
        p = np.broadcast_to(np.asarray(position, dtype=np.int64), (n,))
        m = np.ascontiguousarray(np.broadcast_to(np.asarray(max_tokens, dtype=np.int64), (n,)))
        if n > self.options.rows or (p.size and int(p.max()) >= self.options.max_seq):
            raise ValueError(f"{n} rows at positions up to {int(p.max())} do not fit {self.options}")
        self.busy[:n] = True
        self.epoch[:n] += 1
        self.pos_h[:n], self.gen_h[:n], self.max_h[:n] = p, 0, m
        with self._device():
            self.active[:n] = True
            self.pos[:n] = self._to_device(np.ascontiguousarray(p))
            self.gen[:n] = 0
            self.limit[:n] = self._to_device(m)
            self.hist[:n] = -1

    def close(self) -> None:
        """Drop the graphs and the model's KV cache (a benchmark swapping generators on one model)."""
        self._graphs.clear()
        self._prefill_graphs.clear()
        self._pool = None
        self.model.caches = []

    def _step(self, b: int, kv_len: int) -> None:
        """The whole step on the device: forward, restricted sampling, state advance, and rows that end
        (stop id, or their token limit) switched off (graph-capturable: no host sync)."""
        self._step_fn(b, self.model.decode_mask(self.pos[:b], kv_len))

    def _step_body(self, b: int, mask: Any) -> None:
        pos, gen, act = self.pos[:b], self.gen[:b], self.active[:b]
        logits = self.model.decode_masked(self.tok[:b], pos, mask)
        framepos = gen % ids.FRAME_TOKENS
        z = penalise(restrict(logits, framepos), framepos, self.hist[:b], self.penalty[:b])
        choice = sample(z, self.temperature[:b], self.top_p[:b])
        token, column = to_token_ids(choice, framepos)
        self.hist[:b].scatter_(1, (gen % self.options.history)[:, None], column[:, None])
        self.out[:b].copy_(token)
        room = pos + 1 < self.options.max_seq  # a row at the cache's last position ends there
        live = act & (token != ids.END_OF_SPEECH) & (gen + 1 < self.limit[:b]) & room
        self.tok[:b].copy_(torch.where(act, token, self.tok[:b]))
        self.pos[:b].copy_(torch.where(live, pos + 1, torch.zeros_like(pos)))
        self.gen[:b].copy_(torch.where(act, gen + 1, gen))
        self.active[:b].copy_(live)

    # -- graphs ---------------------------------------------------------------------------------------
    def _state(self) -> tuple[torch.Tensor, ...]:
        return (self.tok, self.pos, self.gen, self.hist, self.out, self.active)

    def _replay(self, b: int, kv_len: int) -> None:
        key = (b, kv_len)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._capture(b, kv_len)
        graph.replay()

    def _count_capture(self, kind: str, a: int, b: int) -> None:
        self.captures += 1
        if self.ready:
            self.captures_after_ready += 1
            log.warning("cuda graph captured after ready", extra={"kind": kind, "shape": [a, b]})

    def _capture(self, b: int, kv_len: int) -> Any:
        """Capture one (batch, KV length) decode step."""
        self._count_capture("decode", b, kv_len)
        return self._capture_fn(lambda: self._step(b, kv_len))

    def _capture_prefill(self, n: int, t: int) -> Any:
        """Capture one (prompts, padded length) admission pass over the static inputs."""
        self._count_capture("prefill", n, t)
        return self._capture_fn(lambda: self._prefill(n, t))

    def _capture_fn(self, fn: Callable[[], None]) -> Any:
        """The warm-up runs (compile, cuBLAS/cuDNN plans) run on the live state, which is restored after
        EACH of them, so no row's position ever moves past where the real step will write (a row at
        max_seq - 1 stays there)."""
        saved = [t.clone() for t in self._state()]

        def restore() -> None:
            for t, s in zip(self._state(), saved, strict=True):
                t.copy_(s)

        if self.graph_mode == "record":
            for _ in range(2):
                fn()
                restore()
            return _RecordedGraph(fn)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
                restore()
        torch.cuda.current_stream().wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        # thread-local: another thread's CUDA calls (SNAC, pinned copies) cannot invalidate this capture
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            fn()
        restore()  # capture itself ran nothing; this only guards against a partial warm-up write
        return graph

    def prefill_shapes(self) -> list[tuple[int, int]]:
        """(prompts, padded length) of every admission pass that replays a graph."""
        if not (self.use_graphs and self.options.prefill_graphs):
            return []
        top = bucket(min(self.options.rows, PREFILL_ROW_BUCKETS[-1]), PREFILL_ROW_BUCKETS)
        return [
            (n, t)
            for n in PREFILL_ROW_BUCKETS
            if n <= top
            for t in self.prefill_lengths
            if n * t <= PREFILL_GRAPH_TOKENS
        ]

    def warm_graphs(self, batches: list[int] | None = None, kv_lens: list[int] | None = None) -> int:
        """Capture graphs ahead of traffic: decode steps (largest first, so the shared pool is sized once),
        then admission passes (all padding, so they touch only the scratch row). With `compile`, a compile
        that fails falls back to the eager step (logged, `compile_error`) rather than failing the engine."""
        if not self.use_graphs:
            return 0
        try:
            self._warm_decode(batches, kv_lens)
        except Exception as e:
            if not self.compiled:
                raise
            self.compile_error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            log.warning(
                "compiled decode step failed; using the eager step", extra={"error": self.compile_error}
            )
            self.compiled, self._step_fn = False, self._step_body
            self._graphs.clear()
            self._warm_decode(batches, kv_lens)
        with self._device():
            self._pf_rows.fill_(self.scratch)
            self._pf_tok.fill_(ids.PAD)
            self._pf_len.fill_(1)
            self._pf_lim.fill_(1)
            self._pf_f.fill_(1.0)
            try:
                self._warm_prefill()
            except Exception as e:
                if not self.options.compile_prefill:
                    raise
                self.compile_error = f"prefill: {type(e).__name__}: {e}".splitlines()[0][:300]
                log.warning(
                    "compiled admission pass failed; using the eager one", extra={"error": self.compile_error}
                )
                self.model.compile_prefill(False)
                self._prefill_graphs.clear()
                self._warm_prefill()
        if self.stream is not None:
            self.stream.synchronize()
        return len(self._graphs) + len(self._prefill_graphs)

    def _warm_prefill(self) -> None:
        for n, t in self.prefill_shapes():
            if (n, t) not in self._prefill_graphs:
                self._prefill_graphs[(n, t)] = self._capture_prefill(n, t)

    def _warm_decode(self, batches: list[int] | None, kv_lens: list[int] | None) -> None:
        with self._device():
            for b in sorted(
                {bucket(x, self.batch_buckets) for x in batches or self.batch_buckets}, reverse=True
            ):
                for kv in sorted(kv_lens or self.kv_buckets, reverse=True):
                    if (b, kv) not in self._graphs:
                        self._graphs[(b, kv)] = self._capture(b, kv)

    def mark_ready(self) -> None:
        """From here on a capture is a defect (it would stall live traffic): counted and logged."""
        self.ready = True
