"""Builds through the real CPU voice (hibari): cold build, warm rebuild, staleness, crash resume."""

from __future__ import annotations

import pytest
from livekit.agents import APIConnectionError

from caches import BuildOptions, CacheStore, Phrase, PhraseCache, build_cache, load_phrases
from caches.__main__ import main as cli_main
from plugins.cpu_voice import CpuVoice, CpuVoiceTTS

pytestmark = pytest.mark.slow

SMALL = [
    Phrase("Okay.", "acknowledgement", "en"),
    Phrase("Let me see.", "acknowledgement", "en"),
    Phrase("One moment.", "hold", "en"),
    Phrase("Goodbye, take care.", "goodbye", "en"),
]


@pytest.fixture(scope="module")
def voice() -> CpuVoice:
    return CpuVoice("heart")


@pytest.fixture
def tts(voice: CpuVoice) -> CpuVoiceTTS:
    return CpuVoiceTTS(voice="heart", engine=voice)


class Crash(BaseException):
    """Stands for the process dying (not an Exception, so nothing on the way catches it)."""


def opts(fp: str = "fp1") -> BuildOptions:
    return BuildOptions(voice="heart", language="en", fingerprint=fp)


def count_synthesis(monkeypatch, tts: CpuVoiceTTS) -> list[str]:
    calls: list[str] = []
    real = tts.synth_piece

    async def counted(text: str) -> bytes:
        calls.append(text)
        return await real(text)

    monkeypatch.setattr(tts, "synth_piece", counted)
    return calls


async def test_cold_build_of_default_set_then_warm_build_does_no_synthesis(
    tmp_path, monkeypatch, tts
) -> None:
    store = CacheStore(tmp_path)
    phrases = load_phrases().for_voice("heart", "en")
    calls = count_synthesis(monkeypatch, tts)
    seen: list[str] = []
    cold = await build_cache(store, tts, phrases, opts(), on_progress=lambda p, what: seen.append(what))
    assert cold.ok and len(cold.synthesised) == len(phrases) and not cold.reused
    assert seen == ["synthesised"] * len(phrases)
    assert len(calls) >= len(phrases)

    cache = PhraseCache.load(tmp_path, voice="heart", language="en", fingerprint="fp1")
    assert len(cache) == len(phrases)
    for p in phrases:
        hit = cache.lookup(p.text, "heart", "en")
        assert hit is not None and hit.kind == p.kind and hit.sample_rate == 24_000
        assert 150 < hit.duration_ms < 8000

    calls.clear()
    warm = await build_cache(store, tts, phrases, opts())
    assert warm.synthesised == [] and len(warm.reused) == len(phrases) and calls == []


async def test_stale_entries_are_rebuilt_and_pruned(tmp_path, monkeypatch, tts) -> None:
    store = CacheStore(tmp_path)
    await build_cache(store, tts, SMALL, opts("fp1"))
    old_files = {e.file for e in store.read_manifest().values()}

    # a new model fingerprint: everything is synthesised again and the old clips go away
    report = await build_cache(store, tts, SMALL, opts("fp2"))
    assert len(report.synthesised) == len(SMALL) and len(report.stale) == len(SMALL)
    entries = store.read_manifest()
    assert {e.key.fingerprint for e in entries.values()} == {"fp2"}
    assert not any((tmp_path / f).exists() for f in old_files)

    # a deleted file is rebuilt; a phrase dropped from the set is pruned; other voices are left alone
    victim = next(e for e in entries.values() if e.source_text == "Okay.")
    (tmp_path / victim.file).unlink()
    other = BuildOptions(voice="other", language="en", fingerprint="fp2")
    await build_cache(store, tts, SMALL[:1], other)
    calls = count_synthesis(monkeypatch, tts)
    report = await build_cache(store, tts, SMALL[:3], opts("fp2"))
    assert report.synthesised == ["Okay."] and calls == ["Okay."]
    assert "Goodbye, take care." in report.stale
    texts = sorted((e.key.voice, e.source_text) for e in store.read_manifest().values())
    assert texts == [
        ("heart", "Let me see."),
        ("heart", "Okay."),
        ("heart", "One moment."),
        ("other", "Okay."),
    ]


async def test_crash_mid_build_keeps_finished_phrases(tmp_path, monkeypatch, tts) -> None:
    store = CacheStore(tmp_path)
    real = tts.synth_piece
    done: list[str] = []

    async def crash_on_third(text: str) -> bytes:
        if len(done) == 2:
            raise Crash  # the process dies here
        done.append(text)
        return await real(text)

    monkeypatch.setattr(tts, "synth_piece", crash_on_third)
    with pytest.raises(Crash):
        await build_cache(store, tts, SMALL, opts())
    assert len(PhraseCache.load(tmp_path)) == 2
    assert not list(tmp_path.rglob("*.tmp"))

    monkeypatch.setattr(tts, "synth_piece", real)
    calls = count_synthesis(monkeypatch, tts)
    report = await build_cache(store, tts, SMALL, opts())
    assert len(report.reused) == 2 and len(report.synthesised) == 2 and len(calls) == 2


async def test_a_failing_phrase_does_not_stop_the_build(tmp_path, monkeypatch, tts) -> None:
    real = tts.synth_piece

    async def flaky(text: str) -> bytes:
        if text.startswith("Let me"):
            raise APIConnectionError("engine went away", retryable=False)
        return await real(text)

    monkeypatch.setattr(tts, "synth_piece", flaky)
    report = await build_cache(CacheStore(tmp_path), tts, SMALL, opts())
    assert not report.ok
    assert [t for t, _ in report.failed] == ["Let me see."]
    assert "\n" not in report.failed[0][1]
    assert len(report.synthesised) == 3


def test_cli_builds_with_progress_bar_then_reuses(tmp_path, capsys) -> None:
    phrases = tmp_path / "p.yaml"
    phrases.write_text("languages:\n  en:\n    acknowledgement: [Okay., Sure.]\n    greeting: [Hello!]\n")
    args = [
        "build",
        "--dir",
        str(tmp_path / "c"),
        "--phrases",
        str(phrases),
        "--json",
        str(tmp_path / "r.json"),
    ]
    assert cli_main(args) == 0
    out = capsys.readouterr()
    assert "synthesised 3, reused 0" in out.out
    assert "phrases heart/en" in out.err and "100%" in out.err  # the tqdm bar
    assert cli_main(args) == 0
    assert "synthesised 0, reused 3" in capsys.readouterr().out
    assert cli_main(["show", "--dir", str(tmp_path / "c")]) == 0
    assert "heart" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--language", "ko", "--voice", "heart"], "hibari speaks English only"),
        (["--voice", "nobody"], "unknown CPU voice 'nobody'"),
        (["--backend", "orpheus", "--tts", "no.such.module:X"], "cannot create TTS"),
        (["--phrases", "/nonexistent.yaml"], "cannot read phrase file"),
        (["--pronunciations", "Nguyen"], "--pronunciations: 'Nguyen' is not 'word=how to say it'"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, args: list[str], needle: str) -> None:
    assert cli_main(["build", "--dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err
