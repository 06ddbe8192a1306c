"""Token generation with transformers on CPU or GPU (tests, laptops, and a fallback on GPU hosts).

A worker thread advances every active request by one token per round and hands the whole round to the event
loop in one call. Logits are computed only for the ids allowed at the request's frame position (4096 codes,
plus END_OF_SPEECH at a frame boundary) — that is the per-step mask, and it makes the vocabulary-sized LM head
cost 4 097 rows instead of 156 940.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import GenRequest, TokenBackend

log = logging.getLogger("parley.orpheus.torch")


@dataclass(frozen=True)
class TorchBackendOptions:
    model_dir: str = ""
    device: str = "cpu"
    dtype: str = "float32"  # "bfloat16" / "float16" on GPU
    threads: int = 1


@dataclass
class _Live:
    req: GenRequest
    past: Any = None
    generated: int = 0
    next_input: Any = None
    seen: np.ndarray | None = None
    rng: Any = None
    cancelled: bool = False


class TorchBackend(TokenBackend):
    name = "torch"

    def __init__(self, options: TorchBackendOptions) -> None:
        super().__init__()
        self.options = options
        self._live: dict[int, _Live] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.model: Any = None

    async def start(self) -> None:
        await asyncio.to_thread(self._load)
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="orpheus-torch-gen", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        from plugins.orpheus.engine.hf_compat import dtype_kwarg
        from plugins.orpheus.engine.tokenizer import load_encoder

        if self.options.device == "cpu":
            torch.set_num_threads(max(1, self.options.threads))
        self._torch = torch
        hf_logging.disable_progress_bar()
        self._encode = load_encoder(self.options.model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(
            self.options.model_dir, local_files_only=True, **dtype_kwarg(getattr(torch, self.options.dtype))
        )
        self.model.to(self.options.device)  # type: ignore[arg-type]
        self.model.eval()
        if self.model.config.vocab_size < ids.VOCAB_SIZE:
            raise ValueError(f"model vocab {self.model.config.vocab_size} < Orpheus {ids.VOCAB_SIZE}")
        w = self.model.get_output_embeddings().weight
        self._head = w[ids.AUDIO_BASE : ids.AUDIO_END].detach()  # (7·4096, hidden)
        self._stop_row = w[ids.END_OF_SPEECH].detach()
        self._max_pos = int(getattr(self.model.config, "max_position_embeddings", 8192))

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    @property
    def active(self) -> int:
        return len(self._live)

    def submit(self, request: GenRequest) -> None:
        torch = self._torch
        room = self._max_pos - len(request.prompt_ids) - 1
        request.max_tokens = max(0, min(request.max_tokens, room))
        live = _Live(request)
        live.next_input = torch.tensor([request.prompt_ids], device=self.options.device)
        live.seen = np.zeros(ids.CODEBOOK * ids.FRAME_TOKENS, dtype=bool)
        seed = request.sampling.seed if request.sampling.seed is not None else request.slot * 7919 + 1
        live.rng = np.random.default_rng(seed)
        with self._lock:
            self._live[request.slot] = live
        self._wake.set()

    def cancel(self, slot: int) -> None:
        with self._lock:
            live = self._live.pop(slot, None)
        if live is not None:
            live.cancelled = True
            if self.sink:
                self.sink.finish(slot, "cancelled")

    async def close(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread:
            await asyncio.to_thread(self._thread.join, 5)

    # -- worker thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        torch = self._torch
        with torch.inference_mode():
            while not self._stop:
                with self._lock:
                    batch = list(self._live.values())
                if not batch:
                    self._wake.wait(0.1)
                    self._wake.clear()
                    continue
                out: list[tuple[_Live, int, str | None]] = []
                for live in batch:
                    if live.cancelled:
                        continue
                    try:
                        tok = self._step(live)
                        done = tok == ids.END_OF_SPEECH or live.generated >= live.req.max_tokens
                        out.append(
                            (live, tok, ("stop" if tok == ids.END_OF_SPEECH else "length") if done else None)
                        )
                    except Exception as e:  # a failing request ends alone
                        log.exception("torch generation step failed")
                        out.append((live, -1, f"error: {e}"))
                if out and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._deliver, out)

    def _step(self, live: _Live) -> int:
        torch = self._torch
        req = live.req
        if req.max_tokens <= 0:
            live.generated = 0
            return ids.END_OF_SPEECH
        res = self.model.model(input_ids=live.next_input, past_key_values=live.past, use_cache=True)
        live.past = res.past_key_values
        h = res.last_hidden_state[0, -1]
        pos = live.generated % ids.FRAME_TOKENS
        rows = self._head[pos * ids.CODEBOOK : (pos + 1) * ids.CODEBOOK]
        logits = (rows @ h).float().cpu().numpy()
        if pos == 0:
            logits = np.append(logits, float((self._stop_row @ h).float()))
        sp = req.sampling
        seen = live.seen
        assert seen is not None
        seen_here = seen[pos * ids.CODEBOOK : (pos + 1) * ids.CODEBOOK]
        if sp.repetition_penalty != 1.0 and seen_here.any():
            head = logits[: ids.CODEBOOK]
            pen = np.where(head > 0, head / sp.repetition_penalty, head * sp.repetition_penalty)
            logits[: ids.CODEBOOK] = np.where(seen_here, pen, head)
        choice = self._sample(logits, sp.temperature, sp.top_p, live.rng)
        if choice == ids.CODEBOOK:
            tok = ids.END_OF_SPEECH
        else:
            tok = ids.AUDIO_BASE + pos * ids.CODEBOOK + choice
            seen[pos * ids.CODEBOOK + choice] = True
        live.generated += 1
        live.next_input = torch.tensor([[tok]], device=self.options.device)
        return tok

    @staticmethod
    def _sample(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
        """Temperature + nucleus sampling over the allowed ids (numpy: cheaper than torch at this size)."""
        if temperature <= 0:
            return int(logits.argmax())
        z = logits / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if top_p < 1.0:
            order = np.argsort(-p)
            sorted_p = p[order]
            keep = int(np.searchsorted(np.cumsum(sorted_p), top_p)) + 1
            sorted_p = sorted_p[:keep] / sorted_p[:keep].sum()
            return int(order[rng.choice(keep, p=sorted_p)])
        return int(rng.choice(p.size, p=p))

    def _deliver(self, out: list[tuple[_Live, int, str | None]]) -> None:
        """On the loop thread: one push for the round, then finishes; cancelled requests are dropped."""
        sink = self.sink
        if sink is None:
            return
        slots, toks, ends = [], [], []
        for live, tok, end in out:
            if self._live.get(live.req.slot) is not live:
                continue
            if tok >= 0:
                slots.append(live.req.slot)
                toks.append(tok)
            if end is not None:
                ends.append((live, end))
        if slots:
            sink.push(np.asarray(slots, dtype=np.int64), np.asarray(toks, dtype=np.int64))
        for live, end in ends:
            with self._lock:
                if self._live.get(live.req.slot) is live:
                    del self._live[live.req.slot]
            if end.startswith("error"):
                sink.finish(live.req.slot, "error", end)
            else:
                sink.finish(live.req.slot, end)
