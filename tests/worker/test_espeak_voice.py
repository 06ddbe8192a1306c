"""espeak-ng as the CPU voice of Korean agents (plugins/cpu_voice/espeak.py): real espeak-ng, no doubles."""

from __future__ import annotations

import numpy as np
import pytest

from plugins.cpu_voice import CpuVoiceError
from plugins.cpu_voice.espeak import EspeakVoice, check_voice_name, wav_samples
from plugins.cpu_voice.voice import CpuVoice, open_voice
from worker.settings import load_settings


def _voiced_s(pcm: np.ndarray, rate: int = 24_000) -> float:
    win = rate // 100
    frames = pcm[: len(pcm) // win * win].astype(np.float64).reshape(-1, win) / 32768
    return float((np.sqrt((frames**2).mean(axis=1)) > 10 ** (-40 / 20)).sum()) / 100


@pytest.fixture(scope="module")
def voice() -> EspeakVoice:
    v = open_voice("espeak-ko")
    assert isinstance(v, EspeakVoice)
    return v


def test_korean_text_becomes_speech_that_starts_at_once(voice: EspeakVoice) -> None:
    short = voice.synthesize("네.")
    long = voice.synthesize("진료 시간은 평일 오전 아홉 시부터 오후 다섯 시까지입니다.")
    assert short.dtype == np.int16 and voice.sample_rate == 24_000
    assert 0.1 < _voiced_s(short) < 1.0
    assert _voiced_s(long) > 2.0  # every syllable said, at a speaking rate
    assert np.abs(long[:1200].astype(np.int32)).max() > 300  # leading silence trimmed: voice within 50 ms


@pytest.mark.parametrize("text", ["", "   ", "<laugh>", "\x00\x07"])
def test_nothing_speakable_gives_empty_audio(voice: EspeakVoice, text: str) -> None:
    assert len(voice.synthesize(text)) == 0


def test_text_that_looks_like_an_option_is_spoken_not_obeyed(voice: EspeakVoice) -> None:
    assert _voiced_s(voice.synthesize("-w /tmp/x --version")) > 0.5


@pytest.mark.parametrize("name", ["espeak-zz", "espeak-", "espeak-ko+", "espeak-ko;rm"])
def test_a_bad_voice_name_is_one_line(name: str) -> None:
    with pytest.raises(CpuVoiceError) as err:
        open_voice(name)
    assert "espeak voice" in str(err.value) and "\n" not in str(err.value)


def test_variants_are_accepted() -> None:
    assert check_voice_name("espeak-ko+f3") == ("ko", "f3")
    assert isinstance(open_voice("heart"), CpuVoice)


def test_a_missing_espeak_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("plugins.cpu_voice.espeak.shutil.which", lambda _: None)
    with pytest.raises(CpuVoiceError, match="needs espeak-ng"):
        EspeakVoice("espeak-ko")


@pytest.mark.parametrize("wav", [b"", b"RIFF....WAVEfmt " + b"\0" * 40, b"not a wav at all" * 4])
def test_garbage_output_is_a_clear_error(wav: bytes) -> None:
    with pytest.raises(CpuVoiceError):
        wav_samples(wav)


def test_a_korean_agent_gets_the_korean_voice_unless_one_is_set() -> None:
    assert load_settings().effective_cpu_voice == "heart"
    assert load_settings(language="ko").effective_cpu_voice == "espeak-ko"  # hibari cannot say Hangul
    assert load_settings(language="ko", cpu_voice="espeak-ko+f2").effective_cpu_voice == "espeak-ko+f2"
    assert load_settings(cpu_voice="espeak-en").effective_cpu_voice == "espeak-en"
