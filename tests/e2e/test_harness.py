"""The harness itself, through real components: a sealed namespace, livekit-server, two rtc clients."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.harness import API_KEY, API_SECRET, PYTHON, ComponentMissing, E2EStack, StackOptions

CONVERSATION = Path(__file__).resolve().parents[3] / "shared" / "audio" / "conversation"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_audio_crosses_a_local_room_and_no_packet_leaves(tmp_path: Path) -> None:
    stack = E2EStack(StackOptions(out_dir=tmp_path))
    try:
        stack.start()
    except ComponentMissing as why:
        stack.close()
        pytest.skip(str(why))
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
    finally:
        stack.close()
    print(json.dumps(result), file=sys.stderr)
    assert result["first_heard"]
    # the speech that was sent arrives as speech (Opus keeps the voiced stretch within a few frames)
    voiced_sent = result["sent_speech_s"] * result["sent_voiced_fraction"]
    assert result["voiced_received_s"] > 0.5 * voiced_sent
    assert stack.packet_count() > 100, "the capture saw no traffic: is it on the right namespace?"
    leaks = stack.foreign_packets()
    assert not leaks, f"{len(leaks)} packets left the namespace, first: {leaks[:3]}"
