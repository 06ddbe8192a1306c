"""The harness itself, through real components: a sealed namespace, livekit-server, two rtc clients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import CONVERSATION, close_and_check_sealed, start_stack
from tests.e2e.harness import API_KEY, API_SECRET, PYTHON, Netns, missing_reason

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_audio_crosses_a_local_room_and_no_packet_leaves(tmp_path: Path) -> None:
    stack = start_stack(tmp_path)
    try:
        res = stack.run_in_ns(
            [
                str(PYTHON),
                "-m",
                "tests.e2e.rtc_peer",
                "loopback",
                "--url",
                stack.livekit_url,
                "--api-key",
                API_KEY,
                "--api-secret",
                API_SECRET,
                "--wav",
                str(CONVERSATION / "c1.wav"),
                "--out",
                str(tmp_path),
            ],
            timeout=90,
        )
        assert res.returncode == 0, res.stderr[-2000:]
        result = json.loads((tmp_path / "result.json").read_text())
        assert result["first_heard"]
        # the speech that was sent arrives as speech (Opus keeps the voiced stretch within a few frames)
        voiced_sent = result["sent_speech_s"] * result["sent_voiced_fraction"]
        assert result["voiced_received_s"] > 0.5 * voiced_sent
        close_and_check_sealed(stack)
    finally:
        stack.close()


def test_namespace_is_sealed_and_removed(tmp_path: Path) -> None:
    reason = missing_reason("netns")
    if reason:
        pytest.skip(reason)
    ns = Netns(name=f"parley-e2e-seal-{tmp_path.name[-8:]}")
    ns.create()
    try:
        ns.check_sealed()  # only lo + our veth pair, no default route
        # nothing outside is reachable: a documentation address has no route from inside
        probe = ns.run(["ip", "route", "get", "192.0.2.1"])
        assert probe.returncode != 0 and "unreachable" in probe.stderr.lower()
    finally:
        ns.destroy()
    listed = ns.run(["true"])  # the namespace is gone
    assert listed.returncode != 0


def test_hang_up_disconnects_the_caller_and_ends_the_room(tmp_path: Path) -> None:
    """worker.sip.hang_up, which the end_call tool runs after the goodbye, against the real server."""
    stack = start_stack(tmp_path)
    try:
        res = stack.run_in_ns(
            [
                *(str(PYTHON), "-m", "tests.e2e.rtc_peer", "hang-up", "--room", "hang-up-check"),
                *("--url", stack.livekit_url, "--api-key", API_KEY, "--api-secret", API_SECRET),
                *("--out", str(tmp_path)),
            ],
            timeout=60,
        )
        assert res.returncode == 0, res.stderr[-1500:]
        result = json.loads((tmp_path / "result.json").read_text())
    finally:
        stack.close()
    assert result["disconnected"] and result["room_left"] == [], result
    assert result["reason"] == ["ROOM_DELETED"], result
