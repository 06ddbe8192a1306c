"""The PyTorch Whisper runner (a CUDA 13 GPU host's speech engine), checked on CPU against faster-whisper.

The real bundled tiny.en through both runtimes: the same text, and the same no-speech probability, mean
log-probability and last-word probability to within what int8 against float32 arithmetic moves them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from plugins.whisper.ct2_file import (
    dequantized,
    quantized_int8,
    read_model_bin,
    save_int8_copy,
    write_model_bin,
)
from plugins.whisper.engine_client import SpeechClientOptions, SpeechEngineClient
from plugins.whisper.model import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    DecodeRequest,
    ModelOptions,
    WhisperModelRunner,
    bundled_model_path,
    make_runner,
)
from plugins.whisper.torch_runner import PAD_SAMPLES, TorchWhisperRunner, _padded_signals, mel_filters
from plugins.whisper.weights import WhisperModelError
from worker.speech_engine import HostSpeechEngine, HostSpeechEngineOptions

NAMES = ("a01", "a02", "a03", "a04")


def speech(speech_audio: Path, name: str) -> np.ndarray:
    data, sr = sf.read(str(speech_audio / "asr" / f"{name}.wav"), dtype="float32")
    assert sr == 16000
    return np.asarray(data, dtype=np.float32)


@pytest.fixture(scope="module")
def torch_runner() -> TorchWhisperRunner:
    runner = TorchWhisperRunner(ModelOptions())
    runner.load()
    return runner


@pytest.fixture(scope="module")
def ct2_runner() -> WhisperModelRunner:
    runner = WhisperModelRunner(ModelOptions(cpu_threads=1))
    runner.load()
    return runner


def test_model_bin_round_trip_keeps_names_shapes_dtypes_and_aliases(tmp_path: Path) -> None:
    shared = np.arange(12, dtype=np.float16).reshape(3, 4)
    variables = {
        "a/weight": shared,
        "a/bias": np.ones(3, dtype=np.float32),
        "flag": np.array(1, dtype=np.int8),
        "b/weight": shared,  # an alias
    }
    write_model_bin(tmp_path / "model.bin", "WhisperSpec", variables)
    spec, back = read_model_bin(tmp_path / "model.bin")
    assert spec == "WhisperSpec"
    assert set(back) == set(variables)
    for name, arr in variables.items():
        assert back[name].dtype == arr.dtype and back[name].shape == arr.shape
        np.testing.assert_array_equal(back[name], arr)


def test_a_truncated_or_foreign_model_bin_is_one_clear_error(tmp_path: Path) -> None:
    write_model_bin(tmp_path / "model.bin", "WhisperSpec", {"w": np.ones((4, 4), np.float32)})
    raw = (tmp_path / "model.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(WhisperModelError, match="truncated"):
        read_model_bin(tmp_path / "cut.bin")
    (tmp_path / "junk.bin").write_bytes(b"\xff" * 64)
    with pytest.raises(WhisperModelError, match="not a CTranslate2"):
        read_model_bin(tmp_path / "junk.bin")


def test_int8_quantisation_is_per_row_and_close() -> None:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 16)) * np.arange(1, 9)[:, None]).astype(np.float16)
    q = quantized_int8({"x/weight": w, "x/bias": np.ones(8, np.float16)})
    assert q["x/weight"].dtype == np.int8 and q["x/weight_scale"].shape == (8,)
    assert q["x/bias"].dtype == np.float16
    back = dequantized(q)["x/weight"]
    assert np.abs(back - w.astype(np.float32)).max() <= np.abs(w).max(axis=1).max() / 127


def test_mel_filters_are_whispers() -> None:
    from faster_whisper.feature_extractor import FeatureExtractor

    np.testing.assert_allclose(mel_filters(), FeatureExtractor.get_mel_filters(16000, 400, 80), atol=1e-7)


def test_signals_padded_on_the_device_are_faster_whispers_padding() -> None:
    """Every length class of the mirrored ends: none, under the mirror's reach, just at it, and long."""
    import torch

    rng = np.random.default_rng(3)
    audios = [rng.standard_normal(n).astype(np.float32) for n in (0, 5, 40, 200, 201, 241, 1000, 16000)]
    width = 16000 + PAD_SAMPLES + 400 + 37
    got = _padded_signals(torch, audios, width, "cpu").numpy()
    for row, audio in enumerate(audios):
        want = np.pad(np.pad(audio, (0, PAD_SAMPLES)), (200, 200), mode="reflect")
        assert np.array_equal(got[row, : len(want)], want), len(audio)
        assert not got[row, len(want) :].any()


def test_batch_features_are_faster_whispers_features(
    torch_runner: TorchWhisperRunner, ct2_runner: WhisperModelRunner, speech_audio: Path
) -> None:
    """One STFT for a batch of different lengths gives each request the features it would get alone."""
    from plugins.whisper.batch import _features

    clip = speech(speech_audio, "a01")
    audios = [clip[:n] for n in (700, 16000, 3 * 16000 + 77, len(clip))]
    for frames in (1000, 3000):
        got, contents = torch_runner.features(audios, frames)
        for row, audio in enumerate(audios):
            want, content = _features(ct2_runner._model, audio, frames)
            assert contents[row] == content
            np.testing.assert_allclose(got[row].numpy(), want, atol=2e-4)


@pytest.mark.slow
def test_torch_decodes_what_faster_whisper_decodes(
    torch_runner: TorchWhisperRunner, ct2_runner: WhisperModelRunner, speech_audio: Path
) -> None:
    for name in NAMES:
        audio = speech(speech_audio, name)
        request = DecodeRequest(priority=PRIORITY_FINAL, window_s=15)
        want = ct2_runner.decode_batch([(audio, request)])[0]
        got = torch_runner.decode(audio, request)
        assert got.text == want.text and got.text, name
        (g,), (w,) = got.segments, want.segments
        assert abs(g.no_speech_prob - w.no_speech_prob) < 0.05
        assert abs(g.avg_logprob - w.avg_logprob) < 0.05
        assert abs(g.compression_ratio - w.compression_ratio) < 1e-6
        assert [x.text for x in got.words] == [x.text for x in want.words]
        assert got.last_word_probability is not None and want.last_word_probability is not None
        assert abs(got.last_word_probability - want.last_word_probability) < 0.1


@pytest.mark.slow
def test_a_batch_decodes_each_request_as_it_would_alone(
    torch_runner: TorchWhisperRunner, speech_audio: Path
) -> None:
    items = [
        (speech(speech_audio, n), DecodeRequest(priority=p, window_s=15))
        for n, p in zip(
            NAMES, (PRIORITY_FINAL, PRIORITY_PARTIAL, PRIORITY_FINAL, PRIORITY_PARTIAL), strict=True
        )
    ]
    together = torch_runner.decode_batch(items)
    for (audio, request), got in zip(items, together, strict=True):
        alone = torch_runner.decode(audio, request)
        assert got.text == alone.text
        assert (got.words == ()) == (request.priority == PRIORITY_PARTIAL)  # partials carry no words


@pytest.mark.slow
def test_a_padded_reused_bucket_decodes_as_a_batch_of_its_own_size(
    torch_runner: TorchWhisperRunner, speech_audio: Path
) -> None:
    """The GPU's path, run eagerly here: three requests padded to a bucket of four (the last copied) and
    decoded in the bucket's full-size buffers (every text position, the 30 s window's frames, masked;
    a CUDA graph per step there) give the tokens and scores of the same three in buffers of their own
    size, and a second batch in the same buffers is not disturbed by the first."""
    from plugins.whisper import torch_static as ts

    state = torch_runner._state
    assert state is not None
    items = [
        (speech(speech_audio, n), DecodeRequest(priority=PRIORITY_FINAL, window_s=15)) for n in NAMES[:2]
    ]
    items.append((np.zeros(8000, np.float32), DecodeRequest(priority=PRIORITY_FINAL, window_s=15)))
    dynamic = torch_runner.decode_batch(items)
    state["static"][4] = ts.new_batch(
        state["params"], state["dims"], 4, state["greedy"], "cpu", state["dtype"]
    )
    state["pad_batches"] = True
    try:
        fixed = torch_runner.decode_batch(items)
        again = torch_runner.decode_batch(items[::-1])[::-1]
    finally:
        state["static"].clear()
        state["pad_batches"] = False
    assert len(fixed) == len(again) == 3
    for d, f, a in zip(dynamic, fixed, again, strict=True):
        assert d.text == f.text == a.text
        assert [round(s.avg_logprob, 4) for s in d.segments] == [round(s.avg_logprob, 4) for s in f.segments]
        assert [w.text for w in d.words] == [w.text for w in f.words]


def test_silence_reads_as_faster_whisper_reads_it_and_english_only_refuses_korean(
    torch_runner: TorchWhisperRunner, ct2_runner: WhisperModelRunner
) -> None:
    """Whisper invents a word for digital silence in both runtimes (the guard drops it: guard.py)."""
    silence = (np.zeros(16000, np.float32), DecodeRequest(window_s=10))
    got, want = torch_runner.decode(*silence), ct2_runner.decode_batch([silence])[0]
    assert got.text == want.text
    assert len(got.segments) == len(want.segments)
    for g, w in zip(got.segments, want.segments, strict=True):
        assert abs(g.no_speech_prob - w.no_speech_prob) < 0.05
    with pytest.raises(WhisperModelError, match="English-only"):
        torch_runner.decode(np.zeros(16000, np.float32), DecodeRequest(language="ko"))
    with pytest.raises(ValueError, match="one prompt"):
        torch_runner.decode_batch([silence, (silence[0], DecodeRequest(initial_prompt="Um."))])


def test_cuda_without_a_gpu_is_one_line() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(WhisperModelError, match="no CUDA device"):
        TorchWhisperRunner(ModelOptions(device="cuda")).load()


def test_backend_choice() -> None:
    assert isinstance(make_runner(ModelOptions(backend="torch")), TorchWhisperRunner)
    assert isinstance(make_runner(ModelOptions()), WhisperModelRunner)
    # on a box where CTranslate2 sees no GPU, "auto" on CUDA means PyTorch
    import ctranslate2

    auto = make_runner(ModelOptions(device="cuda", backend="auto"))
    assert isinstance(auto, TorchWhisperRunner) == (ctranslate2.get_cuda_device_count() == 0)


@pytest.mark.slow
def test_the_int8_copy_decodes_alike_in_both_runtimes(tmp_path: Path, speech_audio: Path) -> None:
    """The copy the GPU check carries: CTranslate2 itself loads it, and both runtimes write the same."""
    copy = save_int8_copy(bundled_model_path(), tmp_path / "tiny-int8")
    assert (copy / "model.bin").stat().st_size < 0.6 * (bundled_model_path() / "model.bin").stat().st_size
    ct2 = WhisperModelRunner(ModelOptions(model=str(copy), cpu_threads=1))
    pt = TorchWhisperRunner(ModelOptions(model=str(copy)))
    for name in NAMES[:2]:
        audio = speech(speech_audio, name)
        request = DecodeRequest(priority=PRIORITY_FINAL, window_s=15)
        assert pt.decode(audio, request).text == ct2.decode_batch([(audio, request)])[0].text != ""


@pytest.mark.slow
async def test_the_host_engine_serves_the_torch_backend(tmp_path: Path, speech_audio: Path) -> None:
    """`python -m plugins.whisper serve --backend torch` as the worker starts it, four streams at once."""
    engine = HostSpeechEngine(
        HostSpeechEngineOptions(
            address=f"unix://{tmp_path}/stt.sock", backend="torch", workers=1, max_batch=4
        )
    )
    engine.start()
    client = SpeechEngineClient(SpeechClientOptions(engine.address, wait_s=30))
    try:
        audio = [speech(speech_audio, n) for n in NAMES]
        results = await asyncio.gather(
            *(
                client.transcribe(a, DecodeRequest(priority=PRIORITY_FINAL, window_s=15, stream_id=f"s{i}"))
                for i, a in enumerate(audio)
            )
        )
        assert "pizza" in results[0].text.lower()
        assert all(r.text for r in results)
        assert results[0].words, "finals carry their last words' probabilities"
        capacity = await client.capacity()
        assert capacity["decoded"] >= 4 and capacity["max_batch_seen"] >= 1
    finally:
        await client.aclose()
        engine.close()


@pytest.mark.gpu
def test_gpu_decodes_what_the_cpu_decodes(torch_runner: TorchWhisperRunner, speech_audio: Path) -> None:
    gpu = TorchWhisperRunner(ModelOptions(device="cuda"))
    for name in NAMES:
        audio = speech(speech_audio, name)
        request = DecodeRequest(priority=PRIORITY_FINAL, window_s=15)
        assert gpu.decode(audio, request).text == torch_runner.decode(audio, request).text


@pytest.mark.slow
def test_multilingual_base_detects_the_language_and_reads_the_prompt_as_faster_whisper(
    speech_audio: Path,
) -> None:
    """The packaged multilingual base: language detection, the language and task tokens, a style prompt."""
    audio = speech(speech_audio, "a02")
    request = DecodeRequest(
        priority=PRIORITY_FINAL, window_s=15, language=None, initial_prompt="Um, uh, mm-hmm."
    )
    want = WhisperModelRunner(ModelOptions(model="base", cpu_threads=1)).decode_batch([(audio, request)])[0]
    got = TorchWhisperRunner(ModelOptions(model="base")).decode(audio, request)
    assert got.language == want.language == "en"
    assert got.text == want.text != ""
