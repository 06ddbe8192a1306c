import time

import numpy as np
import pytest

from plugins.cpu_voice.voice import CpuVoice, CpuVoiceError, trim_silence


def test_trim_keeps_speech_and_drops_leading_silence() -> None:
    sr = 24000
    tone = 0.3 * np.sin(np.arange(sr // 2) * 2 * np.pi * 220 / sr).astype(np.float32)
    audio = np.concatenate([np.zeros(sr // 3, np.float32), tone, np.zeros(sr // 3, np.float32)])
    out = trim_silence(audio, sr)
    assert len(tone) <= len(out) <= len(tone) + int(0.1 * sr)
    assert trim_silence(np.zeros(sr, np.float32), sr).size == 0


@pytest.fixture(scope="module")
def voice() -> CpuVoice:
    return CpuVoice()


def test_synthesis_is_speech_that_starts_at_once(voice: CpuVoice) -> None:
    pcm = voice.synthesize("Hello, how can I help you today?")
    assert pcm.dtype == np.int16 and len(pcm) > 24000 * 0.8
    first_20ms = pcm[:480].astype(np.float64) / 32768
    # no 0.3 s of silence in front any more: something audible within the first 40 ms
    head = pcm[:960].astype(np.float64) / 32768
    assert np.sqrt(np.mean(head**2)) > 10 ** (-50 / 20) or np.abs(first_20ms).max() > 0.003


@pytest.mark.parametrize("text", ["", "   ", "🙂🙂", "\x00\x07\x1b", "<sigh>"])
def test_unspeakable_text_gives_empty_audio(voice: CpuVoice, text: str) -> None:
    assert voice.synthesize(text).size == 0


def test_unknown_voice_is_a_clear_error() -> None:
    with pytest.raises(CpuVoiceError, match="unknown CPU voice"):
        CpuVoice("no-such-voice")


async def test_the_voice_reports_its_real_time_factor_for_the_headroom() -> None:
    from plugins.cpu_voice.tts import CpuVoiceTTS

    tts = CpuVoiceTTS()
    assert tts.recent_rtf(5.0) == 0.0  # nothing said yet
    began = time.monotonic()
    pcm = await tts.synth_piece("Your cleaning is booked for Wednesday at ten.")
    took = time.monotonic() - began
    rtf = tts.recent_rtf(5.0)
    assert rtf == pytest.approx(took / (len(pcm) / 2 / 24000), rel=0.2) and rtf > 0
    assert tts.recent_rtf(0.0) == 0.0  # outside the window
