"""The trained end-of-turn text model: shipped weights, in process, inside its time budget."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from turn_detection.eot_text import (
    EotTextError,
    EotTextModel,
    EotTextOptions,
    agent_cues,
    features,
    normalise,
)


def test_reads_the_words_as_the_recogniser_writes_them() -> None:
    assert normalise("I'd like to book a table for, um... 4 people!") == [
        "i'd", "like", "to", "book", "a", "table", "for", "um", "4", "people",
    ]  # fmt: skip
    assert agent_cues("Thanks. Which day suits you?")[:2] == ["a:q", "a1:which"]
    assert features([], []) == ["empty"]


def test_an_open_clause_scores_below_the_same_clause_finished() -> None:
    model = EotTextModel()
    line = "How can I help you today?"
    open_clause = model.probability("I'd like to pick up my prescription from the", line)
    finished = model.probability("I'd like to pick up my prescription from the pharmacy", line)
    assert open_clause is not None and finished is not None
    assert open_clause < 0.5 * finished
    assert model.probability("  ...  ", line) is None  # no words, no score


def test_one_decision_costs_well_under_its_15_ms_budget_on_one_core() -> None:
    model = EotTextModel()
    words = "so the thing is my card was charged twice for the same order and i wanted to ask about"
    start = time.perf_counter()
    for i in range(200):
        model.probability(f"{words} {i}", "Card services, what's the issue?")  # never cached
    per_call_ms = (time.perf_counter() - start) * 1000 / 200
    assert per_call_ms < 15.0


def test_bad_weights_are_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(EotTextError, match="cannot load"):
        EotTextModel(EotTextOptions(weights=tmp_path / "missing.npz"))
    bad = tmp_path / "bad.npz"
    np.savez(bad, w=np.zeros(10, dtype=np.float16), bits=np.int64(18))
    with pytest.raises(EotTextError, match="does not match"):
        EotTextModel(EotTextOptions(weights=bad))
