"""The engine image's own file set starts and serves: nothing under plugins/ may reach for the worker.

The image holds exactly what deploy/Dockerfile.engine copies (read from the Dockerfile itself, so a new COPY
line is honoured and a file the engine needs but the image lacks fails here). The test lays that set out in a
temp dir, starts the real entrypoint there (`serve` with PARLEY_ORPHEUS_BACKEND=torch on the tiny random model
as if the weights were already in the cache volume) and synthesises through it.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import subprocess
import sys
import time
import wave
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def image_copies(dockerfile: Path) -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY line, flags dropped, line continuations joined."""
    text = dockerfile.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        words = shlex.split(line)
        if not words or words[0].upper() != "COPY":
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        out.append((args[:-1], args[-1]))
    return out


def lay_out_image(dest: Path) -> Path:
    """Copy the Dockerfile's file set into `dest` (its WORKDIR /app), as the build would."""
    copies = image_copies(ROOT / "deploy" / "Dockerfile.engine")
    assert copies, "Dockerfile.engine copies nothing?"
    for sources, target in copies:
        for src in sources:
            s = ROOT / src.rstrip("/")
            d = dest / target.lstrip("./")
            if s.is_dir():
                shutil.copytree(
                    s, d, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True
                )
            else:
                d = d / s.name if target.endswith("/") else d
                d.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(s, d)
    return dest


def test_dockerfile_copy_parse_sees_the_engine_sources() -> None:
    copies = image_copies(ROOT / "deploy" / "Dockerfile.engine")
    sources = {s for srcs, _ in copies for s in srcs}
    assert "plugins/" in sources and "deploy/engine-entrypoint.sh" in sources


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_image_starts_the_measured_backend_unless_asked() -> None:
    """The GPU checks measured `cuda`; `trtllm` has never run on a GPU, so the operator must ask for it."""
    import re

    docker = (ROOT / "deploy" / "Dockerfile.engine").read_text()
    assert re.findall(r"^\s+PARLEY_ORPHEUS_BACKEND=(\w+)\s*$", docker, re.M) == ["cuda"]  # the ENV line
    entry = (ROOT / "deploy" / "engine-entrypoint.sh").read_text()
    assert 'backend="${PARLEY_ORPHEUS_BACKEND:-cuda}"' in entry


def test_no_plugin_module_imports_the_worker() -> None:
    """Plugins take explicit options; the engine image has no worker/ to import (lazy imports included)."""
    offenders = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in sorted((ROOT / "plugins").rglob("*.py"))
        for name in _imports(p)
        if name == "worker" or name.startswith("worker.")
    ]
    assert offenders == []


def _wait_ready(proc: subprocess.Popen[str], port: int, timeout_s: float) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"engine exited {proc.returncode}: {proc.stderr.read()[-2000:] if proc.stderr else ''}"
            )
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("engine did not become ready")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_engine_image_file_set_serves_with_backend_from_env(test_model: Path, tmp_path: Path) -> None:
    app = lay_out_image(tmp_path / "app")
    assert not (app / "worker").exists()
    cache = tmp_path / "models"
    for repo, part in (("canopylabs--orpheus-3b-0.1-ft", "orpheus"), ("hubertsiuzdak--snac_24khz", "snac")):
        shutil.copytree(test_model / part, cache / "hf" / repo)  # weights already in the cache volume
        (cache / "hf" / repo / ".parley-complete").write_text("x")
    sock, port = tmp_path / "engine.sock", _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_") and k not in ("PYTHONPATH",)}
    env.update(
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",  # `python` = this interpreter
        PARLEY_MODEL_CACHE_DIR=str(cache),
        PARLEY_ENGINE_ADDRESS=f"unix://{sock}",
        PARLEY_ENGINE_HTTP_PORT=str(port),
        PARLEY_ENGINE_MAX_STREAMS="2",
        PARLEY_ORPHEUS_BACKEND="torch",
        PARLEY_ORPHEUS_DEVICE="cpu",
        PYTHONDONTWRITEBYTECODE="1",
    )
    entry = app / "deploy" / "engine-entrypoint.sh"
    proc = subprocess.Popen(
        ["bash", str(entry), "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_ready(proc, port, 240)
        wav = tmp_path / "out.wav"
        res = subprocess.run(
            [
                "bash",
                str(entry),
                "synth",
                "--address",
                f"unix://{sock}",
                "--text",
                "Hello there.",
                "--out",
                str(wav),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert res.returncode == 0, res.stderr[-2000:]
        with wave.open(str(wav)) as w:
            assert w.getframerate() == 24000 and w.getnframes() > 2048
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "No module named 'worker'" not in (proc.stderr.read() if proc.stderr else "")


def test_engine_entrypoint_refuses_an_unknown_backend(tmp_path: Path) -> None:
    app = lay_out_image(tmp_path / "app")
    env = {**os.environ, "PARLEY_ORPHEUS_BACKEND": "vllm", "PARLEY_MODEL_CACHE_DIR": str(tmp_path / "m")}
    res = subprocess.run(
        ["bash", str(app / "deploy" / "engine-entrypoint.sh"), "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].startswith("error: PARLEY_ORPHEUS_BACKEND")


@pytest.mark.parametrize("var,value", [("PARLEY_ENGINE_MAX_STREAMS", "0"), ("PARLEY_ENGINE_HTTP_PORT", "x")])
def test_bad_engine_setting_is_one_line(var: str, value: str) -> None:
    env = {**os.environ, var: value}
    res = subprocess.run(
        [sys.executable, "-m", "plugins.orpheus", "serve", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {var}:")
