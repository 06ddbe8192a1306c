"""The on-disk phrase cache: one manifest plus one WAV per phrase, every write atomic.

Layout of a cache directory:
    manifest.json          {"format": 1, "entries": {<key digest>: {...}}}
    audio/<digest>.wav     int16 mono PCM at the entry's sample rate

A file is written to a temporary name in the same directory, fsynced, then `os.replace`d into place, and the
manifest records each file's SHA-256; a crash at any point leaves either the old file, the new file, or a
temporary file that nothing references — never a half file that loads. No livekit import here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import soundfile as sf

from .keys import phrase_key as normalise_text

log = logging.getLogger("parley.caches")

MANIFEST_NAME = "manifest.json"
AUDIO_DIR = "audio"
FORMAT_VERSION = 1


class CacheStoreError(RuntimeError):
    """The cache directory cannot be read or written (one-line reason)."""


@dataclass(frozen=True)
class CacheKey:
    """What makes two cached clips interchangeable: same words, voice, language, model and sample rate."""

    text: str  # normalised (see normalise_text)
    voice: str
    language: str
    fingerprint: str
    sample_rate: int

    @classmethod
    def for_text(cls, text: str, voice: str, language: str, fingerprint: str, sample_rate: int) -> CacheKey:
        return cls(normalise_text(text), voice, language, fingerprint, int(sample_rate))

    @property
    def digest(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:32]


@dataclass(frozen=True)
class ManifestEntry:
    key: CacheKey
    source_text: str  # the text as written in the phrase set (what was synthesised)
    kind: str
    file: str  # relative to the cache root
    sha256: str
    num_samples: int
    created_at: float

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "key": asdict(self.key)}

    @classmethod
    def from_json(cls, d: dict) -> ManifestEntry:
        return cls(
            key=CacheKey(**d["key"]),
            source_text=str(d["source_text"]),
            kind=str(d["kind"]),
            file=str(d["file"]),
            sha256=str(d["sha256"]),
            num_samples=int(d["num_samples"]),
            created_at=float(d["created_at"]),
        )


def _inside_audio_dir(file: str) -> bool:
    """Whether a manifest's `file` names a clip in the cache's audio folder. A manifest is data a cache
    builder (or whoever can write the folder) made: `../`, absolute paths or links elsewhere must never
    make a worker read, or `remove_unreferenced` consider, a file outside the cache."""
    parts = PurePosixPath(file).parts
    return (
        len(parts) == 2
        and parts[0] == AUDIO_DIR
        and parts[1] not in (".", "..")
        and not parts[1].startswith(".")
        and parts[1].endswith(".wav")
        and "\\" not in file
    )


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see either the old content or all of the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def encode_wav(pcm: np.ndarray, sample_rate: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.asarray(pcm, dtype=np.int16), sample_rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


class CacheStore:
    """A cache directory: read/write the manifest and the audio it points to."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_NAME

    def read_manifest(self, *, strict: bool = False) -> dict[str, ManifestEntry]:
        """Entries by key digest; a missing manifest is empty, a corrupt one too (or an error if strict)."""
        try:
            raw = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            if strict:
                raise CacheStoreError(f"cannot read cache manifest {self.manifest_path}: {e}") from None
            log.warning("cache manifest unreadable, starting from empty", extra={"path": str(self.root)})
            return {}
        if not isinstance(raw, dict) or raw.get("format") != FORMAT_VERSION:
            if strict:
                raise CacheStoreError(f"cache manifest {self.manifest_path} has an unknown format")
            return {}
        entries: dict[str, ManifestEntry] = {}
        for digest, d in (raw.get("entries") or {}).items():
            try:
                entry = ManifestEntry.from_json(d)
            except (KeyError, TypeError, ValueError):
                continue  # one bad entry costs one phrase, not the cache
            if entry.key.digest == digest and _inside_audio_dir(entry.file):
                entries[digest] = entry
        return entries

    def write_manifest(self, entries: dict[str, ManifestEntry]) -> None:
        body = {
            "format": FORMAT_VERSION,
            "entries": {k: e.to_json() for k, e in sorted(entries.items())},
        }
        atomic_write_bytes(self.manifest_path, json.dumps(body, ensure_ascii=False, indent=1).encode())

    def write_audio(self, key: CacheKey, source_text: str, kind: str, pcm: np.ndarray) -> ManifestEntry:
        """Store one clip atomically and return its manifest entry (the caller writes the manifest)."""
        pcm = np.asarray(pcm, dtype=np.int16).reshape(-1)
        data = encode_wav(pcm, key.sample_rate)
        rel = f"{AUDIO_DIR}/{key.digest}.wav"
        atomic_write_bytes(self.root / rel, data)
        return ManifestEntry(
            key=key,
            source_text=source_text,
            kind=kind,
            file=rel,
            sha256=hashlib.sha256(data).hexdigest(),
            num_samples=len(pcm),
            created_at=time.time(),
        )

    def load_audio(self, entry: ManifestEntry) -> np.ndarray | None:
        """The entry's int16 PCM, or None when the file is missing, altered or truncated."""
        try:
            data = (self.root / entry.file).read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            return None
        try:
            pcm, rate = sf.read(io.BytesIO(data), dtype="int16", always_2d=False)
        except (RuntimeError, sf.LibsndfileError):
            return None
        if rate != entry.key.sample_rate or pcm.ndim != 1 or len(pcm) != entry.num_samples:
            return None
        return pcm

    def is_intact(self, entry: ManifestEntry) -> bool:
        try:
            data = (self.root / entry.file).read_bytes()
        except OSError:
            return False
        return hashlib.sha256(data).hexdigest() == entry.sha256

    def remove_unreferenced(self, entries: dict[str, ManifestEntry]) -> int:
        """Delete audio files and leftover temporary files that no manifest entry points to."""
        keep = {self.root / e.file for e in entries.values()}
        removed = 0
        audio = self.root / AUDIO_DIR
        candidates = list(audio.glob("*.wav")) + list(audio.glob(".*.tmp")) + list(self.root.glob(".*.tmp"))
        for path in candidates:
            if path not in keep:
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed += 1
        return removed

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive lock for builders (two builds into one directory wait for each other)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as e:
            raise CacheStoreError(f"cannot use cache directory {self.root}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
