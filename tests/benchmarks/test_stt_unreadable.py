"""benchmarks.stt's unreadable speech (`--unreadable`): a real tiny.en stream, one English file and one
sentence in Korean, which the English model cannot read. Each unreadable file ends one of three ways, and the
report says which: answered (words Whisper invented), asked to repeat, or met with silence."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from benchmarks.stt import main
from plugins.cpu_voice.voice import open_voice

pytestmark = pytest.mark.slow


def test_unreadable_speech_is_counted_apart_from_speech_and_noise(speech_audio: Path, tmp_path: Path) -> None:
    english, korean = tmp_path / "en", tmp_path / "ko"
    english.mkdir()
    korean.mkdir()
    for ext in ("wav", "txt"):
        shutil.copy(speech_audio / "asr" / f"a01.{ext}", english / f"a01.{ext}")
    pcm = (
        open_voice("espeak-ko").synthesize("내일 오후 세 시에 예약을 바꾸고 싶어요.").astype(np.float32)
        / 32768
    )
    sf.write(korean / "k01.wav", soxr.resample(pcm, 24_000, 16_000), 16_000, subtype="PCM_16")
    out = tmp_path / "report.json"
    args = ["--data", str(english), "--unreadable", str(korean), "--no-generated-noise", "--speed", "2"]
    assert main([*args, "--quiet", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["unreadable_files"] == 1 and report["noise_files"] == 0
    assert report["wer"] < 0.3  # the English file still counts as speech
    [unreadable] = [f for f in report["files"] if f["file"] == "k01.wav"]
    answered = bool(unreadable["hyp"].strip())
    assert report["unreadable_answered"] == int(answered)
    assert report["unreadable_asked"] == int(unreadable["asked_to_repeat"])
    assert answered or unreadable["asked_to_repeat"], "a caller who spoke for 3 s was met with silence"
