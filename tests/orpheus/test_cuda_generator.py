"""The cuda backend's generator on CPU at tiny shapes: length-aware attention against the padded reference,
start-up graph capture (eager stand-in graphs: the GPU is the boundary this machine cannot reach), the
warm-up's state restore at the cache's last position, the host running one step ahead, fp32 RoPE. The GPU
versions (real graphs, compiled FlexAttention, bf16 against an fp32 reference) run under the gpu marker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import Sampling, token_stream
from plugins.orpheus.engine.backends.cuda_backend import CudaBackend, CudaBackendOptions
from plugins.orpheus.engine.cuda.generator import Admission, BatchGenerator, GeneratorOptions
from plugins.orpheus.engine.cuda.model import (
    KV_BLOCK,
    LlamaShape,
    OrpheusLlama,
    _prefill_layer,
    rope_inv_freq,
)

TINY = LlamaShape(hidden_size=64, intermediate_size=128, layers=2, heads=4, kv_heads=2)
PROMPTS = [
    [ids.START_OF_HUMAN, *range(1, 1 + n), ids.START_OF_SPEECH] for n in (3, 40, 117, 9, 125)
]  # rows start at different positions; 117/125 cross the 128-id block boundary within a few steps


def _greedy(gen: BatchGenerator, steps: int, join_at: int = 10) -> list[list[int]]:
    """Greedy ids per request: three admitted at once, two more mid-run (a second batched prefill)."""
    toks: dict[int, list[int]] = {}
    order: list[int] = []

    def admit(prompts: list[list[int]]) -> None:
        for p in prompts:
            row, first, _ = gen.admit(p, 10_000, 0.0, 1.0, 1.2)
            toks[row] = [first]
            order.append(row)

    admit(PROMPTS[:3])
    for i in range(steps):
        if i == join_at:
            admit(PROMPTS[3:])
        r = gen.step()
        for row, t in zip(r.rows.tolist(), r.tokens.tolist(), strict=True):
            toks[row].append(t)
    return [toks[r] for r in order]


def _greedy_rows(gen: BatchGenerator, prompts: list[list[int]], steps: int) -> list[list[int]]:
    """Greedy ids per prompt, admitted one by one into rows 0..n-1 of an empty generator."""
    toks = [[gen.admit(p, 10_000, 0.0, 1.0, 1.2)[1]] for p in prompts]
    for _ in range(steps):
        r = gen.step()
        for row, t in zip(r.rows.tolist(), r.tokens.tolist(), strict=True):
            toks[row].append(t)
    return toks


@pytest.mark.slow
def test_compiled_flex_step_matches_the_eager_padded_sdpa_path_exactly() -> None:
    """The step as CUDA serves it, on CPU: Inductor-compiled (FlexAttention inside it, whose CPU kernel
    honours the block lists as the GPU one does; eager flex is a dense reference that applies only
    mask_mod), replayed from start-up captures, admissions through padded prefill graphs (compiled too,
    `compile_prefill`). Against the plain eager padded-SDPA step: the same greedy ids."""
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=3)
    ref = _greedy(BatchGenerator(model, GeneratorOptions(rows=8, max_seq=384, attention="sdpa")), 150)
    opts = GeneratorOptions(
        rows=8, max_seq=384, attention="flex", compile="on", graph_mode="record", compile_prefill=True
    )
    gen = BatchGenerator(model, opts)
    model.set_attention("flex", compile_flex=True)
    gen.warm_graphs()
    gen.mark_ready()
    assert gen.compiled and not gen.compile_error and 1 not in gen.batch_buckets
    assert model._prefill_layer is not _prefill_layer  # the compiled pass, no fallback
    runs = [ref, _greedy(gen, 150)]
    assert runs[0] == runs[1]
    assert gen.captures_after_ready == 0
    assert max(len(PROMPTS[4]) + len(t) for t in runs[1][4:]) > 2 * KV_BLOCK  # crossed two block edges


@pytest.mark.slow
def test_static_batch_compile_matches_the_eager_step() -> None:
    """`compile_batch="static"` (one compile per batch bucket, for flex's split-KV decode kernel on a GPU):
    the same greedy ids as the eager padded SDPA step, through captured graphs."""
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=11)
    prompts = [PROMPTS[0], PROMPTS[3]]

    ref = _greedy_rows(
        BatchGenerator(model, GeneratorOptions(rows=2, max_seq=128, attention="sdpa")), prompts, 20
    )
    opts = GeneratorOptions(
        rows=2, max_seq=128, compile="on", compile_batch="static", graph_mode="record", prefill_graphs=False
    )
    gen = BatchGenerator(model, opts)
    model.set_attention("flex", compile_flex=True)
    gen.warm_graphs([2])
    gen.mark_ready()
    assert gen.compiled and not gen.compile_error and gen.batch_buckets == (1, 2)
    assert _greedy_rows(gen, prompts, 20) == ref
    assert gen.captures_after_ready == 0


def test_a_failed_admission_compile_falls_back_to_the_eager_pass() -> None:
    """A compile that fails at start-up costs the fused admission pass, never the engine: the error is kept
    in one line and admissions run the eager pass with the same ids."""
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=5)
    prompts = [PROMPTS[0], PROMPTS[1]]

    ref = _greedy_rows(
        BatchGenerator(model, GeneratorOptions(rows=2, max_seq=128, attention="sdpa")), prompts, 5
    )
    opts = GeneratorOptions(rows=2, max_seq=128, attention="sdpa", graph_mode="record", compile_prefill=True)
    gen = BatchGenerator(model, opts)

    def broken(*args: object) -> torch.Tensor:
        raise RuntimeError("inductor: no kernel for this shape\nsecond line")

    model._prefill_layer = broken
    gen.warm_graphs()
    gen.mark_ready()
    assert gen.compile_error == "prefill: RuntimeError: inductor: no kernel for this shape"
    assert model._prefill_layer is _prefill_layer
    assert _greedy_rows(gen, prompts, 5) == ref and gen.captures_after_ready == 0


@pytest.mark.parametrize("max_seq", [256, 300])
def test_block_mask_lists_exactly_each_rows_keys(max_seq: int) -> None:
    """Expand the mask's block lists (full blocks + partial blocks filtered by mask_mod) to keys: exactly
    0..pos per row, whatever pos is relative to the block edges."""
    model = OrpheusLlama.random(TINY, torch.float32, "cpu")
    model.allocate(rows=8, max_seq=max_seq)
    pos = torch.tensor(
        [0, 1, KV_BLOCK - 2, KV_BLOCK - 1, KV_BLOCK, 2 * KV_BLOCK - 1, max_seq - 2, max_seq - 1]
    )
    bm = model.block_mask(pos)
    kv = torch.arange(model.cache_len)  # whole blocks: 300 ids take a 384-long cache
    for b in range(pos.numel()):
        seen = torch.zeros(model.cache_len, dtype=torch.bool)
        assert bm.full_kv_num_blocks is not None and bm.full_kv_indices is not None
        for j in bm.full_kv_indices[b, 0, 0, : int(bm.full_kv_num_blocks[b, 0, 0])].tolist():
            seen[j * KV_BLOCK : (j + 1) * KV_BLOCK] = True
        for j in bm.kv_indices[b, 0, 0, : int(bm.kv_num_blocks[b, 0, 0])].tolist():
            keys = kv[j * KV_BLOCK : (j + 1) * KV_BLOCK]
            seen[keys] |= bm.mask_mod(torch.tensor(b), torch.tensor(0), torch.tensor(0), keys)
        assert seen.tolist() == (kv <= pos[b]).tolist(), f"row {b} at {int(pos[b])}"


@pytest.mark.slow
def test_graphs_are_all_captured_before_ready_and_replay_like_eager() -> None:
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=4)
    eager = _greedy(BatchGenerator(model, GeneratorOptions(rows=8, max_seq=256, cuda_graphs=False)), 40)
    gen = BatchGenerator(model, GeneratorOptions(rows=8, max_seq=256, graph_mode="record"))
    decode_graphs = len(gen.batch_buckets) * len(gen.kv_buckets)
    assert gen.prefill_shapes() and (8, 256) in gen.prefill_shapes()
    assert gen.warm_graphs() == decode_graphs + len(gen.prefill_shapes()) == gen.captures
    gen.mark_ready()
    assert _greedy(gen, 40) == eager
    assert gen.captures_after_ready == 0
    sdpa = BatchGenerator(model, GeneratorOptions(rows=8, max_seq=256, graph_mode="record", attention="sdpa"))
    sdpa.mark_ready()  # not warmed: every new (batch, KV) shape is a capture under traffic, and is counted
    _greedy(sdpa, 5)
    assert sdpa.captures_after_ready > 0


def test_capture_warm_up_leaves_a_row_at_the_last_position_in_place() -> None:
    """A capture's warm-up steps run on live state: each is undone, so a row at max_seq - 1 is not pushed
    past the cache (the old code advanced it twice: an out-of-bounds KV write)."""
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=5)
    gen = BatchGenerator(model, GeneratorOptions(rows=4, max_seq=64, graph_mode="record"))
    gen.occupy(2, [10, 63])
    before = [t.clone() for t in (gen.pos, gen.gen, gen.tok, gen.hist, gen.active)]
    kv_before = [k.clone() for k, _ in model.caches]
    gen.warm_graphs()
    after = (gen.pos, gen.gen, gen.tok, gen.hist, gen.active)
    for a, b in zip(before, after, strict=True):
        assert torch.equal(a, b)
    allowed = torch.zeros(4, model.cache_len, dtype=torch.bool)
    allowed[0, 10] = allowed[1, 63] = allowed[2, 0] = allowed[3, 0] = True  # each row's own next position
    for (k, _), k0 in zip(model.caches, kv_before, strict=True):
        written = (k[:4] != k0[:4]).any(dim=3).any(dim=1)  # (rows, positions); row 4: admission padding
        assert not (written & ~allowed).any(), written.nonzero().tolist()  # no warm-up wrote a step ahead
    r = gen.step()  # the real step: row 1 writes position 63, then ends there (no room left)
    assert r.rows.tolist() == [0, 1] and r.finished.tolist() == [False, True]
    assert (
        int(gen.pos[1]) == 0 and not bool(gen.active[1]) and gen.busy.tolist() == [True, False, False, False]
    )


@pytest.mark.slow
def test_host_one_step_ahead_matches_synchronous_steps() -> None:
    """launch(n+1) before collect(n): same ids per request, and nothing after a request's end (its row ended
    on the device; the extra step's id is dropped by epoch)."""
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=6)
    limits = [5, 30, 12, 1, 21]

    def run(ahead: bool) -> list[list[int]]:
        gen = BatchGenerator(model, GeneratorOptions(rows=8, max_seq=256))
        rows = gen.admit_many([Admission(p, n, 0.0, 1.0, 1.2) for p, n in zip(PROMPTS, limits, strict=True)])
        out: dict[int, list[int]] = {r: [] for r in rows}
        done: set[int] = set()
        ticket = None
        while gen.active_rows or ticket is not None:
            nxt = gen.launch() if gen.active_rows else None
            if not ahead and nxt is not None:
                res = gen.collect(nxt)
                nxt = None
            elif ticket is not None:
                res = gen.collect(ticket)
            else:
                ticket = nxt
                continue
            ticket = nxt
            for row, t, f in zip(res.rows.tolist(), res.tokens.tolist(), res.finished.tolist(), strict=True):
                assert row not in done
                out[row].append(t)
                if f:
                    done.add(row)
        assert done == set(rows) and gen.free_rows == 8
        return [out[r] for r in rows]

    sync, ahead = run(False), run(True)
    assert sync == ahead
    assert [len(t) for t in sync] == limits  # greedy on random weights: the limit ends every request


def test_rope_frequencies_stay_float32_after_a_bf16_cast() -> None:
    shape = LlamaShape(hidden_size=256, intermediate_size=64, layers=1, heads=2, kv_heads=1)  # head_dim 128
    model = OrpheusLlama.random(shape, torch.bfloat16, "cpu")
    assert model.inv_freq.dtype == torch.float32
    assert torch.equal(model.inv_freq, rope_inv_freq(shape))  # not a bf16 round trip (~0.2 % off)


@pytest.mark.slow
async def test_cuda_backend_warms_every_graph_before_ready(test_model: Path) -> None:
    backend = CudaBackend(
        CudaBackendOptions(
            model_dir=str(test_model / "orpheus"),
            device="cpu",
            dtype="float32",
            rows=4,
            max_seq=256,
            graph_mode="record",
        )
    )
    await backend.start()
    gen = backend.generator
    assert gen.ready and gen.captures == len(gen.batch_buckets) + len(gen.prefill_shapes())
    prompts = [backend.encode(t) for t in ("Hello there.", "A second voice.", "And a third one!")]
    greedy = Sampling(temperature=0.0, top_p=1.0, repetition_penalty=1.1)
    outs = []
    for slot, p in enumerate(prompts):
        outs.append([t async for t in token_stream(backend, p, 40, greedy, slot=slot)])
    assert all(len(o) == 40 for o in outs)
    assert all(ids.AUDIO_BASE <= t < ids.AUDIO_END for o in outs for t in o)
    assert gen.captures_after_ready == 0 and backend.active == 0
    await backend.close()
    assert np.all(~gen.busy)


# -- GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("compile_prefill", [False, True])
def test_gpu_flex_graphs_match_eager_sdpa_greedy_fp32(compile_prefill: bool) -> None:
    model = OrpheusLlama.random(TINY, torch.float32, "cuda", seed=7)
    ref = _greedy(
        BatchGenerator(model, GeneratorOptions(rows=8, max_seq=384, attention="sdpa", cuda_graphs=False)), 150
    )
    opts = GeneratorOptions(rows=8, max_seq=384, attention="flex", compile_prefill=compile_prefill)
    gen = BatchGenerator(model, opts)
    gen.warm_graphs()
    gen.mark_ready()
    assert not gen.compile_error
    assert _greedy(gen, 150) == ref
    assert gen.captures_after_ready == 0


@pytest.mark.gpu
def test_gpu_bf16_decode_tracks_an_fp32_reference_at_long_positions() -> None:
    """bf16 weights + compiled FlexAttention vs the same weights in fp32 (padded SDPA), one step for rows at
    positions up to 1500: RoPE phase error (a bf16 inv_freq) or a wrong block read would show here."""
    shape = LlamaShape(hidden_size=512, intermediate_size=1024, layers=4, heads=4, kv_heads=2)  # head_dim 128
    ref = OrpheusLlama.random(shape, torch.float32, "cuda", seed=8)
    ref.allocate(4, 1536)
    ref.set_attention("sdpa")
    low = OrpheusLlama.random(shape, torch.bfloat16, "cuda", seed=8)
    low.allocate(4, 1536)
    low.set_attention("flex")
    g = torch.Generator().manual_seed(9)
    prompt = torch.randint(0, ids.BOS, (4, 1500), generator=g).cuda()
    rows = torch.arange(4, device="cuda")
    lengths = torch.tensor([1500, 1000, 300, 129], device="cuda")
    with torch.inference_mode():
        ref.prefill(prompt, rows, lengths)
        low.prefill(prompt, rows, lengths)
        tok = prompt[rows, lengths - 1]
        a = ref.decode(tok, lengths, 1536)
        b = low.decode(tok, lengths)
    rel = (a - b).norm(dim=-1) / a.norm(dim=-1)
    assert float(rel.max()) < 0.05, rel.tolist()


@pytest.mark.gpu
async def test_gpu_cuda_backend_captures_every_graph_before_ready(test_model: Path) -> None:
    backend = CudaBackend(
        CudaBackendOptions(model_dir=str(test_model / "orpheus"), device="cuda", dtype="bfloat16", rows=8)
    )
    await backend.start()
    gen = backend.generator
    assert gen.ready and gen.captures == len(gen.batch_buckets) + len(gen.prefill_shapes()) and gen.use_graphs
    greedy = Sampling(temperature=0.0, top_p=1.0, repetition_penalty=1.1)
    outs = [
        [t async for t in token_stream(backend, backend.encode(text), 60, greedy, slot=i)]
        for i, text in enumerate(("Hello there.", "Another one."))
    ]
    assert all(len(o) == 60 for o in outs)
    assert gen.captures_after_ready == 0
    await backend.close()
