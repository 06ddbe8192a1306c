"""TensorRT-LLM token generation (Hopper: FP8 weights + FP8 KV cache, in-flight batching, streamed ids).

`runtime="pytorch"` uses `tensorrt_llm.LLM` (the PyTorch backend, TensorRT-LLM ≥ 1.0) on a pre-quantized FP8
checkpoint with `KvCacheConfig(dtype="fp8")`; `runtime="engine"` loads a TensorRT engine built by
deploy/orpheus/build_engine.py through `tensorrt_llm._tensorrt_engine.LLM`. Requests stream new ids with
no detokenisation (`detokenize=False`, tokenizer never loaded by TensorRT-LLM); END_OF_SPEECH is the end id.
A logits mask keeps each step inside the 4 096 ids valid for the expected frame position (plus the stop id
at a frame boundary) — batched (one call per step for all requests) where the runtime supports it.
Ids from all requests are coalesced into one engine push per loop pass.
Needs an NVIDIA GPU and the tensorrt_llm package; nothing here runs on the CPU development machine.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends._delivery import Coalescer
from plugins.orpheus.engine.backends.base import GenRequest, TokenBackend

log = logging.getLogger("parley.orpheus.trtllm")


@dataclass(frozen=True)
class TrtLlmOptions:
    model_dir: str = ""  # FP8 HF checkpoint (pytorch runtime) or TensorRT engine dir (engine runtime)
    tokenizer_dir: str = ""
    runtime: str = "pytorch"  # "pytorch" | "engine"
    kv_cache_fp8: bool = True
    max_batch_size: int = 128
    max_num_tokens: int = 8192
    free_gpu_memory_fraction: float = 0.85
    cuda_graphs: bool = True
    logits_mask: str = "auto"  # auto | batched | per_request | off


class _PositionMask:
    """Adds −inf outside the valid id range of the next token's frame position (GPU, in place)."""

    def __init__(self, vocab: int, device: str = "cuda") -> None:
        import torch

        mask = torch.full((ids.FRAME_TOKENS, vocab), float("-inf"), device=device)
        for p in range(ids.FRAME_TOKENS):
            lo = ids.AUDIO_BASE + ids.CODEBOOK * p
            mask[p, lo : lo + ids.CODEBOOK] = 0.0
        mask[0, ids.END_OF_SPEECH] = 0.0
        self.mask = mask
        self.prompt_len: dict[int, int] = {}  # request id → prompt length (set when the first step is seen)

    def apply(self, logits: Any, generated: int) -> None:
        m = self.mask[generated % ids.FRAME_TOKENS]
        logits += m.to(logits.dtype).view(*([1] * (logits.dim() - 1)), -1)[..., : logits.shape[-1]]


class TrtLlmBackend(TokenBackend):
    name = "trtllm"

    def __init__(self, options: TrtLlmOptions) -> None:
        super().__init__()
        self.options = options
        self.llm: Any = None
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._outs: dict[int, Any] = {}
        self._out = Coalescer()
        self._mask: _PositionMask | None = None
        self._prompt_len_by_client: dict[int, int] = {}
        self._batched = False

    def bind(self, sink: Any) -> None:
        super().bind(sink)
        self._out.sink = sink

    async def start(self) -> None:
        from plugins.orpheus.engine.tokenizer import load_encoder

        self._encode = load_encoder(self.options.tokenizer_dir or self.options.model_dir)
        self.llm = await asyncio.to_thread(self._build)
        await self._warm_up()

    def _build(self) -> Any:
        import torch
        from tensorrt_llm.llmapi import KvCacheConfig

        o = self.options
        if not torch.cuda.is_available():
            raise RuntimeError("the trtllm backend needs an NVIDIA GPU")
        self._mask = _PositionMask(ids.VOCAB_SIZE) if o.logits_mask != "off" else None
        kv = KvCacheConfig(
            dtype="fp8" if o.kv_cache_fp8 else "auto", free_gpu_memory_fraction=o.free_gpu_memory_fraction
        )
        common: dict[str, Any] = dict(
            skip_tokenizer_init=True,
            kv_cache_config=kv,
            max_batch_size=o.max_batch_size,
            max_num_tokens=o.max_num_tokens,
        )
        if o.runtime == "engine":
            from tensorrt_llm._tensorrt_engine import LLM as EngineLLM

            if self._mask is not None and o.logits_mask in ("auto", "batched"):
                common["batched_logits_processor"] = _BatchedMask(self)
                self._batched = True
            return EngineLLM(model=o.model_dir, **common)
        from tensorrt_llm import LLM

        if o.cuda_graphs:
            from tensorrt_llm.llmapi import CudaGraphConfig

            sizes = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b <= o.max_batch_size]
            common["cuda_graph_config"] = CudaGraphConfig(batch_sizes=sizes, enable_padding=True)
        return LLM(model=o.model_dir, **common)

    async def _warm_up(self) -> None:
        """One short request so kernels, graphs and the KV pool exist before the first caller."""
        from plugins.orpheus.engine.text import prompt_ids

        prompt = prompt_ids("tara", "Warming up.", self._encode)
        gen = self.llm.generate_async(prompt, self._sampling(GenRequest(-1, prompt, 28)), streaming=True)
        async for _ in gen:
            pass

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    @property
    def active(self) -> int:
        return len(self._tasks)

    def _sampling(self, req: GenRequest) -> Any:
        from tensorrt_llm import SamplingParams

        sp = req.sampling
        kw: dict[str, Any] = dict(
            max_tokens=req.max_tokens,
            temperature=sp.temperature,
            top_p=sp.top_p,
            repetition_penalty=sp.repetition_penalty,
            end_id=ids.END_OF_SPEECH,
            pad_id=ids.PAD,
            detokenize=False,
        )
        if sp.seed is not None:
            kw["seed"] = sp.seed
        if self._mask is not None:
            if self._batched:
                kw["apply_batched_logits_processor"] = True
            else:
                kw["logits_processor"] = _RequestMask(self._mask, len(req.prompt_ids))
        return SamplingParams(**kw)

    def submit(self, request: GenRequest) -> None:
        self._tasks[request.slot] = asyncio.create_task(self._run(request), name=f"trtllm-{request.slot}")

    async def _run(self, req: GenRequest) -> None:
        reason, error = "length", None
        try:
            out = self.llm.generate_async(req.prompt_ids, self._sampling(req), streaming=True)
            self._outs[req.slot] = out
            if self._batched:
                self._prompt_len_by_client[id(out)] = len(req.prompt_ids)
            seen = 0
            async for step in out:
                tokens = step.outputs[0].token_ids
                new = tokens[seen:]
                seen = len(tokens)
                self._out.add(req.slot, new)
                if ids.END_OF_SPEECH in new:
                    reason = "stop"
        except asyncio.CancelledError:
            return
        except Exception as e:
            log.exception("TensorRT-LLM request failed")
            reason, error = "error", f"{type(e).__name__}: {e}"
        self._out.flush()
        self._end(req.slot, reason, error)

    def _end(self, slot: int, reason: str, error: str | None) -> None:
        if self._tasks.pop(slot, None) is None:
            return
        out = self._outs.pop(slot, None)
        if out is not None:
            self._prompt_len_by_client.pop(id(out), None)
        if self.sink:
            self.sink.finish(slot, reason, error)

    def cancel(self, slot: int) -> None:
        task = self._tasks.get(slot)
        if task is None:
            return
        out = self._outs.get(slot)
        if out is not None:
            try:
                out.abort()  # frees the sequence's KV blocks in the executor now
            except Exception:
                log.debug("abort failed", exc_info=True)
        task.cancel()
        self._out.drop(slot)
        self._end(slot, "cancelled", None)

    async def close(self) -> None:
        for slot in list(self._tasks):
            self.cancel(slot)
        if self.llm is not None:
            await asyncio.to_thread(self.llm.shutdown)


class _RequestMask:
    """Per-request logits processor (tensorrt_llm.sampling_params.LogitsProcessor call signature)."""

    def __init__(self, mask: _PositionMask, prompt_len: int) -> None:
        self.mask = mask
        self.prompt_len = prompt_len

    def __call__(
        self, req_id: int, logits: Any, token_ids: list[list[int]], stream_ptr: int, client_id: Any
    ) -> None:
        import torch

        generated = len(token_ids[0]) - self.prompt_len
        with torch.cuda.stream(torch.cuda.ExternalStream(stream_ptr)):
            self.mask.apply(logits, generated)


class _BatchedMask:
    """One call per generation step for all requests (BatchedLogitsProcessor call signature)."""

    def __init__(self, backend: TrtLlmBackend) -> None:
        self.backend = backend

    def __call__(
        self,
        req_ids: list[int],
        logits: list[Any],
        token_ids: list[list[list[int]]],
        stream_ptr: int,
        client_ids: list[Any],
    ) -> None:
        import torch

        mask = self.backend._mask
        if mask is None:
            return
        with torch.cuda.stream(torch.cuda.ExternalStream(stream_ptr)):
            for lg, toks in zip(logits, token_ids, strict=True):
                # the prompt always ends with START_OF_SPEECH; count ids after its last occurrence
                seq = toks[0]
                generated = len(seq) - 1 - max(i for i, t in enumerate(seq) if t == ids.START_OF_SPEECH)
                mask.apply(lg, generated)
