"""Whole-utterance phrase-cache hits with no engine at all, and the offline download path."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from livekit.agents import APIConnectOptions

from caches import CachedPhrase, PhraseCache
from plugins.orpheus import download
from plugins.orpheus.tts import EngineUnavailableError, OrpheusOptions, OrpheusTTS

NO_RETRY = APIConnectOptions(max_retry=0, timeout=5.0)
GREETING = "Hello! How can I help you today?"


def _cache(pcm: np.ndarray) -> PhraseCache:
    return PhraseCache([CachedPhrase(GREETING, "greeting", "tara", "en", "test", 24000, pcm)])


@pytest.fixture
def clip() -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.standard_normal(24000 * 3 // 4) * 3000).astype(np.int16)


@pytest.fixture
def offline_voice(tmp_path, clip: np.ndarray) -> OrpheusTTS:  # type: ignore[no-untyped-def]
    """No engine behind this address: anything not served from cache fails."""
    return OrpheusTTS(OrpheusOptions(address=f"unix://{tmp_path}/no-engine.sock"), phrase_cache=_cache(clip))


async def test_stream_hit_is_served_without_the_engine(offline_voice: OrpheusTTS, clip: np.ndarray) -> None:
    stream = offline_voice.stream(conn_options=NO_RETRY)
    stream.push_text("hello!  How can I help you today?")  # say(): the whole text, then end of input
    stream.end_input()
    frames = [ev.frame async for ev in stream]
    await stream.aclose()
    audio = np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames])
    assert np.array_equal(audio[: clip.size], clip)
    assert stream.served_from_cache and offline_voice.phrase_cache is not None
    assert offline_voice.phrase_cache.metrics.hits == 1


async def test_synthesize_hit_is_served_without_the_engine(
    offline_voice: OrpheusTTS, clip: np.ndarray
) -> None:
    frame = await offline_voice.synthesize(GREETING, conn_options=NO_RETRY).collect()
    assert np.array_equal(np.frombuffer(frame.data, dtype=np.int16)[: clip.size], clip)


async def test_a_miss_goes_to_the_engine(offline_voice: OrpheusTTS) -> None:
    stream = offline_voice.stream(conn_options=NO_RETRY)
    stream.push_text("Something nobody cached.")
    stream.end_input()
    with pytest.raises(EngineUnavailableError):
        async for _ in stream:
            pass
    await stream.aclose()


async def test_a_cached_prefix_of_a_longer_reply_is_not_a_hit(offline_voice: OrpheusTTS) -> None:
    stream = offline_voice.stream(conn_options=NO_RETRY)
    stream.push_text(GREETING + " ")
    stream.push_text("Also, your order shipped.")
    stream.end_input()
    with pytest.raises(EngineUnavailableError):
        async for _ in stream:
            pass
    await stream.aclose()


def test_download_offline_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    result = download.download_for_settings(SimpleNamespace(tts_backend="auto"))
    assert not result.downloaded
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "HF_HUB_OFFLINE" in out[0]


def test_download_hub_unreachable_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # loopback, nothing listens
    result = download.download(download.DownloadOptions(reach_timeout_s=0.5))
    assert not result.downloaded
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "not reachable" in out[0]


def test_download_cpu_only_worker_needs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    result = download.download_for_settings(SimpleNamespace(tts_backend="cpu"))
    assert not result.downloaded and "nothing to download" in capsys.readouterr().out
