"""Phone calls: sipp places an inbound call through livekit-sip; the agent answers over RTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.conftest import (
    CONVERSATION,
    WORKER_CMD,
    WORKER_ENV,
    close_and_check_sealed,
    record_figure,
    start_stack,
    ulaw_wav,
)
from tests.e2e.harness import API_KEY, API_SECRET, PYTHON, REPO, E2EStack, missing_reason
from tests.e2e.sip_phone import place_call, rtp_stream, ulaw_decode, voice_to_voice_ms

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NUMBER = "+15550100"


def test_ulaw_decoding_matches_g711() -> None:
    assert ulaw_decode(bytes([0xFF, 0x7F])).tolist() == [0, 0]
    assert ulaw_decode(bytes([0x80, 0x00])).tolist() == [32124, -32124]
    assert ulaw_decode(bytes([0xFE, 0x7E, 0xEF])).tolist() == [8, -8, 132]  # the smallest steps


def caller_audio(tmp_path: Path, turns: int = 1, gap_s: float = 0.0) -> Path:
    """The first conversation turns as one 8 kHz μ-law WAV (what a phone would send)."""
    missing = missing_reason("sox")
    if missing:
        pytest.skip(missing)
    src = sorted(CONVERSATION.glob("*.wav"))[:turns]
    joined = tmp_path / "caller16k.wav"
    subprocess.run(["sox", *map(str, src), str(joined), "pad", "0", str(gap_s)], check=True)
    return ulaw_wav(joined, tmp_path / "caller_ulaw.wav")


def sip_setup(stack: E2EStack) -> dict:
    res = stack.run_in_ns(
        [
            str(PYTHON),
            str(REPO / "scripts" / "sip_setup.py"),
            "--number",
            NUMBER,
            "--allowed-address",
            f"{stack.ns.phone_ip}/32",  # the phone, from its own namespace
            "--agent-name",
            stack.opts.agent_name,
            "--url",
            stack.livekit_url,
            "--api-key",
            API_KEY,
            "--api-secret",
            API_SECRET,
        ],
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-1500:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_sipp_streams_ulaw_rtp_that_the_capture_decodes(tmp_path: Path) -> None:
    """The phone side on its own: sipp calls a sipp answerer; the capture shows the caller's speech."""
    reason = missing_reason("sipp")
    if reason:
        pytest.skip(reason)
    wav = caller_audio(tmp_path)
    stack = start_stack(tmp_path)
    try:
        ip = stack.ns.host_ip
        uas_cmd = [
            "sipp",
            "-sn",
            "uas",
            "-i",
            ip,
            "-p",
            "5062",
            "-mi",
            ip,
            "-mp",
            "6000",
            "-nostdin",
            "-m",
            "1",
        ]
        answerer = stack.spawn(
            "sipp-uas",
            uas_cmd,
        )
        time.sleep(0.5)
        call = place_call(stack, f"{stack.ns.host_ip}:5062", NUMBER, wav, 5500, local_ip=stack.ns.phone_ip)
        assert call.returncode == 0, call.output
        answerer.stop()
        close_and_check_sealed(stack)
    finally:
        stack.close()
    sent = rtp_stream(stack.capture_path, stack.ns.phone_ip, call.media_port, to_phone=False)
    # c1 is ~4.5 s: ~225 packets of 20 ms, most of them speech
    assert sent.packets > 150, sent.packets
    assert sent.voiced_packets > 80, sent.voiced_packets


def test_sip_route_setup_is_idempotent(tmp_path: Path) -> None:
    stack = start_stack(tmp_path, with_redis=True)
    try:
        first = sip_setup(stack)
        again = sip_setup(stack)
    finally:
        stack.close()
    assert first["created"] and not again["created"]
    assert (first["trunk_id"], first["rule_id"]) == (again["trunk_id"], again["rule_id"])
    assert first["trunk_id"].startswith("ST_") and first["rule_id"].startswith("SDR_")


def rooms(stack: E2EStack) -> list[dict]:
    res = stack.run_in_ns(
        [
            *(str(PYTHON), "-m", "tests.e2e.rtc_peer", "rooms", "--url", stack.livekit_url),
            *("--api-key", API_KEY, "--api-secret", API_SECRET, "--out", str(stack.opts.out_dir / "rooms")),
        ],
        timeout=30,
    )
    assert res.returncode == 0, res.stderr[-800:]
    return json.loads(res.stdout.strip().splitlines()[-1])["rooms"]


def test_phone_call_through_livekit_sip(tmp_path: Path) -> None:
    reason = missing_reason("sipp", "sox")
    if reason:
        pytest.skip(reason)
    wav = caller_audio(tmp_path, turns=2, gap_s=0.0)
    stack = start_stack(
        tmp_path, with_sip=True, with_worker=True, worker_env=WORKER_ENV, worker_cmd=WORKER_CMD
    )
    try:
        sip_setup(stack)
        # greeting, then turn 1 streams right away; hold the line long enough for both replies
        call = place_call(stack, stack.sip_address, NUMBER, wav, hold_ms=30_000, local_ip=stack.ns.phone_ip)
        assert call.returncode == 0, call.output
        # hang-up ends the room: the agent leaves with the caller and the room closes
        deadline = time.monotonic() + 30
        left = rooms(stack)
        while left and time.monotonic() < deadline:
            time.sleep(1)
            left = rooms(stack)
        assert not left, f"rooms still open after the caller hung up: {left}"
        close_and_check_sealed(stack)
    finally:
        stack.close()
    back = rtp_stream(stack.capture_path, stack.ns.phone_ip, call.media_port, to_phone=True)
    assert back.packets > 100, "no RTP came back to the phone"
    assert back.voiced_packets > 25, "the RTP that came back is silent"
    sent = rtp_stream(stack.capture_path, stack.ns.phone_ip, call.media_port, to_phone=False)
    v2v = voice_to_voice_ms(sent, back)
    print(json.dumps({"sip_v2v_ms": v2v}), file=sys.stderr)
    assert v2v, "no reply after the caller's speech"
    record_figure("sip_v2v_ms", {"p50": float(np.percentile(v2v, 50)), "turns": v2v})
