"""Integration: the real bundled tiny.en and the real Silero gate through the LiveKit stream."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from livekit import rtc
from livekit.agents import stt

from benchmarks.stt import make_noise_files
from plugins.whisper.model import ModelOptions, WhisperModelRunner
from plugins.whisper.stt import WhisperConfigError, WhisperSTT, WhisperSTTOptions
from plugins.word_error import compare_form, wer

pytestmark = pytest.mark.slow
E = stt.SpeechEventType


@pytest.fixture(scope="module")
def whisper_stt() -> WhisperSTT:
    s = WhisperSTT(WhisperSTTOptions(model=ModelOptions(cpu_threads=2)))
    s.prewarm()
    return s


def read_pcm(path: Path) -> np.ndarray:
    data, sr = sf.read(str(path), dtype="int16")
    assert sr == 16000
    return data


async def stream_through(s: WhisperSTT, pcm: np.ndarray, tail_s: float = 0.6) -> list[stt.SpeechEvent]:
    """Push 20 ms frames (faster than real time), some silence, then flush; return all events."""
    stream = s.stream()
    events: list[stt.SpeechEvent] = []

    async def read() -> None:
        async for ev in stream:
            events.append(ev)

    reader = asyncio.create_task(read())
    pcm = np.concatenate([pcm, np.zeros(int(tail_s * 16000), dtype=np.int16)])
    for i in range(0, len(pcm), 320):
        chunk = pcm[i : i + 320]
        stream.push_frame(rtc.AudioFrame(chunk.tobytes(), 16000, 1, len(chunk)))
        await asyncio.sleep(0.002)
    stream.end_input()
    await asyncio.wait_for(reader, 60)
    return events


def final_text(events: list[stt.SpeechEvent]) -> str:
    return " ".join(e.alternatives[0].text for e in events if e.type == E.FINAL_TRANSCRIPT).strip()


async def test_asr_files_transcribed_through_the_stream(whisper_stt: WhisperSTT, speech_audio: Path) -> None:
    files = sorted((speech_audio / "asr").glob("*.wav"))[:4]
    refs, hyps = [], []
    for f in files:
        events = await stream_through(whisper_stt, read_pcm(f))
        kinds = [e.type for e in events]
        assert kinds[0] == E.START_OF_SPEECH
        assert kinds.count(E.FINAL_TRANSCRIPT) == 1
        assert E.RECOGNITION_USAGE in kinds
        refs.append(f.with_suffix(".txt").read_text())
        hyps.append(final_text(events))
    assert wer(refs, hyps) <= 0.05, list(zip(refs, hyps, strict=True))


async def test_silence_and_noise_produce_nothing(whisper_stt: WhisperSTT, tmp_path: Path) -> None:
    for f in make_noise_files(tmp_path, seconds=2.0):
        events = await stream_through(whisper_stt, read_pcm(f))
        texts = [e.alternatives[0].text for e in events if e.alternatives]
        assert all(not compare_form(t) for t in texts), (f.name, texts)


async def test_recognize_whole_buffer(whisper_stt: WhisperSTT, speech_audio: Path) -> None:
    f = speech_audio / "asr" / "a03.wav"
    pcm = read_pcm(f)
    ev = await whisper_stt.recognize([rtc.AudioFrame(pcm.tobytes(), 16000, 1, len(pcm))])
    assert compare_form(ev.alternatives[0].text) == compare_form(f.with_suffix(".txt").read_text())
    # 48 kHz input is resampled
    up = np.repeat(pcm, 3)
    ev = await whisper_stt.recognize([rtc.AudioFrame(up.tobytes(), 48000, 1, len(up))])
    assert "forty dollars" in compare_form(ev.alternatives[0].text)


def test_english_only_model_refuses_korean() -> None:
    runner = WhisperModelRunner(ModelOptions())
    assert runner.multilingual is False
    with pytest.raises(WhisperConfigError, match="English-only"):
        WhisperSTT(WhisperSTTOptions(language="ko"), transcriber=runner)
    with pytest.raises(WhisperConfigError, match="English-only"):
        WhisperSTT(WhisperSTTOptions(language="auto"), transcriber=runner)
    runner.close()


@pytest.mark.gpu
async def test_cuda_float16_decode(speech_audio: Path) -> None:
    runner = WhisperModelRunner(ModelOptions(device="cuda"))
    s = WhisperSTT(WhisperSTTOptions(), transcriber=runner)
    f = speech_audio / "asr" / "a01.wav"
    events = await stream_through(s, read_pcm(f))
    assert compare_form(final_text(events)) == compare_form(f.with_suffix(".txt").read_text())
    runner.close()
