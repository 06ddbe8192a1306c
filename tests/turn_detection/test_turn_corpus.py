"""The turn corpus's renderings: a pause said inside one utterance is found again and labelled where it is,
both renderings of a file share every other draw (so they pair file by file), and every template has
the agent's line said before it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.corpus_script import corpus_module

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None, reason="espeak-ng (scripts/setup_system.sh)"
)


def test_a_pause_inside_one_utterance_is_labelled_where_the_break_is() -> None:
    corpus = corpus_module()
    synth = corpus.Synth()
    template = next(t for t in corpus.all_templates() if t.case == "function_word")
    voice = corpus.Voice("espeak", "en-us", "+m3")
    _, sep_segments, parts, sep_info = corpus.render(synth, template, voice, 0, 16, "separate")
    one_audio, one_segments, parts2, one_info = corpus.render(synth, template, voice, 0, 16, "in-sentence")
    assert parts == parts2 and len(one_segments) == 2
    assert one_info["pause_rendering"] == "in-sentence" and sep_info["pause_rendering"] == "separate"
    assert {k: v for k, v in one_info.items() if k != "pause_rendering"} == {
        k: v for k, v in sep_info.items() if k != "pause_rendering"
    }
    # the pause drawn for the file, found again between the two parts of the one utterance
    drawn = sep_segments[1][0] - sep_segments[0][1]
    found = one_segments[1][0] - one_segments[0][1]
    assert abs(found - drawn) < 0.15
    # each labelled span is speech: louder than the pause between them
    rate = corpus.RATE

    def rms(a: float, b: float) -> float:
        x = one_audio[int(a * rate) : int(b * rate)]
        return float((x**2).mean() ** 0.5)

    gap = rms(one_segments[0][1] + 0.05, one_segments[1][0] - 0.05)
    assert rms(*one_segments[0]) > 3 * gap and rms(*one_segments[1]) > 3 * gap


def test_breaks_not_found_fall_back_to_separate_parts() -> None:
    corpus = corpus_module()
    import numpy as np

    speech = np.sin(np.arange(16000) / 5.0).astype(np.float32)  # one second of tone, no silence in it
    assert corpus._spans_between_breaks(speech, [0.8]) is None


def test_every_template_has_the_agents_line_before_it() -> None:
    templates = corpus_module().all_templates()
    assert templates and all(t.agent_line.strip() for t in templates)
