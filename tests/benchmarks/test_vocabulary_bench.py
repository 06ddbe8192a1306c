"""benchmarks.vocabulary: what counts as a term heard or invented, and a small corpus folder streamed through
the real tiny.en with and without the business's vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from benchmarks.vocabulary import Sample, contains, main, score
from tests.answer_audio import RATE, quiet, said

VOCAB = {"pharmacy": ("Lisinopril", "Okonkwo", "Harrowgate Road")}


def test_a_term_counts_only_as_whole_words_in_its_listed_spelling() -> None:
    assert contains("I need my lisinopril, please.", "Lisinopril")
    assert contains("I live on Harrowgate road.", "Harrowgate Road")
    assert not contains("I need my list in April.", "Lisinopril")
    assert not contains("Harrowgate Roads are long.", "Harrowgate Road")
    assert not contains("Okonkwos", "Okonkwo")


def test_recall_invented_terms_and_noise_are_counted_apart() -> None:
    samples = [
        Sample("a.wav", "pharmacy", "term", "A refill of my Lisinopril.", ("Lisinopril",), "phone"),
        Sample(
            "b.wav",
            "pharmacy",
            "term",
            "Doctor Okonkwo on Harrowgate Road.",
            ("Okonkwo", "Harrowgate Road"),
            "web",
        ),
        Sample("c.wav", "pharmacy", "plain", "Is my order ready?", (), "web"),
        Sample("d.wav", "pharmacy", "noise", "", (), "web"),
    ]
    hyps = [
        "A refill of my list in April.",
        "Doctor Okonkwo on Harrowgate Road.",
        "Is my Okonkwo ready?",
        "Um.",
    ]
    r = score(samples, hyps, VOCAB)
    assert (r["terms_said"], r["terms_heard"]) == (3, 2)
    assert r["term_recall_by_channel"] == {"phone": 0.0, "web": 1.0}
    assert r["invented_terms"] == 1  # "Okonkwo" where nobody said it
    assert (r["noise_transcripts"], r["noise_files"]) == (1, 1)
    assert r["wer"] > 0


@pytest.mark.slow
def test_a_small_corpus_through_the_real_recogniser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "I need a refill of my Lisinopril."
    sf.write(tmp_path / "pharmacy_term_000.wav", np.concatenate([quiet(0.3), said(text), quiet(0.8)]), RATE)
    line_noise = np.random.default_rng(1).standard_normal(3 * RATE).astype(np.float32) * 0.003
    sf.write(tmp_path / "pharmacy_noise_001.wav", line_noise, RATE)
    files = {
        "pharmacy_term_000.wav": {
            "domain": "pharmacy",
            "kind": "term",
            "text": text,
            "terms": ["Lisinopril"],
        },
        "pharmacy_noise_001.wav": {"domain": "pharmacy", "kind": "noise", "text": "", "terms": []},
    }
    (tmp_path / "labels.json").write_text(json.dumps({"vocabulary": VOCAB, "files": files}))
    out = tmp_path / "report.json"
    assert main(["--data", str(tmp_path), "--json", str(out), "--quiet"]) == 0
    report = json.loads(out.read_text())
    assert set(report["configs"]) == {"none", "listed"} and report["files_scored"] == 2
    for r in report["configs"].values():
        assert r["terms_said"] == 1 and r["noise_transcripts"] == 0 and r["invented_terms"] == 0
    by_file = {f["file"]: f for f in report["files"]}
    assert "Lisinopril" in by_file["pharmacy_term_000.wav"]["listed"]  # the listed spelling, as listed
    assert "term recall" in capsys.readouterr().out


def test_a_folder_that_is_not_a_vocabulary_corpus_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data", str(tmp_path)]) == 1
    assert "labels.json not found" in capsys.readouterr().err
    (tmp_path / "labels.json").write_text(json.dumps({"files": {}}))
    assert main(["--data", str(tmp_path)]) == 1
    assert "not a vocabulary corpus" in capsys.readouterr().err
    assert main(["--data", str(tmp_path), "--configs", "boosted"]) == 1
    assert "unknown 'boosted'" in capsys.readouterr().err
