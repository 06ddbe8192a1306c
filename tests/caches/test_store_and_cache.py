from __future__ import annotations

import json
import os

import numpy as np
import pytest

from caches import CacheKey, CacheStore, CacheStoreError, PhraseCache, iter_frames, resample_pcm
from caches.store import atomic_write_bytes

from .conftest import put, tone


def test_manifest_round_trip_and_key_fields(store: CacheStore) -> None:
    e = put(store, "Okay.")
    entries = CacheStore(store.root).read_manifest(strict=True)
    assert list(entries) == [e.key.digest]
    got = entries[e.key.digest]
    assert got == e
    assert got.key == CacheKey("okay", "v", "en", "fp1", 24_000)
    pcm = store.load_audio(got)
    assert pcm is not None and np.array_equal(pcm, tone(300))


@pytest.mark.parametrize(
    "change",
    [{"voice": "w"}, {"language": "ko"}, {"fingerprint": "fp2"}, {"sample_rate": 48_000}, {"text": "ok"}],
)
def test_every_key_field_changes_the_digest(change: dict) -> None:
    base = {"text": "okay", "voice": "v", "language": "en", "fingerprint": "fp1", "sample_rate": 24_000}
    assert CacheKey(**base).digest != CacheKey(**{**base, **change}).digest
    assert CacheKey.for_text("Okay.", "v", "en", "fp1", 24_000).digest == CacheKey(**base).digest


def test_crash_during_write_leaves_old_content_and_no_temp(tmp_path, monkeypatch) -> None:
    path = tmp_path / "f.bin"
    atomic_write_bytes(path, b"old")

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_bytes(path, b"new content")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_half_written_audio_never_loads(store: CacheStore) -> None:
    e = put(store, "Okay.")
    f = store.root / e.file
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])  # what a non-atomic writer would leave after a crash
    assert store.load_audio(e) is None
    assert not store.is_intact(e)
    assert len(PhraseCache.load(store.root)) == 0


def test_altered_audio_of_same_length_never_loads(store: CacheStore) -> None:
    e = put(store, "Okay.")
    f = store.root / e.file
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    assert store.load_audio(e) is None


def test_corrupt_manifest(store: CacheStore) -> None:
    put(store, "Okay.")
    store.manifest_path.write_text('{"format": 1, "entries": {')
    assert store.read_manifest() == {}  # a builder starts over
    with pytest.raises(CacheStoreError, match="cannot read cache manifest"):
        store.read_manifest(strict=True)  # a worker says so in one line
    with pytest.raises(CacheStoreError):
        PhraseCache.load(store.root)


def test_manifest_entry_with_wrong_digest_is_ignored(store: CacheStore) -> None:
    e = put(store, "Okay.")
    raw = json.loads(store.manifest_path.read_text())
    raw["entries"]["0" * 32] = raw["entries"].pop(e.key.digest)
    store.manifest_path.write_text(json.dumps(raw))
    assert store.read_manifest() == {}


def test_remove_unreferenced_cleans_orphans_and_temps(store: CacheStore) -> None:
    e = put(store, "Okay.")
    audio = store.root / "audio"
    (audio / "orphan.wav").write_bytes(b"x")
    (audio / ".x.wav.123.tmp").write_bytes(b"x")
    assert store.remove_unreferenced(store.read_manifest()) == 2
    assert sorted(p.name for p in audio.iterdir()) == [f"{e.key.digest}.wav"]


def test_lookup_uses_build_normalisation_and_counts_hits(store: CacheStore) -> None:
    put(store, "Let me see.")
    put(store, "Let me see.", voice="w")
    cache = PhraseCache.load(store.root, voice="v")
    assert len(cache) == 1
    hit = cache.lookup("  let ME see ", "v", "en")
    assert hit is not None and hit.text == "Let me see."
    assert cache.lookup("Let me see?", "v", "en") is None
    assert cache.lookup("Let me see.", "v", "ko") is None
    assert cache.lookup("Let me see.", "w", "en") is None  # filtered out at load
    assert cache.metrics.lookups == 4 and cache.metrics.hits == 1
    assert cache.metrics.hit_rate == pytest.approx(0.25)


def test_load_filters_by_fingerprint_and_prefers_newest(store: CacheStore) -> None:
    put(store, "Okay.", fingerprint="old", ms=200)
    put(store, "Okay.", fingerprint="new", ms=400)
    assert PhraseCache.load(store.root).lookup("okay", "v", "en").duration_ms == pytest.approx(400)  # type: ignore[union-attr]
    old = PhraseCache.load(store.root, fingerprint="old").lookup("okay", "v", "en")
    assert old is not None and old.duration_ms == pytest.approx(200)
    assert len(PhraseCache.load(store.root, fingerprint="other")) == 0


def test_cached_audio_is_read_only(store: CacheStore) -> None:
    put(store, "Okay.")
    hit = PhraseCache.load(store.root, sample_rates=[48_000]).lookup("okay", "v", "en")
    assert hit is not None
    for pcm in (hit.pcm, hit.pcm_at(48_000)):
        with pytest.raises(ValueError):
            pcm[0] = 1


@pytest.mark.parametrize("rate", [8_000, 16_000, 24_000, 44_100, 48_000])
async def test_frames_are_20ms_at_the_requested_rate(store: CacheStore, rate: int) -> None:
    put(store, "Okay.", ms=1010)  # not a multiple of 20 ms: the last frame is padded
    hit = PhraseCache.load(store.root).lookup("okay", "v", "en")
    assert hit is not None
    frames = [f async for f in hit.frames(rate)]
    spf = rate // 50
    assert all(f.sample_rate == rate and f.num_channels == 1 and f.samples_per_channel == spf for f in frames)
    assert len(frames) == 51  # ceil(1010 / 20)
    pcm = np.concatenate([np.frombuffer(f.data, np.int16) for f in frames])
    n = round(1.010 * rate)
    assert np.all(pcm[n + 2 :] == 0)  # padding is silence
    # the tone survives resampling: the strongest frequency is still 440 Hz
    body = pcm[rate // 10 : rate // 10 + rate // 2].astype(np.float64)
    peak_hz = np.argmax(np.abs(np.fft.rfft(body))) * rate / len(body)
    assert abs(peak_hz - 440) < 5
    # a fresh iterator each time
    assert len([f async for f in hit.frames(rate)]) == 51


async def test_native_rate_frames_are_sample_exact() -> None:
    pcm = tone(100)
    frames = [f async for f in iter_frames(pcm, 24_000)]
    assert len(frames) == 5
    assert np.array_equal(np.concatenate([np.frombuffer(f.data, np.int16) for f in frames]), pcm)


async def test_frame_size_must_be_whole_samples() -> None:
    with pytest.raises(ValueError, match="whole number of samples"):
        await iter_frames(tone(100), 11_025, 20).__anext__()


def test_resample_keeps_duration_and_level() -> None:
    pcm = tone(500, 24_000)
    out = resample_pcm(pcm, 24_000, 48_000)
    assert len(out) == 48_000 // 2
    assert abs(np.abs(out).max() - np.abs(pcm).max()) < 400
    assert resample_pcm(pcm, 24_000, 24_000) is pcm


async def test_frames_for_miss_and_hit(store: CacheStore) -> None:
    put(store, "Okay.")
    cache = PhraseCache.load(store.root)
    assert cache.frames_for("Not cached", "v", "en") is None
    it = cache.frames_for("Okay", "v", "en", 48_000)
    assert it is not None
    first = await it.__anext__()
    assert first.sample_rate == 48_000 and first.samples_per_channel == 960


@pytest.mark.parametrize("file", ["../outside.wav", "/etc/outside.wav", "audio/../../outside.wav", "x.wav"])
def test_manifest_entry_pointing_outside_the_audio_folder_is_ignored(store: CacheStore, file: str) -> None:
    e = put(store, "Okay.")
    outside = store.root.parent / "outside.wav"
    outside.write_bytes((store.root / e.file).read_bytes())  # a real clip, right digest, wrong place
    raw = json.loads(store.manifest_path.read_text())
    raw["entries"][e.key.digest]["file"] = file
    store.manifest_path.write_text(json.dumps(raw))
    assert store.read_manifest() == {}  # never read (nor deleted by remove_unreferenced) through the cache
    assert PhraseCache.load(store.root).lookup("Okay.", "v", "en") is None
    assert outside.exists()
