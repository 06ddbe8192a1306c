"""Split-KV decode attention for Orpheus's GQA shape, in Triton, with an optional FP8 (e4m3) KV cache.

One decode step has one query id per cache row; Llama-3.2-3B has 24 query heads over 8 KV heads, so the 3
query heads sharing a KV head are packed as its 3 query rows and each KV block is read once per KV head.
The cache is cut into fixed splits of `split` positions (flash-decoding): program (row, KV head, split) reads
only the keys of its split below the row's own length and writes a partial softmax (max, sum, weighted
values); a second small kernel merges the splits. The grid depends on the batch and the cache length only,
never on the rows' lengths, so a step stays one CUDA graph; a split past a row's length exits at once, so a
row at position 300 reads 300 keys, not the cache.

FP8 cache: keys and values are stored as float8_e4m3fn divided by a per-KV-head scale (a per-tensor scale is
the same value for every head) and multiplied back in the kernel, halving the cache's bytes per step.
Without calibration the scales are 1.0, as vLLM's uncalibrated FP8 cache does (e4m3 spans ±448).

`split_kv_reference` is the same algorithm in plain torch: the CPU tests check the kernel (Triton's
interpreter, `TRITON_INTERPRET=1`) and this reference against SDPA.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

FP8 = torch.float8_e4m3fn
SPLIT = 256  # cache positions per program: 8 programs per (row, KV head) at 2 048 positions
BLOCK_N = 64  # keys per inner iteration


@triton.jit
def _split_kernel(
    q_ptr,  # (B, H, R, D)
    k_ptr,  # (rows, H, L, D) cache
    v_ptr,
    len_ptr,  # (B,) keys each row reads (its position + 1)
    ks_ptr,  # (H,) float32 dequant scales (FP8 cache) or unused
    vs_ptr,
    o_ptr,  # (B, H, S, R, D) float32 partial outputs
    ml_ptr,  # (B, H, S, R, 2) float32 running max, sum
    sm_scale,
    stride_qb,
    stride_qh,
    stride_qr,
    stride_kb,
    stride_kh,
    stride_kl,
    stride_vb,
    stride_vh,
    stride_vl,
    R: tl.constexpr,
    D: tl.constexpr,
    S: tl.constexpr,  # splits
    H: tl.constexpr,
    SPLIT_LEN: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SCALED: tl.constexpr,
    PRECISION: tl.constexpr,  # "ieee" for float32 models (exact tests), else "tf32" (unused for bf16)
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.program_id(2)
    length = tl.load(len_ptr + b).to(tl.int32)
    lo = s * SPLIT_LEN
    hi = tl.minimum(lo + SPLIT_LEN, length)
    r = tl.arange(0, BLOCK_R)
    d = tl.arange(0, D)
    rmask = r < R
    part = ((b * H + h) * S + s) * R
    # a split past the row's length runs no iteration and writes an empty partial (max -inf, sum 0)
    q = tl.load(
        q_ptr + b * stride_qb + h * stride_qh + r[:, None] * stride_qr + d[None, :],
        mask=rmask[:, None],
        other=0.0,
    ).to(tl.float32)
    q = q * (sm_scale * 1.4426950408889634)  # exp2 domain
    if SCALED:
        k_scale = tl.load(ks_ptr + h)
        v_scale = tl.load(vs_ptr + h)
        q = q * k_scale
    cdt = q_ptr.dtype.element_ty  # dot inputs in the model's dtype (an FP8 entry is exact in bf16)
    qc = q.to(cdt)
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    lsum = tl.zeros([BLOCK_R], tl.float32)
    acc = tl.zeros([BLOCK_R, D], tl.float32)
    k_base = k_ptr + b * stride_kb + h * stride_kh
    v_base = v_ptr + b * stride_vb + h * stride_vh
    for start in range(lo, hi, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        nmask = n < hi
        k = tl.load(k_base + n[:, None] * stride_kl + d[None, :], mask=nmask[:, None], other=0.0)
        v = tl.load(v_base + n[:, None] * stride_vl + d[None, :], mask=nmask[:, None], other=0.0)
        qk = tl.dot(qc, tl.trans(k.to(cdt)), input_precision=PRECISION)  # (BLOCK_R, BLOCK_N)
        qk = tl.where(nmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(qk - m_new[:, None])
        lsum = lsum * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(cdt), v.to(cdt), input_precision=PRECISION)
        m = m_new
    if SCALED:
        acc = acc * v_scale
    tl.store(ml_ptr + (part + r) * 2, m, mask=rmask)
    tl.store(ml_ptr + (part + r) * 2 + 1, lsum, mask=rmask)
    tl.store(o_ptr + (part + r[:, None]) * D + d[None, :], acc, mask=rmask[:, None])


@triton.jit
def _merge_kernel(
    o_ptr,  # (B, H, S, R, D) float32
    ml_ptr,  # (B, H, S, R, 2)
    out_ptr,  # (B, H, R, D)
    R: tl.constexpr,
    D: tl.constexpr,
    S: tl.constexpr,
    H: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    r = tl.program_id(2)
    s = tl.arange(0, BLOCK_S)
    d = tl.arange(0, D)
    smask = s < S
    base = (b * H + h) * S
    m = tl.load(ml_ptr + ((base + s) * R + r) * 2, mask=smask, other=float("-inf"))
    lsum = tl.load(ml_ptr + ((base + s) * R + r) * 2 + 1, mask=smask, other=0.0)
    big = tl.max(m, 0)
    w = tl.where(smask & (m > float("-inf")), tl.exp2(m - big), 0.0)
    o = tl.load(o_ptr + ((base + s[:, None]) * R + r) * D + d[None, :], mask=smask[:, None], other=0.0)
    out = tl.sum(o * w[:, None], 0) / tl.sum(lsum * w, 0)
    tl.store(out_ptr + ((b * H + h) * R + r) * D + d, out.to(out_ptr.dtype.element_ty))


def decode_attention(
    q: torch.Tensor,  # (B, kv_heads, rep, head_dim): the packed query rows of each KV head
    k_cache: torch.Tensor,  # (rows ≥ B, kv_heads, L, head_dim), bf16/fp16/fp32 or float8_e4m3fn
    v_cache: torch.Tensor,
    lengths: torch.Tensor,  # (B,) keys each row reads (position + 1), ≥ 1
    k_scale: torch.Tensor | None = None,  # (kv_heads,) float32: FP8 cache value × scale = the key
    v_scale: torch.Tensor | None = None,
    split: int = SPLIT,
    block_n: int = BLOCK_N,
) -> torch.Tensor:
    """Attention of each row's query rows over its own first `lengths[b]` cached keys → (B, H, R, D)."""
    b, h, r, d = q.shape
    if k_cache.shape[1] != h or k_cache.shape[3] != d or k_cache.shape[0] < b:
        raise ValueError(f"cache {tuple(k_cache.shape)} does not fit queries {tuple(q.shape)}")
    if d & (d - 1) or d < 16:
        raise ValueError(f"head_dim {d}: the kernel needs a power of two, at least 16")
    scaled = k_cache.dtype == FP8
    if scaled and (k_scale is None or v_scale is None):
        raise ValueError("an FP8 KV cache needs k_scale and v_scale")
    splits = -(-k_cache.shape[2] // split)
    q = q.contiguous()
    partial = torch.empty(b, h, splits, r, d, dtype=torch.float32, device=q.device)
    ml = torch.empty(b, h, splits, r, 2, dtype=torch.float32, device=q.device)
    out = torch.empty(b, h, r, d, dtype=q.dtype, device=q.device)
    dummy = partial  # unused scale pointers when the cache is not FP8
    _split_kernel[(b, h, splits)](
        q,
        k_cache,
        v_cache,
        lengths,
        k_scale if scaled else dummy,
        v_scale if scaled else dummy,
        partial,
        ml,
        1.0 / math.sqrt(d),
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        R=r,
        D=d,
        S=splits,
        H=h,
        SPLIT_LEN=split,
        BLOCK_R=max(16, triton.next_power_of_2(r)),  # tl.dot's smallest tile; 3 rows padded once
        BLOCK_N=block_n,
        SCALED=scaled,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    _merge_kernel[(b, h, r)](
        partial, ml, out, R=r, D=d, S=splits, H=h, BLOCK_S=triton.next_power_of_2(splits)
    )
    return out


def split_kv_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    lengths: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    split: int = SPLIT,
) -> torch.Tensor:
    """The kernel's algorithm in plain torch (float32): partial softmax per split, then the merge."""
    b, h, _, d = q.shape
    k = k_cache[:b].float()
    v = v_cache[:b].float()
    if k_cache.dtype == FP8:
        assert k_scale is not None and v_scale is not None
        k = k * k_scale.view(1, h, 1, 1)
        v = v * v_scale.view(1, h, 1, 1)
    qf = q.float() / math.sqrt(d)
    length = k.shape[2]
    ms, ls, os_ = [], [], []
    pos = torch.arange(length, device=q.device)
    for lo in range(0, length, split):
        sl = slice(lo, min(lo + split, length))
        s = torch.einsum("bhrd,bhnd->bhrn", qf, k[:, :, sl])
        valid = (pos[sl][None] < lengths[:, None]).view(b, 1, 1, -1)
        s = s.masked_fill(~valid, float("-inf"))
        m = s.amax(-1)  # (b, h, r)
        p = torch.where(valid, torch.exp(s - m.nan_to_num(neginf=0.0)[..., None]), 0.0)
        ms.append(m)
        ls.append(p.sum(-1))
        os_.append(torch.einsum("bhrn,bhnd->bhrd", p, v[:, :, sl]))
    m_all = torch.stack(ms)  # (S, b, h, r)
    big = m_all.amax(0)
    w = torch.where(m_all > float("-inf"), torch.exp(m_all - big), 0.0)
    lsum = (torch.stack(ls) * w).sum(0)
    out = (torch.stack(os_) * w[..., None]).sum(0) / lsum[..., None]
    return out.to(q.dtype)


def to_fp8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Keys or values (..., kv_heads, head_dim) → FP8 cache entries (value / per-head scale, saturated)."""
    limit = torch.finfo(FP8).max
    return (x.float() / scale.view(-1, 1)).clamp(-limit, limit).to(FP8)
