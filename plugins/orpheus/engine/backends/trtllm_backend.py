"""TensorRT-LLM token generation (Hopper: FP8 weights + FP8 KV cache, in-flight batching, streamed ids).

`runtime="pytorch"` uses `tensorrt_llm.LLM` (the PyTorch backend, TensorRT-LLM ≥ 1.0) on a pre-quantized FP8
checkpoint with `KvCacheConfig(dtype="fp8")`; `runtime="engine"` loads a TensorRT engine built by
deploy/orpheus/build_engine.py through `tensorrt_llm._tensorrt_engine.LLM`. Requests stream new ids with
no detokenisation (`detokenize=False`, tokenizer never loaded by TensorRT-LLM); END_OF_SPEECH is the end id.

Choices made against TensorRT-LLM 1.0 (see position_mask.py for the mask itself):
- the frame-position mask counts processor calls per request (the overlap scheduler's token ids lag a step);
- `sampler_type="TRTLLMSampler"`: 1.0's default TorchSampler ignores `repetition_penalty` (Orpheus needs it);
- every processor holds only plain numbers (they are pickled into the executor's worker process);
- `stream_interval=7`: one response per frame per stream instead of one per token;
- `max_seq_len` bounds the KV pool (the model's own 131 072 would be the default);
- the end of a request is read from `finish_reason` (the end id itself is not returned in the ids).
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
from plugins.orpheus.engine.backends.position_mask import BatchedPositionMask, RequestPositionMask

log = logging.getLogger("parley.orpheus.trtllm")


@dataclass(frozen=True)
class TrtLlmOptions:
    model_dir: str = ""  # FP8 HF checkpoint (pytorch runtime) or TensorRT engine dir (engine runtime)
    tokenizer_dir: str = ""
    runtime: str = "pytorch"  # "pytorch" | "engine"
    kv_cache_fp8: bool = True
    max_batch_size: int = 128
    max_num_tokens: int = 8192
    max_seq_len: int = 4096  # prompt + audio tokens of one utterance; bounds every sequence's KV blocks
    free_gpu_memory_fraction: float = 0.85
    cuda_graphs: bool = True
    logits_mask: str = "auto"  # auto | batched | per_request | off
    sampler: str = "TRTLLMSampler"  # pytorch runtime: the one that applies repetition_penalty in 1.0
    stream_interval: int = ids.FRAME_TOKENS


def llm_kwargs(o: TrtLlmOptions) -> tuple[dict[str, Any], bool]:
    """The LLM(...) keyword arguments for these options (plain data only) and whether the mask is batched.

    Pure so it can be checked without TensorRT-LLM: `batched_logits_processor` must pickle as a few ints.
    """
    common: dict[str, Any] = dict(
        skip_tokenizer_init=True,
        max_batch_size=o.max_batch_size,
        max_num_tokens=o.max_num_tokens,
    )
    batched = o.logits_mask == "batched" or (o.logits_mask == "auto" and o.runtime == "engine")
    if o.logits_mask != "off" and batched:
        common["batched_logits_processor"] = BatchedPositionMask(ids.VOCAB_SIZE)
    if o.runtime == "pytorch":
        common.update(
            max_seq_len=o.max_seq_len,
            sampler_type=o.sampler,
            stream_interval=o.stream_interval,
        )
    return common, batched and o.logits_mask != "off"


class TrtLlmBackend(TokenBackend):
    name = "trtllm"

    def __init__(self, options: TrtLlmOptions) -> None:
        super().__init__()
        self.options = options
        self.llm: Any = None
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._outs: dict[int, Any] = {}
        self._out = Coalescer()
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
        common, self._batched = llm_kwargs(o)
        common["kv_cache_config"] = KvCacheConfig(
            dtype="fp8" if o.kv_cache_fp8 else "auto", free_gpu_memory_fraction=o.free_gpu_memory_fraction
        )
        if o.runtime == "engine":
            from tensorrt_llm._tensorrt_engine import LLM as EngineLLM

            return EngineLLM(model=o.model_dir, **common)
        from tensorrt_llm import LLM

        if o.cuda_graphs:
            from tensorrt_llm.llmapi import CudaGraphConfig

            sizes = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if b <= o.max_batch_size]
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

        return SamplingParams(**sampling_kwargs(req, self.options.logits_mask, self._batched))

    def submit(self, request: GenRequest) -> None:
        self._tasks[request.slot] = asyncio.create_task(self._run(request), name=f"trtllm-{request.slot}")

    async def _run(self, req: GenRequest) -> None:
        reason, error = "length", None
        try:
            out = self.llm.generate_async(req.prompt_ids, self._sampling(req), streaming=True)
            self._outs[req.slot] = out
            seen = 0
            async for step in out:
                result = step.outputs[0]
                tokens = result.token_ids
                self._out.add(req.slot, tokens[seen:])
                seen = len(tokens)
                if result.finish_reason:
                    reason = "stop" if result.finish_reason == "stop" else "length"
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
        self._outs.pop(slot, None)
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


def sampling_kwargs(req: GenRequest, logits_mask: str, batched: bool) -> dict[str, Any]:
    """SamplingParams(...) arguments: numbers and, per request, a processor that pickles as a few ints."""
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
    if logits_mask != "off":
        if batched:
            kw["apply_batched_logits_processor"] = True
        else:
            kw["logits_processor"] = RequestPositionMask(ids.VOCAB_SIZE)
    return kw
