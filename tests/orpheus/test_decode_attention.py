"""The Triton split-KV decode attention (and its torch reference) against SDPA, on CPU through Triton's
interpreter: per-row lengths across split and block edges, the packed GQA rows, and the FP8 cache.

Tolerances: float32 inputs, the kernel and the reference agree with SDPA to 1e-5 (only summation order
differs). FP8: exact to 1e-5 against SDPA over the dequantized cache (what the cache holds), and within
0.1 of the largest output against the unquantized float32 keys and values (e4m3 keeps 3 mantissa bits).
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():  # before the kernels are decorated: CPU runs them in numpy
    os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ["TRITON_INTERPRET"] != "1":
        pytest.skip("Triton kernels need a GPU or TRITON_INTERPRET=1", allow_module_level=True)

from plugins.orpheus.engine.cuda.decode_attention import (
    FP8,
    decode_attention,
    split_kv_reference,
    to_fp8,
)

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def sdpa(q, k, v, lengths):  # type: ignore[no-untyped-def]
    b = q.shape[0]
    keys = torch.arange(k.shape[2], device=q.device)
    mask = (keys[None] < lengths[:, None]).view(b, 1, 1, -1)
    return F.scaled_dot_product_attention(q.float(), k[:b].float(), v[:b].float(), attn_mask=mask)


def case(b=5, h=2, r=3, d=16, seq=96, rows=7, seed=0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, r, d, generator=g).to(DEV)
    k = torch.randn(rows, h, seq, d, generator=g).to(DEV)
    v = torch.randn(rows, h, seq, d, generator=g).to(DEV)
    # lengths on both sides of the split (32) and block (16) edges, 1 and the whole cache
    lengths = torch.tensor([1, 16, 33, 64, 96][:b], device=DEV)
    return q, k, v, lengths


def test_kernel_and_reference_match_sdpa_float32() -> None:
    q, k, v, lengths = case()
    want = sdpa(q, k, v, lengths)
    got = decode_attention(q, k, v, lengths, split=32, block_n=16)
    ref = split_kv_reference(q, k, v, lengths, split=32)
    assert got.shape == want.shape == (5, 2, 3, 16)
    torch.testing.assert_close(got.float(), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ref.float(), want, atol=1e-5, rtol=1e-5)


def test_a_row_reads_only_its_own_keys() -> None:
    q, k, v, lengths = case()
    before = decode_attention(q, k, v, lengths, split=32, block_n=16)
    k2, v2 = k.clone(), v.clone()
    for b, n in enumerate(lengths.tolist()):
        k2[b, :, n:] = 1e4  # garbage past each row's length (and in rows past the batch)
        v2[b, :, n:] = float("nan")
    k2[5:], v2[5:] = float("nan"), float("nan")
    after = decode_attention(q, k2, v2, lengths, split=32, block_n=16)
    torch.testing.assert_close(after, before, atol=0, rtol=0)


@pytest.mark.parametrize("per_head", [False, True])
def test_fp8_cache_is_exact_over_what_it_holds(per_head: bool) -> None:
    q, k, v, lengths = case(seed=1)
    h = k.shape[1]
    if per_head:
        ks = k.abs().amax(dim=(0, 2, 3)).float() / 448.0
        vs = v.abs().amax(dim=(0, 2, 3)).float() / 448.0
    else:
        ks = torch.full((h,), 1.0, device=DEV)
        vs = torch.full((h,), 1.0, device=DEV)
    k8 = to_fp8(k.transpose(1, 2), ks).transpose(1, 2).contiguous()
    v8 = to_fp8(v.transpose(1, 2), vs).transpose(1, 2).contiguous()
    assert k8.dtype == FP8
    held_k = k8.float() * ks.view(1, -1, 1, 1)
    held_v = v8.float() * vs.view(1, -1, 1, 1)
    got = decode_attention(q, k8, v8, lengths, ks, vs, split=32, block_n=16)
    torch.testing.assert_close(got.float(), sdpa(q, held_k, held_v, lengths), atol=1e-5, rtol=1e-5)
    ref = split_kv_reference(q, k8, v8, lengths, ks, vs, split=32)
    torch.testing.assert_close(ref.float(), sdpa(q, held_k, held_v, lengths), atol=1e-5, rtol=1e-5)
    full = sdpa(q, k, v, lengths)
    assert (got.float() - full).abs().max() <= 0.1 * full.abs().max()


def test_fp8_cache_without_scales_is_refused() -> None:
    q, k, v, lengths = case()
    with pytest.raises(ValueError, match="k_scale"):
        decode_attention(q, k.to(FP8), v.to(FP8), lengths)


# -- wired into the cuda backend's model and generator (tiny shape) -----------------------------------------
def _model(seed: int = 7):  # type: ignore[no-untyped-def]
    from plugins.orpheus.engine.cuda.model import LlamaShape, OrpheusLlama

    # head_dim 16, 3 query heads per KV head as in Orpheus (24 / 8)
    tiny = LlamaShape(hidden_size=96, intermediate_size=128, layers=2, heads=6, kv_heads=2)
    return OrpheusLlama.random(tiny, torch.float32, DEV, seed=seed)


def _one_step(model, attention: str, kv_fp8: bool = False):  # type: ignore[no-untyped-def]
    from plugins.orpheus.engine import ids

    model.allocate(4, 384, kv_fp8=kv_fp8)
    model.set_attention(attention)
    g = torch.Generator().manual_seed(9)
    prompt = torch.randint(0, ids.BOS, (4, 300), generator=g).to(DEV)
    rows = torch.arange(4, device=DEV)
    lengths = torch.tensor([300, 200, 64, 1], device=DEV)
    with torch.inference_mode():
        model.prefill(prompt, rows, lengths)
        return model.decode(prompt[rows, lengths - 1], lengths, 384)


def test_model_decode_with_the_kernel_matches_sdpa_float32() -> None:
    want = _one_step(_model(), "sdpa")
    got = _one_step(_model(), "triton")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_model_fp8_cache_tracks_the_float32_step() -> None:
    want = _one_step(_model(), "sdpa")
    model = _model()
    got = _one_step(model, "triton", kv_fp8=True)
    assert model.caches[0][0].dtype == FP8
    rel = (got - want).norm(dim=-1) / want.norm(dim=-1)
    assert float(rel.max()) < 0.05, rel.tolist()


def test_an_fp8_cache_is_refused_by_the_other_kernels() -> None:
    model = _model()
    model.allocate(2, 128, kv_fp8=True)
    with pytest.raises(ValueError, match="triton"):
        model.set_attention("flex")


@pytest.mark.slow
def test_generator_with_the_kernel_is_greedy_identical_to_sdpa() -> None:
    from plugins.orpheus.engine import ids
    from plugins.orpheus.engine.cuda.generator import BatchGenerator, GeneratorOptions

    prompts = [[ids.START_OF_HUMAN, *range(1, 1 + n), ids.START_OF_SPEECH] for n in (3, 40, 117)]

    def greedy(attention: str) -> list[list[int]]:
        gen = BatchGenerator(_model(), GeneratorOptions(rows=4, max_seq=256, attention=attention))
        toks = [[gen.admit(p, 10_000, 0.0, 1.0, 1.2)[1]] for p in prompts]
        for _ in range(12):
            r = gen.step()
            for row, t in zip(r.rows.tolist(), r.tokens.tolist(), strict=True):
                toks[row].append(t)
        return toks

    assert greedy("triton") == greedy("sdpa")


@pytest.mark.gpu
def test_gpu_kernel_bf16_and_fp8_track_fp32_at_the_orpheus_head_shape() -> None:
    """Head dim 128, 3 query rows per KV head, rows up to 2 000 keys: bf16 and the FP8 cache (scale 1) against
    SDPA in fp32 over the same keys; fp32 inputs exact (ieee dots)."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(64, 8, 3, 128, generator=g).cuda()
    k = torch.randn(65, 8, 2048, 128, generator=g).cuda()
    v = torch.randn(65, 8, 2048, 128, generator=g).cuda()
    lengths = torch.randint(1, 2001, (64,), generator=g).cuda()
    want = sdpa(q, k, v, lengths)
    torch.testing.assert_close(decode_attention(q, k, v, lengths).float(), want, atol=1e-4, rtol=1e-4)
    bf = decode_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), lengths).float()
    assert float((bf - want).abs().max()) < 0.02
    ones = torch.ones(8, device="cuda")
    f8 = decode_attention(q.bfloat16(), k.to(FP8), v.to(FP8), lengths, ones, ones).float()
    assert float((f8 - want).abs().max()) < 0.1
