"""`--backend cuda` on CPU at tiny shapes: model math against transformers, on-device sampling, batched
generation with prefill between decode steps, cancellation, and real audio out of the engine. The CUDA-only
parts (graphs, FP8) run under the gpu marker."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import Sampling, token_stream
from plugins.orpheus.engine.backends.cuda_backend import CudaBackend, CudaBackendOptions
from plugins.orpheus.engine.core import EngineOptions
from plugins.orpheus.engine.cuda.generator import BatchGenerator, GeneratorOptions
from plugins.orpheus.engine.cuda.model import HEAD_ROWS, LlamaShape, OrpheusLlama
from plugins.orpheus.engine.cuda.sampling import penalise, restrict, sample, to_token_ids
from plugins.orpheus.engine.factory import EngineConfig, build_engine
from plugins.orpheus.engine.text import TextOptions, prompt_ids
from tests.orpheus.test_backends import assert_valid_positions

TINY = LlamaShape(hidden_size=64, intermediate_size=128, layers=2, heads=4, kv_heads=2)


@pytest.fixture(scope="module")
def hf_llama3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A tiny transformers Llama with Llama-3 RoPE scaling (short original context, so scaling matters)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=ids.VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    )
    model = LlamaForCausalLM(cfg).eval()
    out = tmp_path_factory.mktemp("hf-llama3")
    model.save_pretrained(out)
    return out, model


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["flex", "sdpa"])
def test_prefill_and_batched_decode_match_transformers(
    hf_llama3: tuple[Path, object], attention: str
) -> None:
    path, hf = hf_llama3
    ours = OrpheusLlama.from_pretrained(path, torch.float32, "cpu")
    assert json.loads((path / "config.json").read_text())  # loaded from the files, not the object
    ours.allocate(rows=3, max_seq=256)
    ours.set_attention(attention)
    prompt = torch.randint(0, ids.BOS, (160,), generator=torch.Generator().manual_seed(1))
    cols = [*range(ids.AUDIO_BASE, ids.AUDIO_END), ids.END_OF_SPEECH]
    with torch.inference_mode():
        ref = hf(prompt[None]).logits[0][:, cols]  # type: ignore[operator]
        # two prompts in one padded prefill: the longer one's logits, and the shorter one's at its own end
        batch = torch.full((2, 128), ids.PAD, dtype=torch.int64)
        batch[0], batch[1, :7] = prompt[:128], prompt[:7]
        got = ours.prefill(batch, torch.tensor([2, 0]), torch.tensor([100, 7]))
        assert got.shape == (2, HEAD_ROWS)
        torch.testing.assert_close(got[0], ref[99], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got[1], ref[6], atol=1e-4, rtol=1e-4)
        # row 0 holds prompt[:7]; row 2 prompt[:100] (its padding past 100 is overwritten by decode)
        for t in range(100, 160):
            tokens = torch.tensor([int(prompt[t - 93]), ids.PAD, int(prompt[t])])
            pos = torch.tensor([t - 93, 0, t])
            step = ours.decode(tokens, pos, kv_len=256)
        torch.testing.assert_close(step[2], ref[159], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(step[0], ref[66], atol=1e-4, rtol=1e-4)


def test_restricted_sampling_positions_stop_and_penalty() -> None:
    torch.manual_seed(0)
    b = 14
    logits = torch.randn(b, HEAD_ROWS)
    logits[:, -1] = 100.0  # the stop id would always win if it were allowed
    framepos = torch.arange(b) % ids.FRAME_TOKENS
    z = restrict(logits, framepos)
    assert z.shape == (b, ids.CODEBOOK + 1)
    assert torch.isinf(z[framepos != 0, -1]).all() and (z[framepos == 0, -1] == 100.0).all()
    for i in range(b):  # each row sees exactly its own position's 4096 codes
        p = int(framepos[i])
        assert torch.equal(z[i, :-1], logits[i, p * ids.CODEBOOK : (p + 1) * ids.CODEBOOK])

    ones = torch.ones(b)
    greedy = sample(z, torch.zeros(b), ones)
    token, column = to_token_ids(greedy, framepos)
    stop_rows = framepos == 0
    assert (token[stop_rows] == ids.END_OF_SPEECH).all() and (column[stop_rows] == -1).all()
    lo = ids.AUDIO_BASE + framepos * ids.CODEBOOK
    assert ((token >= lo) & (token < lo + ids.CODEBOOK))[~stop_rows].all()
    # top_p → 0 keeps only the most likely choice, whatever the temperature
    z2 = restrict(torch.randn(b, HEAD_ROWS), framepos)
    assert torch.equal(sample(z2, torch.full((b,), 0.7), torch.full((b,), 1e-6)), z2.argmax(-1))
    # a code in the window (same position) is penalised; the same code at another position is not
    z3 = torch.zeros(2, ids.CODEBOOK + 1)
    z3[:, 5] = 2.0
    fp = torch.tensor([1, 2])
    history = torch.tensor([[1 * ids.CODEBOOK + 5, -1], [1 * ids.CODEBOOK + 5, -1]])
    pen = penalise(z3, fp, history, torch.tensor([2.0, 2.0]))
    assert pen[0, 5] == 1.0 and pen[1, 5] == 2.0
    # sampling follows the distribution (a coarse check: 2 choices at 3:1)
    zz = torch.full((4000, ids.CODEBOOK + 1), float("-inf"))
    zz[:, 0], zz[:, 1] = 0.0, float(np.log(3.0))
    picks = sample(zz, torch.ones(4000), torch.ones(4000))
    assert 0.70 < float((picks == 1).float().mean()) < 0.80


def _run_alone(model: OrpheusLlama, prompt: list[int], n: int) -> list[int]:
    gen = BatchGenerator(model, GeneratorOptions(rows=4, max_seq=256))
    _, first, _ = gen.admit(prompt, 10_000, 0.0, 1.0, 1.3)
    out = [first]
    while len(out) < n:
        out.append(int(gen.step().tokens[0]))
    return out


@pytest.mark.slow
def test_prefill_between_decode_steps_leaves_running_streams_unchanged() -> None:
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=3)
    a, b = [ids.START_OF_HUMAN, 1, 2, 3, ids.START_OF_SPEECH], [ids.START_OF_HUMAN, 9, 8, ids.START_OF_SPEECH]
    alone_a, alone_b = _run_alone(model, a, 40), _run_alone(model, b, 25)

    gen = BatchGenerator(model, GeneratorOptions(rows=4, max_seq=256))
    row_a, first, _ = gen.admit(a, 10_000, 0.0, 1.0, 1.3)
    seq: dict[int, list[int]] = {row_a: [first]}
    for _ in range(14):
        r = gen.step()
        seq[row_a].append(int(r.tokens[0]))
    row_b, first_b, _ = gen.admit(b, 10_000, 0.0, 1.0, 1.3)  # joins mid-utterance
    seq[row_b] = [first_b]
    while len(seq[row_b]) < 25:
        r = gen.step()
        assert r.rows.tolist() == [row_a, row_b]
        for row, tok in zip(r.rows.tolist(), r.tokens.tolist(), strict=True):
            seq[row].append(tok)
    assert (
        seq[row_a] == alone_a[: len(seq[row_a])] and seq[row_b] == alone_b
    )  # greedy: batching changes nothing
    assert_valid_positions(seq[row_a])
    gen.release(row_a)
    assert gen.step().rows.tolist() == [row_b] and gen.free_rows == 3


def test_max_tokens_and_row_reuse() -> None:
    model = OrpheusLlama.random(TINY, torch.float32, "cpu", seed=4)
    gen = BatchGenerator(model, GeneratorOptions(rows=2, max_seq=64))
    row, _, done = gen.admit([ids.START_OF_SPEECH], 9, 0.5, 0.9, 1.1)
    n = 1
    while not done:
        r = gen.step()
        n += 1
        done = bool(r.finished[0])
    assert n <= 9 and gen.free_rows == 2
    row2, _, _ = gen.admit([ids.START_OF_SPEECH] * 60, 1000, 0.5, 0.9, 1.1)  # clamped to max_seq
    assert row2 == row
    steps = 0
    while gen.active_rows:
        gen.step()
        steps += 1
    assert steps <= 4
    with pytest.raises(ValueError, match="does not fit"):
        gen.admit([1] * 64, 10, 0.5, 0.9, 1.1)


@pytest.mark.slow
async def test_cuda_backend_streams_and_cancels_on_cpu(test_model: Path) -> None:
    backend = CudaBackend(
        CudaBackendOptions(model_dir=str(test_model / "orpheus"), device="cpu", dtype="float32", rows=4)
    )
    await backend.start()
    prompt = prompt_ids("tara", "Hello there.", backend.encode)
    got = [t async for t in token_stream(backend, prompt, 70, Sampling(seed=3))]
    assert 0 < len(got) <= 70
    assert_valid_positions(got)
    async for _ in token_stream(backend, prompt, 2000, slot=1):  # leaving early cancels
        break
    await asyncio.sleep(0.05)
    assert backend.active == 0
    await backend.close()


@pytest.mark.slow
async def test_cuda_backend_real_audio_through_the_engine(test_model: Path) -> None:
    short = TextOptions(words_per_second_min=8.0, max_tokens_margin_s=0.3)  # random weights never stop
    cfg = EngineConfig.for_test_model(
        test_model,
        backend="cuda",
        cuda_max_seq=512,
        engine=EngineOptions(max_streams=3, text=short, trim_leading_silence=False),
    )
    eng = build_engine(cfg)
    await eng.start()
    results = await asyncio.gather(
        *(eng.synthesize(t) for t in ("Hello there.", "Good morning to you.", "Hi."))
    )
    for pcm in results:
        assert pcm.size > 0 and pcm.size % ids.FRAME_SAMPLES == 0 and pcm.std() > 0
    assert eng.backend.active == 0
    await eng.close()


@pytest.mark.gpu
def test_cuda_graph_steps_match_eager_steps() -> None:
    model = OrpheusLlama.random(TINY, torch.float32, "cuda", seed=5)
    prompts = [[ids.START_OF_HUMAN, i, ids.START_OF_SPEECH] for i in range(1, 6)]
    runs = []
    for graphs in (False, True):
        gen = BatchGenerator(model, GeneratorOptions(rows=8, max_seq=256, cuda_graphs=graphs))
        toks = [[gen.admit(p, 10_000, 0.0, 1.0, 1.2)[1]] for p in prompts]
        for _ in range(30):
            r = gen.step()
            for row, t in zip(r.rows.tolist(), r.tokens.tolist(), strict=True):
                toks[row].append(t)
        runs.append(toks)
    assert runs[0] == runs[1]


@pytest.mark.gpu
def test_fp8_weights_decode_close_to_bf16() -> None:
    shape = LlamaShape(hidden_size=256, intermediate_size=512, layers=2, heads=2, kv_heads=1)
    model = OrpheusLlama.random(shape, torch.bfloat16, "cuda", seed=6)
    model.allocate(2, 64)
    tokens, pos = (
        torch.tensor([ids.START_OF_SPEECH, ids.PAD], device="cuda"),
        torch.zeros(2, dtype=torch.int64, device="cuda"),
    )
    with torch.inference_mode():
        ref = model.decode(tokens, pos, 64)
        model.use_fp8()
        got = model.decode(tokens, pos, 64)
    assert torch.isfinite(got).all()
    assert float((got - ref).norm() / ref.norm()) < 0.1


@pytest.mark.gpu
def test_snac_graphs_share_one_pool_and_match_eager(test_model: Path) -> None:
    from plugins.orpheus.engine.snac_decoder import DecoderOptions, SnacDecoder, load_snac

    model = load_snac(test_model / "snac")
    graphs = SnacDecoder(model, DecoderOptions(device="cuda", max_batch=8))
    graphs.warm_up()
    eager = SnacDecoder(load_snac(test_model / "snac"), DecoderOptions(device="cuda", cuda_graphs=False))
    windows = [np.random.default_rng(i).integers(0, 4096, (1 + i % 4, 7)) for i in range(5)]
    for a, b in zip(graphs.decode(windows), eager.decode(windows), strict=True):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
        assert np.abs(a.astype(np.int32) - b.astype(np.int32)).max() <= 2
    assert graphs._pool is not None and len(graphs._graphs) >= 8
