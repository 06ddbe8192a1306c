"""Whisper's encoder and the pieces its decoder is built of in PyTorch, from CTranslate2-named weights.

Why: the GPU speech engine needs Whisper on CUDA 13, where CTranslate2's wheel (built for CUDA 12) cannot
load; PyTorch is already the Orpheus engine's runtime on the GPU host. This is the model math only: the
runner (torch_runner.py) makes features, prompts and results, and the engine (engine.py) batches requests.
The decoder runs in torch_static.py (fixed shapes, so that a GPU replays each step as one CUDA graph).

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
