"""`python -m plugins.orpheus synth` and `serve` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plugins.orpheus", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty text"),
        ("   \t\n", "empty text"),
        ("😀🎉🔥", "nothing speakable"),
        ("\x01\x02\x1b\x7f\u200b", "nothing speakable"),
        ("Привет мир", "nothing speakable"),
        ("x" * 6000, "too long"),
    ],
)
def test_synth_hostile_text_is_one_line_error(
    text: str, message: str, tmp_path: Path, test_model: Path
) -> None:
    proc = run("synth", "--test-model", str(test_model), "--text", text, "--out", str(tmp_path / "x.wav"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "x.wav").exists()


def test_synth_bad_voice_and_missing_args(tmp_path: Path, test_model: Path) -> None:
    proc = run("synth", "--test-model", str(test_model), "--text", "Hi there.", "--voice", "nobody")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "unknown voice" in proc.stderr
    proc = run("synth", "--test-model", str(test_model))
    assert proc.returncode == 2 and proc.stderr.strip() == "error: give --text or --text-file"


@pytest.mark.slow
def test_synth_text_file_writes_one_wav_per_line_and_reports_bad_lines(
    tmp_path: Path, test_model: Path
) -> None:
    lines = ["Hello there, <laugh> friend!", "", "😀", "It costs $5 at 3:30 pm.", 42]
    src = tmp_path / "lines.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines if x != "") + "\n", encoding="utf-8")
    out = tmp_path / "wavs"
    proc = run("synth", "--test-model", str(test_model), "--text-file", str(src), "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [
        "error: line 2: nothing speakable in text (no words in a supported script)",
        "error: line 4: each line must be a JSON string",
    ]
    for name in ("001.wav", "003.wav"):
        audio, rate = sf.read(out / name, dtype="int16")
        assert rate == 24000 and audio.size > 2048
    assert not (out / "002.wav").exists()


@pytest.mark.slow
def test_serve_and_synth_through_the_server(tmp_path: Path, test_model: Path) -> None:
    sock = tmp_path / "engine.sock"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plugins.orpheus",
            "serve",
            "--test-model",
            str(test_model),
            "--address",
            f"unix://{sock}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not sock.exists() and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.2)
        assert sock.exists(), server.stderr.read() if server.poll() is not None else "no socket"
        out = tmp_path / "via.wav"
        proc = run("synth", "--address", f"unix://{sock}", "--text", "Through the server.", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        audio, rate = sf.read(out, dtype="int16")
        assert rate == 24000 and audio.size > 2048
        proc = run("synth", "--address", f"unix://{sock}", "--text", "🙂", "--out", str(out))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert server.poll() is None, "the server stays up"
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(30)
    assert server.returncode == 0


def test_dtype_auto_is_bf16_on_cuda_and_fp32_on_cpu() -> None:
    from plugins.orpheus.__main__ import resolve_dtype

    assert resolve_dtype("auto", "cuda") == "bfloat16" and resolve_dtype("auto", "cuda:1") == "bfloat16"
    assert resolve_dtype("auto", "cpu") == "float32"
    assert resolve_dtype("float16", "cuda") == "float16"  # an explicit choice is kept
