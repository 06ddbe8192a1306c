"""The TensorRT-LLM path's pure parts on CPU: position masks driven by a call sequence shaped like
TensorRT-LLM 1.0's (token ids lagging one step under the overlap scheduler, `stream_ptr=None` from the
PyTorch runtime), and the LLM / SamplingParams arguments, which must pickle as plain data. TensorRT-LLM
itself is GPU-only."""

from __future__ import annotations

import pickle

import pytest
import torch

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import GenRequest, Sampling
from plugins.orpheus.engine.backends.position_mask import (
    BatchedPositionMask,
    CallCounter,
    RequestPositionMask,
)
from plugins.orpheus.engine.backends.trtllm_backend import TrtLlmOptions, llm_kwargs, sampling_kwargs

PROMPT = [ids.START_OF_HUMAN, 1, 2, 3, ids.START_OF_SPEECH]


def _allowed(logits_row: torch.Tensor) -> tuple[int, int, bool]:
    """(first, last) finite audio id and whether the stop id is finite."""
    finite = torch.isfinite(logits_row).nonzero().flatten()
    audio = finite[finite != ids.END_OF_SPEECH]
    return int(audio.min()), int(audio.max()), bool(torch.isfinite(logits_row[ids.END_OF_SPEECH]))


def _overlap_token_ids(prompt: list[int], generated: list[int], step: int) -> list[list[int]]:
    """What a processor sees at `step` under the overlap scheduler: the last sampled id is not in yet."""
    return [prompt + generated[: max(0, step - 1)]]


def test_request_mask_counts_calls_not_token_ids_under_the_overlap_scheduler() -> None:
    mask = RequestPositionMask()
    generated: list[int] = []
    for step in range(23):
        logits = torch.zeros(1, 1, ids.VOCAB_SIZE)
        mask(7, logits, _overlap_token_ids(PROMPT, generated, step), None, None)  # PyTorch runtime: None
        lo, hi, stop = _allowed(logits[0, 0])
        p = step % ids.FRAME_TOKENS
        assert (lo, hi) == (ids.AUDIO_BASE + p * ids.CODEBOOK, ids.AUDIO_BASE + (p + 1) * ids.CODEBOOK - 1)
        assert stop == (p == 0), "the stop id only at a frame boundary"
        generated.append(lo)


def test_batched_mask_one_fused_add_per_step_and_independent_requests() -> None:
    mask = BatchedPositionMask()
    steps = {11: 0, 12: 0}
    for step in range(10):
        req_ids = [11, 12] if step >= 3 else [11]  # request 12 joins late
        logits = [torch.zeros(1, 1, ids.VOCAB_SIZE) for _ in req_ids]
        mask(req_ids, logits, [[PROMPT]] * len(req_ids), None, [None] * len(req_ids))
        for r, lg in zip(req_ids, logits, strict=True):
            lo, _, stop = _allowed(lg[0, 0])
            assert lo == ids.AUDIO_BASE + (steps[r] % 7) * ids.CODEBOOK and stop == (steps[r] % 7 == 0)
            steps[r] += 1


def test_call_counter_forgets_only_requests_that_stopped_coming() -> None:
    c = CallCounter(forget_after=10)
    for _ in range(200):
        c.advance([1, *range(100, 170)] if c._step < 5 else [1])
    assert len(c) == 1 and c.advance([1])[0] == 200 % 7


def test_processors_and_arguments_pickle_as_plain_data() -> None:
    mask = RequestPositionMask()
    mask(1, torch.zeros(1, 1, ids.VOCAB_SIZE), [PROMPT], None, None)  # a built table stays out of the pickle
    assert len(pickle.dumps(mask)) < 1000
    for runtime in ("pytorch", "engine"):
        kw, batched = llm_kwargs(TrtLlmOptions(runtime=runtime))
        assert len(pickle.dumps(kw)) < 2000
        assert batched == (runtime == "engine")
    kw, _ = llm_kwargs(TrtLlmOptions(runtime="pytorch", max_batch_size=256))
    assert kw["stream_interval"] == ids.FRAME_TOKENS and kw["max_seq_len"] == 4096
    assert kw["sampler_type"] == "TRTLLMSampler" and kw["max_batch_size"] == 256
    req = GenRequest(3, PROMPT, 700, Sampling(repetition_penalty=1.15, seed=4))
    sp = sampling_kwargs(req, "auto", batched=False)
    assert sp["repetition_penalty"] == 1.15 and sp["end_id"] == ids.END_OF_SPEECH and not sp["detokenize"]
    assert len(pickle.dumps(sp)) < 2000
    assert sampling_kwargs(req, "auto", batched=True)["apply_batched_logits_processor"] is True


@pytest.mark.gpu
def test_masks_on_an_external_cuda_stream() -> None:
    stream = torch.cuda.Stream()
    logits = [torch.zeros(1, 1, ids.VOCAB_SIZE, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    BatchedPositionMask()([1, 2, 3], logits, [[PROMPT]] * 3, stream.cuda_stream, [None] * 3)
    torch.cuda.synchronize()
    assert all(_allowed(lg[0, 0].float())[2] for lg in logits)
