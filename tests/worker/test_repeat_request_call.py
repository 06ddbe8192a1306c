"""A caller the recogniser cannot read is asked to repeat instead of being met with silence: a real
AgentSession, the real streaming Whisper and guard, speech tiny.en cannot write (espeak-ng's Korean said to
an English agent). Without the request the agent says nothing at all (the test then fails)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from benchmarks.call import OfflineBuilder, warm_stt
from plugins.cpu_voice.voice import open_voice
from simulator.offline import run_call
from tests.conftest import SHORT_REPLIES
from worker.agent import REPEAT
from worker.settings import load_settings

pytestmark = pytest.mark.slow


def _unreadable_turn(path: Path) -> Path:
    voice = open_voice("espeak-ko")
    pcm = voice.synthesize("다음 주 화요일 오전에 검진 예약을 하고 싶어요.").astype(np.float32) / 32768
    audio = np.concatenate(
        [np.zeros(4800, np.float32), soxr.resample(pcm, 24_000, 16_000), np.zeros(16000, np.float32)]
    )
    sf.write(path, audio, 16_000, subtype="PCM_16")
    return path


async def test_a_caller_not_understood_hears_a_request_to_repeat(
    embedded_llm_url: str, speech_audio: Path, tmp_path: Path
) -> None:
    clear = sorted((speech_audio / "conversation").glob("*.wav"))[0]
    settings = load_settings(**SHORT_REPLIES).model_copy(update={"stt_engine": "process"})
    session, agent, stt_model = OfflineBuilder(settings, embedded_llm_url).build("parley")
    await warm_stt(stt_model, clear)
    await run_call("parley", session, agent, [_unreadable_turn(tmp_path / "unreadable.wav")])
    replies = [
        m.text_content or "" for m in agent.chat_ctx.items if m.type == "message" and m.role == "assistant"
    ]
    assert sum(REPEAT["en"] in text for text in replies) == 1, replies  # asked once, not silence, not twice
    heard = [m.text_content for m in agent.chat_ctx.items if m.type == "message" and m.role == "user"]
    assert heard == [], heard  # no words it half-read are kept as the caller's turn
