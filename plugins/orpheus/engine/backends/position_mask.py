"""Frame-position logits masks for TensorRT-LLM's logits-processor hooks, built from plain integers.

Why this shape:
- The processors travel to TensorRT-LLM's executor worker by pickling (with a request's SamplingParams, or
  the LLM's arguments). So they hold only ints and floats; the (7, vocab) mask table is built lazily, once per
  process and device, on the worker side.
- The position of the next token is the number of times the processor has been called for that request, not
  `len(token_ids) - prompt_len`: with TensorRT-LLM 1.0's overlap scheduler the token ids a processor sees lag
  one step, which would force p0, p0, p1, … and let the stop id through off a frame boundary.
- The PyTorch runtime passes `stream_ptr=None` (run on the current stream); the C++ executor passes a pointer.
- The batched form adds every request's mask row in one fused `torch._foreach_add_` (no per-request kernel).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from plugins.orpheus.engine import ids

_TABLES: dict[tuple[str, Any, int], Any] = {}


def mask_table(device: Any, dtype: Any, vocab: int = ids.VOCAB_SIZE) -> Any:
    """(7, vocab) additive mask: 0 on each position's 4096 ids (and the stop id at p0), −inf elsewhere."""
    import torch

    key = (str(device), dtype, vocab)
    table = _TABLES.get(key)
    if table is None:
        table = torch.full((ids.FRAME_TOKENS, vocab), float("-inf"), dtype=dtype, device=device)
        for p in range(ids.FRAME_TOKENS):
            lo = ids.AUDIO_BASE + ids.CODEBOOK * p
            table[p, lo : lo + ids.CODEBOOK] = 0.0
        table[0, ids.END_OF_SPEECH] = 0.0
        _TABLES[key] = table
    return table


@contextlib.contextmanager
def on_stream(stream_ptr: int | None) -> Iterator[None]:
    """Run on TensorRT-LLM's stream when it names one; on the current stream when it passes None."""
    if stream_ptr is None:
        yield
        return
    import torch

    with torch.cuda.stream(torch.cuda.ExternalStream(stream_ptr)):
        yield


class CallCounter:
    """Generated-token count per request id, advanced once per processor call; forgets idle requests."""

    def __init__(self, forget_after: int = 256) -> None:
        self.forget_after = forget_after
        self._calls: dict[int, int] = {}
        self._last_seen: dict[int, int] = {}
        self._step = 0

    def advance(self, req_ids: Sequence[int]) -> list[int]:
        """Positions (0..6) of the token each request is about to sample; one call = one token."""
        self._step += 1
        out = []
        for r in req_ids:
            n = self._calls.get(r, 0)
            self._calls[r] = n + 1
            self._last_seen[r] = self._step
            out.append(n % ids.FRAME_TOKENS)
        if len(self._calls) > 64 and self._step % 64 == 0:
            stale = [r for r, s in self._last_seen.items() if self._step - s > self.forget_after]
            for r in stale:
                del self._calls[r], self._last_seen[r]
        return out

    def __len__(self) -> int:
        return len(self._calls)


class RequestPositionMask:
    """Per-request processor (tensorrt_llm.sampling_params.LogitsProcessor call shape); pickles small."""

    def __init__(self, vocab: int = ids.VOCAB_SIZE) -> None:
        self.vocab = vocab
        self.counter = CallCounter()

    def __call__(
        self,
        req_id: int,
        logits: Any,
        token_ids: list[list[int]],
        stream_ptr: int | None,
        client_id: Any = None,
    ) -> None:
        p = self.counter.advance([req_id])[0]
        with on_stream(stream_ptr):
            row = mask_table(logits.device, logits.dtype, self.vocab)[p]
            logits += row[: logits.shape[-1]]


class BatchedPositionMask:
    """One call per step for every request (BatchedLogitsProcessor call shape). Pickles as a few ints."""

    def __init__(self, vocab: int = ids.VOCAB_SIZE) -> None:
        self.vocab = vocab
        self.counter = CallCounter()

    def __call__(
        self,
        req_ids: list[int],
        logits: list[Any],
        token_ids: list[list[list[int]]],
        stream_ptr: int | None,
        client_ids: list[Any],
    ) -> None:
        if not logits:
            return
        import torch

        positions = self.counter.advance(req_ids)
        with on_stream(stream_ptr):
            table = mask_table(logits[0].device, logits[0].dtype, self.vocab)
            width = logits[0].shape[-1]
            rows = [table[p, :width].expand_as(lg) for p, lg in zip(positions, logits, strict=True)]
            torch._foreach_add_(logits, rows)
