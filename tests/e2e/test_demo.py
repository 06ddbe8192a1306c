"""`make demo`'s path through a real local room: `benchmarks.call --livekit` starts livekit-server and the
worker, calls through the room (here on plain loopback, what a non-root user gets), and writes the same
report, JSON, stereo WAV and timeline PNG as offline."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from simulator.call_plan import worker_failures
from simulator.room_caller import RoomCallRecord
from simulator.room_runner import room_unavailable_reason
from tests.e2e.conftest import CONVERSATION
from tests.e2e.harness import PYTHON, REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def one_turn(tmp_path: Path) -> Path:
    if not CONVERSATION.is_dir():
        pytest.skip(f"test audio not found: {CONVERSATION}")
    reason = room_unavailable_reason()
    if reason:
        pytest.skip(reason)
    data = tmp_path / "turns"
    data.mkdir()
    shutil.copy(CONVERSATION / "c1.wav", data / "c1.wav")
    return data


def test_demo_command_calls_through_a_real_room_on_plain_loopback(tmp_path: Path) -> None:
    """`make demo`'s command, on the network a non-root user gets (plain loopback; the sealed namespace
    root gets is what test_calls.py's stack uses): one call, every file the demo promises."""
    data, out = one_turn(tmp_path), tmp_path / "demo"
    cmd = [str(PYTHON), "-m", "benchmarks.call", "--data", str(data), "--pipeline", "parley"]
    cmd += ["--out", str(out), "--demo", "--livekit", "auto", "--isolation", "loopback"]
    cmd += ["--json", str(out / "call.json")]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=420)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "through a real local LiveKit room" in res.stdout, res.stdout
    assert "caller (c1.wav): " in res.stdout and "agent: " in res.stdout
    assert "latency (ms, caller's last voiced sample → event)" in res.stdout
    report = json.loads((out / "call.json").read_text())
    assert report["transport"] == "livekit-room" and report["pipeline"] == "parley"
    assert not worker_failures(report["errors"]), report["errors"]  # model-written "sorry" aside
    assert report["v2v_ms"]["p50"] is not None and report["greeting_first_audio_ms"] is not None
    assert report["turns"][0]["reply_text"]
    heard = report["replies_heard"]  # the real Whisper base listened to the reply at the caller
    assert heard["replies"] == 1 and heard["words_heard"] > 0.5 and "heard: " in res.stdout, heard
    audio, rate = sf.read(report["files"]["wav"])
    assert rate == 24000 and audio.shape[1] == 2
    assert np.abs(audio[:, 0]).max() > 0.1 and np.abs(audio[:, 1]).max() > 0.1  # caller | agent
    assert Path(report["files"]["timeline"]).stat().st_size > 10_000
    stack = out / "stack"
    assert (stack / "worker.log").is_file()  # the stack's logs stay with the demo's output
    cfg = (stack / "livekit.yaml").read_text()
    assert 'bind_addresses: ["127.0.0.1"]' in cfg and "node_ip: 127.0.0.1" in cfg
    # the caller's own WebRTC receive stats: the agent's audio waited in its jitter buffer a while, not hours
    receive = RoomCallRecord.load(stack / "round0" / "parley-turns").receive
    assert 0 < receive["jitter_buffer_ms"] < 2000 and receive["received_s"] > 1, receive


def test_demo_make_target_runs_the_room_when_available() -> None:
    # run from inside `make test` too: a nested make prints "Entering/Leaving directory" lines around it
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "demo"], capture_output=True, text=True, cwd=REPO, timeout=60
    ).stdout.splitlines()
    recipe = next((line for line in out if "benchmarks.call" in line), "")
    assert "-m benchmarks.call" in recipe and "--livekit auto" in recipe and "--out out/demo" in recipe
