"""Batched generation over the slotted KV cache: admit (prefill) requests between decode steps, step all rows.

Every request owns one cache row while it generates. A decode step runs rows 0..B-1, with B the smallest
batch bucket covering the highest busy row (free rows inside run too, harmlessly), and attends over the
smallest KV-length bucket covering the longest sequence. All per-row state (next input id, position,
generated count, sampling settings, repetition window) lives on the device and is advanced inside the step,
so on CUDA a step is one graph replay per (batch bucket, KV bucket) and one small copy of sampled ids back;
the host side is a few vectorised numpy operations whatever the batch. On CPU the same step runs eagerly.
Not thread-safe: one thread drives it (the cuda backend's worker, or a benchmark).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.cuda.model import OrpheusLlama
from plugins.orpheus.engine.cuda.sampling import penalise, restrict, sample, to_token_ids

# powers of two and 1.5× steps between them: a batch pads to at most ~1.33× its size
BATCH_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 320, 384, 448, 512)


@dataclass(frozen=True)
class GeneratorOptions:
    rows: int = 256  # concurrent requests (KV cache rows)
    max_seq: int = 2048  # prompt + generated tokens per request (25 s of audio)
    history: int = 128  # repetition-penalty window, in tokens
    cuda_graphs: bool = True  # on CUDA only
    min_kv_bucket: int = 128


@dataclass(frozen=True)
class StepResult:
    rows: np.ndarray  # cache rows that produced a token this step
    tokens: np.ndarray  # their token ids
    finished: np.ndarray  # bool per entry: stop id, or max_tokens reached (the row is free again)


def bucket(n: int, buckets: tuple[int, ...]) -> int:
    return next(b for b in buckets if b >= n)


class BatchGenerator:
    def __init__(self, model: OrpheusLlama, options: GeneratorOptions = GeneratorOptions()) -> None:
        o = options
        self.model, self.options = model, o
        dev = model.head.weight.device
        self.device = dev
        model.allocate(o.rows, o.max_seq)
        n, i64, f32 = o.rows, torch.int64, torch.float32
        self.tok = torch.full((n,), ids.PAD, dtype=i64, device=dev)  # next input id per row
        self.pos = torch.zeros(n, dtype=i64, device=dev)  # its position
        self.gen = torch.zeros(n, dtype=i64, device=dev)  # ids generated so far (frame position = gen % 7)
        self.active = torch.zeros(n, dtype=torch.bool, device=dev)
        self.temperature = torch.ones(n, dtype=f32, device=dev)
        self.top_p = torch.ones(n, dtype=f32, device=dev)
        self.penalty = torch.ones(n, dtype=f32, device=dev)
        self.hist = torch.full((n, o.history), -1, dtype=i64, device=dev)
        self.out = torch.zeros(n, dtype=i64, device=dev)
        # host mirrors, for scheduling and end detection without reading the device
        self.busy = np.zeros(o.rows, dtype=bool)
        self.pos_h = np.zeros(o.rows, dtype=np.int64)
        self.gen_h = np.zeros(o.rows, dtype=np.int64)
        self.max_h = np.zeros(o.rows, dtype=np.int64)
        self.batch_buckets = (*(b for b in BATCH_BUCKETS if b < o.rows), o.rows)
        kv, k = [], o.min_kv_bucket
        while k < o.max_seq:
            kv.append(k)
            k *= 2
        self.kv_buckets = (*kv, o.max_seq)
        self.use_graphs = o.cuda_graphs and dev.type == "cuda"
        self.stream = torch.cuda.Stream(device=dev) if dev.type == "cuda" else None
        self._graphs: dict[tuple[int, int], Any] = {}
        self._pool: Any = None
        self.steps = 0
        self.host_s = 0.0  # host time spent in step() other than waiting for the device (benchmarks)

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
        """Prefill a prompt into the lowest free row and sample its first id → (row, id, finished)."""
        o = self.options
        if not prompt or len(prompt) >= o.max_seq:
            raise ValueError(f"prompt of {len(prompt)} ids does not fit max_seq {o.max_seq}")
        free = np.flatnonzero(~self.busy)
        if free.size == 0:
            raise RuntimeError("no free cache row")
        row = int(free[0])
        max_tokens = max(1, min(max_tokens, o.max_seq - len(prompt)))
        with self._device():
            self.hist[row] = -1
            self.temperature[row] = temperature
            self.top_p[row] = top_p
            self.penalty[row] = penalty
            logits = self.model.prefill(torch.tensor(prompt, dtype=torch.int64, device=self.device), row)
            zero = torch.zeros(1, dtype=torch.int64, device=self.device)
            z = penalise(
                restrict(logits[None], zero), zero, self.hist[row : row + 1], self.penalty[row : row + 1]
            )
            choice = sample(z, self.temperature[row : row + 1], self.top_p[row : row + 1])
            token, column = to_token_ids(choice, zero)
            self.hist[row, 0] = column[0]
            self.tok[row] = token[0]
            self.pos[row] = len(prompt)
            self.gen[row] = 1
            first = int(token[0])
        finished = first == ids.END_OF_SPEECH or max_tokens <= 1
        if not finished:
            self.busy[row] = True
            self.active[row] = True
            self.pos_h[row], self.gen_h[row], self.max_h[row] = len(prompt), 1, max_tokens
        return row, first, finished

    def release(self, row: int) -> None:
        """Free a row at once (cancel); its cache contents are simply overwritten by the next request."""
        if self.busy[row]:
            self.busy[row] = False
            with self._device():
                self.active[row] = False

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
        """One token for every busy row."""
        rows = np.flatnonzero(self.busy)
        if rows.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return StepResult(empty, empty, np.zeros(0, dtype=bool))
        t0 = time.perf_counter()
        b = bucket(int(rows[-1]) + 1, self.batch_buckets)
        kv_len = bucket(int(self.pos_h[rows].max()) + 1, self.kv_buckets)
        with self._device():
            if self.use_graphs:
                self._replay(b, kv_len)
            else:
                self._step(b, kv_len)
            t1 = time.perf_counter()
            out = self.out[:b].cpu().numpy()  # the one wait for the device
            t2 = time.perf_counter()
            tokens = out[rows]
        self.steps += 1
        self.pos_h[rows] += 1
        self.gen_h[rows] += 1
        finished = (tokens == ids.END_OF_SPEECH) | (self.gen_h[rows] >= self.max_h[rows])
        if finished.any():
            done = rows[finished]
            self.busy[done] = False
            with self._device():
                self.active[torch.from_numpy(done).to(self.device)] = False
        self.host_s += (t1 - t0) + (time.perf_counter() - t2)
        return StepResult(rows, tokens, finished)

    def occupy(self, n: int, position: int, max_tokens: int = 1 << 30) -> None:
        """Benchmarks: mark rows 0..n-1 busy at `position` without a prefill (speed does not depend on the
        cache contents). Not for serving: those rows generate from whatever their cache holds."""
        if n > self.options.rows or position >= self.options.max_seq:
            raise ValueError(f"{n} rows at position {position} do not fit {self.options}")
        self.busy[:n] = True
        self.pos_h[:n], self.gen_h[:n], self.max_h[:n] = position, 0, max_tokens
        with self._device():
            self.active[:n] = True
            self.pos[:n] = position
            self.gen[:n] = 0
            self.hist[:n] = -1

    def _step(self, b: int, kv_len: int) -> None:
        """The whole step on the device: forward, restricted sampling, state advance (graph-capturable)."""
        pos, gen, act = self.pos[:b], self.gen[:b], self.active[:b]
        logits = self.model.decode(self.tok[:b], pos, kv_len)
        framepos = gen % ids.FRAME_TOKENS
        z = penalise(restrict(logits, framepos), framepos, self.hist[:b], self.penalty[:b])
        choice = sample(z, self.temperature[:b], self.top_p[:b])
        token, column = to_token_ids(choice, framepos)
        self.hist[:b].scatter_(1, (gen % self.options.history)[:, None], column[:, None])
        self.out[:b].copy_(token)
        self.tok[:b].copy_(torch.where(act, token, self.tok[:b]))
        self.pos[:b].copy_(torch.where(act, pos + 1, torch.zeros_like(pos)))
        self.gen[:b].copy_(torch.where(act, gen + 1, gen))

    def _replay(self, b: int, kv_len: int) -> None:
        key = (b, kv_len)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._capture(b, kv_len)
        graph.replay()

    def _capture(self, b: int, kv_len: int) -> Any:
        """Capture one (batch, KV length) step. Warm-up runs on inactive state so nothing real advances."""
        saved = [t.clone() for t in (self.tok, self.pos, self.gen, self.hist, self.out)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self._step(b, kv_len)
        torch.cuda.current_stream().wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            self._step(b, kv_len)
        for t, s in zip((self.tok, self.pos, self.gen, self.hist, self.out), saved, strict=True):
            t.copy_(s)  # capture itself ran nothing, but the warm-up steps did
        return graph

    def warm_graphs(self, batches: list[int] | None = None, kv_lens: list[int] | None = None) -> int:
        """Capture graphs ahead of traffic (largest first, so the shared pool is sized once)."""
        if not self.use_graphs:
            return 0
        with self._device():
            for b in sorted(batches or self.batch_buckets, reverse=True):
                for kv in sorted(kv_lens or self.kv_buckets, reverse=True):
                    if (b, kv) not in self._graphs:
                        self._graphs[(b, kv)] = self._capture(b, kv)
        return len(self._graphs)
