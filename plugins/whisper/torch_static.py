"""Greedy Whisper decoding in fixed shapes, so that on a GPU each step is one CUDA graph replay.

Why: tiny.en's decoder step is ~120 small kernels; launched one by one from Python a step cost 2.4 ms on an
H200 at any batch size, and the host thread that launched them held the GIL the engine's other worker and
its socket needed. A batch of a given bucket size always has the same shapes here: the self-attention reads
all `text_ctx` cache rows under a mask of the positions written so far, the cross-attention reads a
1500-row encoder buffer under a mask of the frames this batch has, and the step's position, counter, next
tokens and history live in device tensors that the step itself advances. The host only replays and, every
few steps, asks whether every row has ended.

This is Parley's only Whisper decoder: a batch that is not padded to a bucket (the CPU's path) gets
buffers of its own size (`greedy`), and language detection reads the first position's logits
(`prompt_logits`). On a CPU the step runs eagerly; tests compare a padded, reused batch with one of the
request's own size, and both with faster-whisper's text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .torch_whisper import (
    CHECK_EVERY,
    Dims,
    Generation,
    GreedyOptions,
    Params,
    _heads,
    _linear,
    _merge,
    _mlp,
    _norm,
    generation_of,
)

ENCODER_CTX = 1500  # encoder positions of Whisper's 30 s window


@dataclass
class StaticBatch:
    """Every buffer a batch of `batch` rows decodes in; reused by each batch of that bucket."""

    batch: int
    self_k: list[torch.Tensor]
    self_v: list[torch.Tensor]
    cross_k: list[torch.Tensor]
    cross_v: list[torch.Tensor]
    enc_mask: torch.Tensor  # [B, 1, 1, ENCODER_CTX] the frames this batch has
    tokens: torch.Tensor  # [B] the newest token of each row
    pos: torch.Tensor  # () the cache row the next token goes to
    step: torch.Tensor  # () the next column of `history`
    budget: torch.Tensor  # [B]
    done: torch.Tensor  # [B]
    history: torch.Tensor  # [B, text_ctx] generated tokens
    logprobs: torch.Tensor  # [B, text_ctx] their log-probabilities (0 once a row is done)
    banned: torch.Tensor  # [vocab] tokens never written
    graph: torch.cuda.CUDAGraph | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def new_batch(
    p: Params,
    dims: Dims,
    batch: int,
    o: GreedyOptions,
    device: str | torch.device,
    dtype: torch.dtype,
    *,
    text_rows: int | None = None,
    encoder_rows: int = ENCODER_CTX,
) -> StaticBatch:
    """Buffers for `batch` rows: a bucket's (every text position, the 30 s window's frames) unless sized
    smaller for one batch that is decoded once."""
    dh = dims.width // dims.heads
    layers = range(dims.decoder_layers)

    def zeros(length: int) -> list[torch.Tensor]:
        return [torch.zeros(batch, dims.heads, length, dh, device=device, dtype=dtype) for _ in layers]

    banned = torch.zeros(dims.vocab, dtype=torch.bool, device=device)
    banned[list(o.suppress)] = True
    banned[o.text_vocab :] = True
    banned[o.eot] = False
    return StaticBatch(
        batch=batch,
        self_k=zeros(text_rows or dims.text_ctx),
        self_v=zeros(text_rows or dims.text_ctx),
        cross_k=zeros(encoder_rows),
        cross_v=zeros(encoder_rows),
        enc_mask=torch.zeros(batch, 1, 1, encoder_rows, dtype=torch.bool, device=device),
        tokens=torch.zeros(batch, dtype=torch.long, device=device),
        pos=torch.zeros((), dtype=torch.long, device=device),
        step=torch.zeros((), dtype=torch.long, device=device),
        budget=torch.zeros(batch, dtype=torch.long, device=device),
        done=torch.zeros(batch, dtype=torch.bool, device=device),
        history=torch.zeros(batch, dims.text_ctx, dtype=torch.long, device=device),
        logprobs=torch.zeros(batch, dims.text_ctx, dtype=torch.float32, device=device),
        banned=banned,
    )


def _layers(
    p: Params,
    dims: Dims,
    sb: StaticBatch,
    x: torch.Tensor,
    self_mask: torch.Tensor,
    write: slice | torch.Tensor,
) -> torch.Tensor:
    """The decoder's blocks over `x` [B, T, width]; keys/values go to cache rows `write` (a slice for a
    prompt, a position tensor for one step, written with `index_copy_` so a graph can replay it)."""
    for i in range(dims.decoder_layers):
        name = f"decoder/layer_{i}"
        h = _norm(p, name + "/self_attention/layer_norm", x)
        q, k, v = (
            _heads(z, dims.heads) for z in _linear(p, name + "/self_attention/linear_0", h).chunk(3, -1)
        )
        if isinstance(write, slice):
            sb.self_k[i][:, :, write] = k
            sb.self_v[i][:, :, write] = v
        else:
            sb.self_k[i].index_copy_(2, write, k)
            sb.self_v[i].index_copy_(2, write, v)
        a = F.scaled_dot_product_attention(q, sb.self_k[i], sb.self_v[i], attn_mask=self_mask)
        x = x + _linear(p, name + "/self_attention/linear_1", _merge(a))
        h = _norm(p, name + "/attention/layer_norm", x)
        q = _heads(_linear(p, name + "/attention/linear_0", h), dims.heads)
        a = F.scaled_dot_product_attention(q, sb.cross_k[i], sb.cross_v[i], attn_mask=sb.enc_mask)
        x = x + _linear(p, name + "/attention/linear_2", _merge(a))
        x = x + _mlp(p, name + "/ffn", x)
    x = _norm(p, "decoder/layer_norm", x)
    return F.linear(x, p["decoder/embeddings/weight"]).float()


def step(p: Params, dims: Dims, sb: StaticBatch, eot: int) -> None:
    """One greedy step for every row, all in device tensors (what the CUDA graph holds)."""
    where = sb.pos.view(1)
    x = p["decoder/embeddings/weight"][sb.tokens][:, None] + p[
        "decoder/position_encodings/encodings"
    ].index_select(0, where)
    rows = torch.arange(sb.self_k[0].shape[2], device=sb.pos.device)
    self_mask = (rows <= sb.pos).view(1, 1, 1, -1)
    logits = _layers(p, dims, sb, x, self_mask, where)[:, -1]
    lp = logits.masked_fill(sb.banned, float("-inf")).log_softmax(-1)
    nxt = torch.where(sb.done, torch.full_like(sb.tokens, eot), lp.argmax(-1))
    col = sb.step.view(1)
    sb.history.index_copy_(1, col, nxt[:, None])
    sb.logprobs.index_copy_(1, col, lp.gather(1, nxt[:, None]).masked_fill(sb.done[:, None], 0.0))
    sb.done |= (nxt == eot) | (sb.step + 1 >= sb.budget)
    sb.tokens.copy_(nxt)
    sb.pos.add_(1)
    sb.step.add_(1)


def capture(p: Params, dims: Dims, sb: StaticBatch, eot: int) -> None:
    """Record `step` as a CUDA graph (after two warm-up runs on a side stream, as CUDA graphs need)."""
    sb.pos.zero_()
    sb.step.zero_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.inference_mode():
        for _ in range(2):
            step(p, dims, sb, eot)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode(), torch.cuda.graph(graph, capture_error_mode="thread_local"):
        step(p, dims, sb, eot)
    torch.cuda.synchronize()
    sb.graph = graph


def _load(p: Params, dims: Dims, sb: StaticBatch, encoded: torch.Tensor, budgets: Sequence[int]) -> None:
    t = encoded.shape[1]
    for i in range(dims.decoder_layers):
        k, v = _linear(p, f"decoder/layer_{i}/attention/linear_1", encoded).chunk(2, dim=-1)
        sb.cross_k[i][:, :, :t] = _heads(k, dims.heads)
        sb.cross_v[i][:, :, :t] = _heads(v, dims.heads)
    frames = sb.enc_mask.shape[-1]
    sb.enc_mask.copy_((torch.arange(frames, device=encoded.device) < t).view(1, 1, 1, -1))
    sb.budget.copy_(torch.tensor(list(budgets), device=encoded.device))
    sb.done.zero_()


def _prefill(
    p: Params,
    dims: Dims,
    sb: StaticBatch,
    encoded: torch.Tensor,
    prompt: torch.Tensor,
    budgets: Sequence[int],
) -> torch.Tensor:
    """Load the batch and read the prompt: logits [B, prompt length, vocab]."""
    b, plen = prompt.shape
    if b != sb.batch or encoded.shape[1] > sb.enc_mask.shape[-1] or plen > sb.self_k[0].shape[2]:
        raise ValueError(
            f"a batch of {b} rows, {plen} prompt tokens and {encoded.shape[1]} frames does not fit this "
            f"{sb.batch}-row one"
        )
    _load(p, dims, sb, encoded, budgets)
    x = p["decoder/embeddings/weight"][prompt] + p["decoder/position_encodings/encodings"][:plen]
    causal = torch.ones(plen, sb.self_k[0].shape[2], dtype=torch.bool, device=prompt.device).tril()
    return _layers(p, dims, sb, x, causal.view(1, 1, plen, -1), slice(0, plen))


@torch.inference_mode()
def prompt_logits(
    p: Params, dims: Dims, o: GreedyOptions, encoded: torch.Tensor, prompt: torch.Tensor
) -> torch.Tensor:
    """Logits [B, prompt length, vocab] after reading `prompt` (language detection reads the first)."""
    b, plen = prompt.shape
    sb = new_batch(
        p, dims, b, o, encoded.device, encoded.dtype, text_rows=plen, encoder_rows=encoded.shape[1]
    )
    return _prefill(p, dims, sb, encoded, prompt, [1] * b)


@torch.inference_mode()
def greedy(
    p: Params,
    dims: Dims,
    encoded: torch.Tensor,
    prompt: torch.Tensor,
    budgets: Sequence[int],
    o: GreedyOptions,
) -> list[Generation]:
    """Greedy decoding of a batch that shares one prompt length, in buffers of its own size; row i stops
    at the end of text or after `budgets[i]` tokens (a loop never runs past its budget)."""
    b, plen = prompt.shape
    most = min(max(budgets), dims.text_ctx - plen)
    sb = new_batch(
        p, dims, b, o, encoded.device, encoded.dtype, text_rows=plen + most, encoder_rows=encoded.shape[1]
    )
    return greedy_static(p, dims, sb, encoded, prompt, budgets, o)


@torch.inference_mode()
def greedy_static(
    p: Params,
    dims: Dims,
    sb: StaticBatch,
    encoded: torch.Tensor,
    prompt: torch.Tensor,
    budgets: Sequence[int],
    o: GreedyOptions,
) -> list[Generation]:
    """Greedy decoding in `sb`'s buffers (a bucket's, whose caller holds `sb.lock`, or `greedy`'s own)."""
    b, plen = prompt.shape
    most = min(max(budgets), dims.text_ctx - plen, sb.self_k[0].shape[2] - plen)
    logits = _prefill(p, dims, sb, encoded, prompt, budgets)
    if o.no_speech is not None:
        no_speech = logits[:, o.sot_index].softmax(-1)[:, o.no_speech]
    else:
        no_speech = torch.zeros(b, device=prompt.device)
    first_banned = sb.banned.clone()
    first_banned[list(o.suppress_first)] = True
    lp = logits[:, -1].masked_fill(first_banned, float("-inf")).log_softmax(-1)
    first = lp.argmax(-1)
    sb.history[:, 0] = first
    sb.logprobs[:, 0] = lp.gather(1, first[:, None])[:, 0]
    sb.done.copy_((first == o.eot) | (sb.budget <= 1))
    sb.tokens.copy_(first)
    sb.pos.fill_(plen)
    sb.step.fill_(1)
    taken = 1
    while taken < most:
        if sb.graph is not None:
            sb.graph.replay()
        else:
            step(p, dims, sb, o.eot)
        taken += 1
        if taken % CHECK_EVERY == 0 and bool(sb.done.all()):
            break
    ids = sb.history[:, :taken].tolist()
    lps = sb.logprobs[:, :taken].tolist()
    return [generation_of(ids[r][: budgets[r]], lps[r], float(no_speech[r]), o.eot) for r in range(b)]
