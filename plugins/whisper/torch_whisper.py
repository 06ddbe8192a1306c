"""Whisper's forward pass and batched greedy decoding in PyTorch, from CTranslate2-named weights.

Why: the GPU speech engine needs Whisper on CUDA 13, where CTranslate2's wheel (built for CUDA 12) cannot
load; PyTorch is already the Orpheus engine's runtime on the GPU host. This is the model math only: the
runner (torch_runner.py) makes features, prompts and results, and the engine (engine.py) batches requests.

The architecture is OpenAI's: two convolutions and pre-norm transformer blocks with a sinusoidal position
table over the log-mel frames; a decoder of learned positions with self- and cross-attention whose output
projection is the token embedding. CTranslate2 fuses the self-attention's q/k/v into one `linear_0` and the
cross-attention's k/v into `linear_1`; the names below are CTranslate2's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

Params = dict[str, torch.Tensor]
LN_EPS = 1e-5
CHECK_EVERY = 4
"""Steps between checks that every row has ended: each check waits for the GPU, so the host cannot queue
the next steps meanwhile; a finished batch runs at most this many steps too many."""


@dataclass(frozen=True)
class Dims:
    encoder_layers: int
    decoder_layers: int
    heads: int
    width: int
    vocab: int
    text_ctx: int


def dims_of(weights: dict[str, np.ndarray]) -> Dims:
    """The model's shape, read from the weights (tiny, base, small... all share one layout)."""

    def count(prefix: str) -> int:
        return len({k.split("/")[1] for k in weights if re.match(prefix + r"/layer_\d+/", k)})

    vocab, width = weights["decoder/embeddings/weight"].shape
    return Dims(
        encoder_layers=count("encoder"),
        decoder_layers=count("decoder"),
        heads=int(weights["encoder/num_heads"]) if "encoder/num_heads" in weights else width // 64,
        width=int(width),
        vocab=int(vocab),
        text_ctx=int(weights["decoder/position_encodings/encodings"].shape[0]),
    )


def to_params(weights: dict[str, np.ndarray], device: str, dtype: torch.dtype) -> Params:
    """float arrays as tensors on `device`; the scalar settings CTranslate2 stores beside them are dropped."""
    return {
        k: torch.from_numpy(np.ascontiguousarray(v)).to(device=device, dtype=dtype)
        for k, v in weights.items()
        if v.ndim > 0 and v.dtype.kind == "f"
    }


def _linear(p: Params, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, p[name + "/weight"], p.get(name + "/bias"))


def _norm(p: Params, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], p[name + "/gamma"], p[name + "/beta"], LN_EPS)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def _mlp(p: Params, name: str, x: torch.Tensor) -> torch.Tensor:
    h = _norm(p, name + "/layer_norm", x)
    return _linear(p, name + "/linear_1", F.gelu(_linear(p, name + "/linear_0", h)))


def _conv3(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, stride: int) -> torch.Tensor:
    """A width-3, padding-1 convolution over time as three matrix products, [B, T, in] → [B, T', out].

    Why not `conv1d`: on CUDA each new input shape (and a speech engine's batches come in many) makes
    cuDNN build a new plan; matrix products have no such first-call cost."""
    t_out = (x.shape[1] - 1) // stride + 1
    padded = F.pad(x, (0, 0, 1, 1))
    out = bias
    for k in range(3):
        tap = padded[:, k : k + stride * (t_out - 1) + 1 : stride]
        out = out + tap @ weight[:, :, k].T
    return out


def encode(p: Params, dims: Dims, mel: torch.Tensor) -> torch.Tensor:
    """Log-mel features [B, 80, frames] → encoder states [B, frames / 2, width]."""
    x = mel.transpose(1, 2)
    x = F.gelu(_conv3(x, p["encoder/conv1/weight"], p["encoder/conv1/bias"], stride=1))
    x = F.gelu(_conv3(x, p["encoder/conv2/weight"], p["encoder/conv2/bias"], stride=2))
    x = x + p["encoder/position_encodings/encodings"][: x.shape[1]]
    for i in range(dims.encoder_layers):
        name = f"encoder/layer_{i}"
        h = _norm(p, name + "/self_attention/layer_norm", x)
        q, k, v = _linear(p, name + "/self_attention/linear_0", h).chunk(3, dim=-1)
        a = F.scaled_dot_product_attention(
            _heads(q, dims.heads), _heads(k, dims.heads), _heads(v, dims.heads)
        )
        x = x + _linear(p, name + "/self_attention/linear_1", _merge(a))
        x = x + _mlp(p, name + "/ffn", x)
    return _norm(p, "encoder/layer_norm", x)


@dataclass
class DecoderCache:
    """Per layer: the self-attention's keys/values so far (preallocated) and the cross-attention's."""

    self_k: list[torch.Tensor]
    self_v: list[torch.Tensor]
    cross_k: list[torch.Tensor]
    cross_v: list[torch.Tensor]
    length: int = 0


def start_decoder(p: Params, dims: Dims, encoded: torch.Tensor, max_len: int) -> DecoderCache:
    b = encoded.shape[0]
    dh = dims.width // dims.heads
    shape = (b, dims.heads, max_len, dh)
    cache = DecoderCache([], [], [], [])
    for i in range(dims.decoder_layers):
        k, v = _linear(p, f"decoder/layer_{i}/attention/linear_1", encoded).chunk(2, dim=-1)
        cache.cross_k.append(_heads(k, dims.heads))
        cache.cross_v.append(_heads(v, dims.heads))
        cache.self_k.append(encoded.new_zeros(shape))
        cache.self_v.append(encoded.new_zeros(shape))
    return cache


def decode_step(p: Params, dims: Dims, cache: DecoderCache, tokens: torch.Tensor) -> torch.Tensor:
    """Logits [B, T, vocab] (float32) for `tokens` [B, T] following what the cache holds; the cache grows."""
    start, t = cache.length, tokens.shape[1]
    end = start + t
    x = p["decoder/embeddings/weight"][tokens] + p["decoder/position_encodings/encodings"][start:end]
    for i in range(dims.decoder_layers):
        name = f"decoder/layer_{i}"
        h = _norm(p, name + "/self_attention/layer_norm", x)
        q, k, v = (
            _heads(z, dims.heads) for z in _linear(p, name + "/self_attention/linear_0", h).chunk(3, -1)
        )
        cache.self_k[i][:, :, start:end] = k
        cache.self_v[i][:, :, start:end] = v
        keys, values = cache.self_k[i][:, :, :end], cache.self_v[i][:, :, :end]
        # a prompt attends causally from position 0; one new token attends to everything so far
        a = F.scaled_dot_product_attention(q, keys, values, is_causal=t > 1 and start == 0)
        x = x + _linear(p, name + "/self_attention/linear_1", _merge(a))
        h = _norm(p, name + "/attention/layer_norm", x)
        q = _heads(_linear(p, name + "/attention/linear_0", h), dims.heads)
        a = F.scaled_dot_product_attention(q, cache.cross_k[i], cache.cross_v[i])
        x = x + _linear(p, name + "/attention/linear_2", _merge(a))
        x = x + _mlp(p, name + "/ffn", x)
    cache.length = end
    x = _norm(p, "decoder/layer_norm", x)
    return F.linear(x, p["decoder/embeddings/weight"]).float()


@dataclass(frozen=True)
class GreedyOptions:
    eot: int
    suppress: Sequence[int]
    """Never written (non-speech symbols, task and start tokens)."""
    suppress_first: Sequence[int]
    """Not written first (a blank, the end of text): Whisper's `suppress_blank`."""
    no_speech: int | None
    """The no-speech token, read at the start-of-transcript position."""
    sot_index: int
    text_vocab: int
    """Ids from here on are special (timestamps among them): never written without timestamps."""


@dataclass(frozen=True)
class Generation:
    tokens: list[int]
    """Generated text tokens, end of text excluded."""
    probabilities: list[float]
    """Each generated token's probability under the filtered distribution."""
    sum_logprob: float
    """Log-probability of the tokens and of the end of text (when written)."""
    no_speech_prob: float


@torch.inference_mode()
def greedy(
    p: Params,
    dims: Dims,
    encoded: torch.Tensor,
    prompt: torch.Tensor,
    budgets: Sequence[int],
    o: GreedyOptions,
) -> list[Generation]:
    """Greedy decoding of a batch that shares one prompt length; row i stops at the end of text or after
    `budgets[i]` tokens (a loop never runs past its budget)."""
    b, plen = prompt.shape
    most = min(max(budgets), dims.text_ctx - plen)
    cache = start_decoder(p, dims, encoded, plen + most)
    device = encoded.device
    banned = torch.zeros(dims.vocab, dtype=torch.bool, device=device)
    banned[list(o.suppress)] = True
    banned[o.text_vocab :] = True
    banned[o.eot] = False
    first_banned = banned.clone()
    first_banned[list(o.suppress_first)] = True
    budget = torch.tensor(list(budgets), device=device)
    logits = decode_step(p, dims, cache, prompt)
    if o.no_speech is not None:
        no_speech = logits[:, o.sot_index].softmax(-1)[:, o.no_speech]
    else:
        no_speech = torch.zeros(b, device=device)
    logits = logits[:, -1]
    done = torch.zeros(b, dtype=torch.bool, device=device)
    chosen: list[torch.Tensor] = []
    logprobs: list[torch.Tensor] = []
    for step in range(most):
        logits = logits.masked_fill(first_banned if step == 0 else banned, float("-inf"))
        lp = logits.log_softmax(-1)
        nxt = lp.argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, o.eot), nxt)
        chosen.append(nxt)
        logprobs.append(lp.gather(1, nxt[:, None])[:, 0].masked_fill(done, 0.0))
        done = done | (nxt == o.eot) | (step + 1 >= budget)
        if step % CHECK_EVERY == CHECK_EVERY - 1 and bool(done.all()):  # a host sync: not every step
            break
        logits = decode_step(p, dims, cache, nxt[:, None])[:, -1]
    ids = torch.stack(chosen, 1).tolist()
    lps = torch.stack(logprobs, 1).tolist()
    return [generation_of(ids[r][: budgets[r]], lps[r], float(no_speech[r]), o.eot) for r in range(b)]


def generation_of(ids: Sequence[int], lps: Sequence[float], no_speech: float, eot: int) -> Generation:
    """One row's chosen tokens and log-probabilities, read up to and including its end of text."""
    tokens: list[int] = []
    probs: list[float] = []
    total = 0.0
    for tid, lp in zip(ids, lps, strict=False):
        total += lp
        if tid == eot:
            break
        tokens.append(tid)
        probs.append(math.exp(lp))
    return Generation(tokens, probs, total, no_speech)
