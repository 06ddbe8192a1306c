"""`--backend cuda`: Orpheus token generation in plain PyTorch (+ CUDA graphs on a GPU), any NVIDIA host.

One worker thread drives the batch generator (plugins/orpheus/engine/cuda): new requests are prefilled between
decode steps, batched into one forward per pass up to a token budget, so running streams never wait for a long
admission; every busy row advances one token per step. The thread stays one step ahead of the device: it
launches step n+1 before it collects (and delivers) step n. Every CUDA graph is captured in `start()`, before
the engine reports ready. A step's ids reach the engine in one vectorised push: ids of a request that
was cancelled meanwhile are filtered out by comparing request ids per engine slot (numpy), with no Python per
request. On CPU the same code runs eagerly (tests, at tiny shapes).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import GenRequest, TokenBackend

log = logging.getLogger("parley.orpheus.cuda")


@dataclass(frozen=True)
class CudaBackendOptions:
    model_dir: str = ""
    device: str = "cuda"
    dtype: str = "bfloat16"  # "float32" on CPU
    rows: int = 256  # concurrent generations (KV cache rows)
    max_seq: int = 2048
    history: int = 128  # repetition-penalty window (tokens)
    prefill_tokens: int = 1024  # prompt tokens admitted between two decode steps, at most
    cuda_graphs: bool = True
    fp8: bool = False  # FP8 weights via torch._scaled_mm (Hopper)
    threads: int = 1  # CPU intra-op threads
    seed: int | None = None
    attention: str = (
        "flex"  # decode attention: "flex", "triton" (split-KV kernel) or "sdpa" (padded reference)
    )
    kv_fp8: bool = False  # FP8 (e4m3) KV cache: needs attention="triton"
    graph_mode: str = "auto"  # "record": eager stand-in graphs on CPU (tests of the warm-up path)


@dataclass
class _Pending:
    uid: int
    req: GenRequest


class CudaBackend(TokenBackend):
    name = "cuda"

    def __init__(self, options: CudaBackendOptions) -> None:
        super().__init__()
        self.options = options
        self._uids = itertools.count(1)
        self._uid_of_slot = np.full(64, -1, dtype=np.int64)  # loop thread: live request id per engine slot
        self._lock = threading.Lock()
        self._pending: deque[_Pending] = deque()
        self._cancelled: list[int] = []
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._live = 0
        self.generator: Any = None

    async def start(self) -> None:
        await asyncio.to_thread(self._load)
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="orpheus-cuda-gen", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        import torch

        from plugins.orpheus.engine.cuda.generator import BatchGenerator, GeneratorOptions
        from plugins.orpheus.engine.cuda.model import OrpheusLlama
        from plugins.orpheus.engine.tokenizer import load_encoder

        o = self.options
        if o.device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError("the cuda backend was asked for device cuda, but CUDA is not available")
        if o.device == "cpu":
            torch.set_num_threads(max(1, o.threads))
        if o.seed is not None:
            torch.manual_seed(o.seed)
        self._encode = load_encoder(o.model_dir)
        model = OrpheusLlama.from_pretrained(o.model_dir, getattr(torch, o.dtype), o.device)
        if o.fp8:
            model.use_fp8()
        gen = BatchGenerator(
            model,
            GeneratorOptions(
                o.rows,
                o.max_seq,
                o.history,
                o.cuda_graphs,
                attention=o.attention,
                kv_fp8=o.kv_fp8,
                graph_mode=o.graph_mode,
            ),
        )
        graphs = gen.warm_graphs()  # every (batch, KV) graph now: none is captured under live traffic
        gen.mark_ready()
        log.info("cuda generator warm", extra={"graphs": graphs, "attention": o.attention})
        self.generator = gen

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    @property
    def active(self) -> int:
        return int((self._uid_of_slot >= 0).sum())

    # -- loop thread ----------------------------------------------------------------------------------
    def submit(self, request: GenRequest) -> None:
        if request.slot >= self._uid_of_slot.size:
            grown = np.full(max(request.slot + 1, 2 * self._uid_of_slot.size), -1, dtype=np.int64)
            grown[: self._uid_of_slot.size] = self._uid_of_slot
            self._uid_of_slot = grown
        uid = next(self._uids)
        self._uid_of_slot[request.slot] = uid
        with self._lock:
            self._pending.append(_Pending(uid, request))
        self._wake.set()

    def cancel(self, slot: int) -> None:
        if slot >= self._uid_of_slot.size or self._uid_of_slot[slot] < 0:
            return
        uid = int(self._uid_of_slot[slot])
        self._uid_of_slot[slot] = -1
        with self._lock:
            self._cancelled.append(uid)
        self._wake.set()
        if self.sink:
            self.sink.finish(slot, "cancelled")

    async def close(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread:
            await asyncio.to_thread(self._thread.join, 5)

    def _deliver(
        self,
        slots: np.ndarray,
        uids: np.ndarray,
        tokens: np.ndarray,
        ends: list[tuple[int, int, str, str | None]],
    ) -> None:
        """One push for the pass (ids of requests cancelled meanwhile dropped), then the finishes."""
        sink = self.sink
        if sink is None:
            return
        if slots.size:
            live = self._uid_of_slot[slots] == uids
            if live.all():
                sink.push(slots, tokens)
            elif live.any():
                sink.push(slots[live], tokens[live])
        for slot, uid, reason, error in ends:
            if self._uid_of_slot[slot] != uid:
                continue
            self._uid_of_slot[slot] = -1
            sink.finish(slot, reason, error)

    # -- worker thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        gen = self.generator
        row_uid = np.full(gen.options.rows, -1, dtype=np.int64)
        row_slot = np.full(gen.options.rows, -1, dtype=np.int64)
        waiting: deque[_Pending] = deque()
        ticket = None  # the step launched last pass, collected after the next launch
        while not self._stop:
            with self._lock:
                waiting.extend(self._pending)
                self._pending.clear()
                cancelled, self._cancelled = set(self._cancelled), []
            if cancelled:
                for row in np.flatnonzero(np.isin(row_uid, list(cancelled))).tolist():
                    gen.release(row)
                    row_uid[row] = row_slot[row] = -1
                waiting = deque(p for p in waiting if p.uid not in cancelled)
            ends: list[tuple[int, int, str, str | None]] = []
            self._admit(gen, waiting, row_uid, row_slot, ends)
            nxt = None
            try:
                if gen.active_rows:
                    nxt = gen.launch()
                res = gen.collect(ticket) if ticket is not None else None
            except Exception as e:  # the batch itself failed: end every request in it
                log.exception("cuda decode step failed")
                for row in np.flatnonzero(row_uid >= 0).tolist():
                    ends.append((int(row_slot[row]), int(row_uid[row]), "error", f"{type(e).__name__}: {e}"))
                    gen.release(row)
                    row_uid[row] = row_slot[row] = -1
                ticket, nxt, res = None, None, None
                gen.abandon()
            ticket = nxt
            slots = uids = tokens = np.zeros(0, dtype=np.int64)
            if res is not None and res.rows.size:
                slots, uids, tokens = row_slot[res.rows], row_uid[res.rows], res.tokens
                for row, tok in zip(
                    res.rows[res.finished].tolist(), res.tokens[res.finished].tolist(), strict=True
                ):
                    reason = "stop" if tok == ids.END_OF_SPEECH else "length"
                    ends.append((int(row_slot[row]), int(row_uid[row]), reason, None))
                    row_uid[row] = row_slot[row] = -1
            if (slots.size or ends) and self._loop is not None:
                self._loop.call_soon_threadsafe(self._deliver, slots, uids, tokens, ends)
            if ticket is None and not gen.active_rows and not (waiting and gen.free_rows):
                self._wake.wait(0.1)
                self._wake.clear()

    def _admit(
        self,
        gen: Any,
        waiting: deque[_Pending],
        row_uid: np.ndarray,
        row_slot: np.ndarray,
        ends: list[tuple[int, int, str, str | None]],
    ) -> None:
        """One batched prefill for the requests that fit this pass's token budget; their first ids come
        back with the next collected step. A bad request ends alone; a failed prefill ends its pass."""
        from plugins.orpheus.engine.cuda.generator import Admission

        budget, free = self.options.prefill_tokens, gen.free_rows
        batch: list[tuple[_Pending, Admission]] = []
        while waiting and len(batch) < free and budget > 0:
            p = waiting.popleft()
            req, sp = p.req, p.req.sampling
            if req.max_tokens <= 0:
                ends.append((req.slot, p.uid, "length", None))
                continue
            a = Admission(req.prompt_ids, req.max_tokens, sp.temperature, sp.top_p, sp.repetition_penalty)
            try:
                gen.check(a)
            except ValueError as e:
                ends.append((req.slot, p.uid, "error", f"ValueError: {e}"))
                continue
            budget -= len(req.prompt_ids)
            batch.append((p, a))
        if not batch:
            return
        try:
            rows = gen.admit_many([a for _, a in batch])
        except Exception as e:
            log.exception("cuda prefill failed")
            ends.extend((p.req.slot, p.uid, "error", f"{type(e).__name__}: {e}") for p, _ in batch)
            return
        for (p, _), row in zip(batch, rows, strict=True):
            row_uid[row], row_slot[row] = p.uid, p.req.slot
