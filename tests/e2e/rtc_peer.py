"""Scripted LiveKit rtc clients for the end-to-end tests' own checks; run inside the test namespace.

    python -m tests.e2e.rtc_peer loopback --wav F --out DIR   # two clients: one talks, one listens
    python -m tests.e2e.rtc_peer rooms|publish-metrics|hang-up ...

The caller that talks to the agent is simulator/room_caller.py (the demo and `benchmarks.call --livekit`
run the same one). Results go to DIR/result.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np
import soundfile as sf
from livekit import api, rtc

from simulator.audio_io import load_turn
from simulator.room_caller import Listener, publish_mic, room_options, wait_for
from simulator.rtc_exit import exit_now
from web.tokens import TokenOptions, issue_call_token
from worker.measurement import VOICED_AMPLITUDE

SAMPLE_RATE = 16000


# --- loopback: the harness's own check, no agent -----------------------------------------------------------


async def loopback(args: argparse.Namespace) -> dict[str, object]:
    tok = TokenOptions(api_key=args.api_key, api_secret=args.api_secret, agent_name="")
    room_name = "loopback-" + str(int(time.time()))
    talker, listener_room = rtc.Room(), rtc.Room()
    listener = Listener(SAMPLE_RATE)
    tasks: list[asyncio.Task[None]] = []

    @listener_room.on("track_subscribed")
    def _on_track(track: rtc.Track, *_: object) -> None:
        if track.kind == rtc.TrackKind.KIND_AUDIO:
            tasks.append(asyncio.create_task(listener.record(track)))

    t0 = time.monotonic()
    await listener_room.connect(args.url, issue_call_token(tok, room_name, "listener").token, room_options())
    await talker.connect(args.url, issue_call_token(tok, room_name, "talker").token, room_options())
    connect_ms = (time.monotonic() - t0) * 1000
    mic = await publish_mic(talker)
    speech = load_turn(Path(args.wav))
    if not await wait_for(listener.first_frame.is_set, 15):
        raise SystemExit("rtc_peer: listener got no audio frame within 15 s")
    last_sent = await mic.say(speech).last_voiced
    first_heard = listener.first_voiced_after(0.0)
    await asyncio.sleep(1.0)
    await mic.stop()
    sent_voiced = float(np.mean(np.abs(speech.astype(np.int32)) > VOICED_AMPLITUDE))
    last_heard = listener.last_voiced_time()
    result: dict[str, object] = {
        "connect_ms": connect_ms,
        "received_s": sum(len(c) for _, c in listener.track.chunks) / SAMPLE_RATE,
        "voiced_received_s": listener.voiced_seconds(),
        "sent_speech_s": speech.size / SAMPLE_RATE,
        "sent_voiced_fraction": sent_voiced,
        "first_heard": first_heard is not None,
        "tail_latency_ms": (last_heard - last_sent) * 1000 if last_heard else None,
    }
    received = np.concatenate([c for _, c in listener.track.chunks]) if listener.track.chunks else np.zeros(0)
    sf.write(str(Path(args.out) / "received.wav"), received.astype(np.int16), SAMPLE_RATE, subtype="PCM_16")
    await talker.disconnect()
    await listener_room.disconnect()
    for t in tasks:
        t.cancel()
    return result


async def publish_metrics(args: argparse.Namespace) -> dict[str, object]:
    """Join a room and send one turn's latency through worker.turn_marks, as the worker does."""
    from worker.measurement import TurnLatency
    from worker.turn_marks import RoomMetricsPublisher

    # it speaks for the worker, so it needs the worker's data grant (a caller's token may not send data)
    grants = api.VideoGrants(room_join=True, room=args.room, can_publish_data=True, can_publish=False)
    token = (
        api.AccessToken(args.api_key, args.api_secret)
        .with_identity("metrics-probe")
        .with_grants(grants)
        .to_jwt()
    )
    room = rtc.Room()
    await room.connect(args.url, token, room_options())
    publisher = RoomMetricsPublisher(room)
    latency = TurnLatency(
        turn=args.turn, e2e_ms=812.0, stt_final_ms=205.0, llm_ttft_ms=131.0, tts_ttfb_ms=64.0
    )
    publisher.publish(latency)
    await publisher.aclose()
    await asyncio.sleep(1.0)
    await room.disconnect()
    return {"published": json.loads(latency.to_json())}


async def hang_up_check(args: argparse.Namespace) -> dict[str, object]:
    """A caller joins; worker.sip.hang_up (run by the end_call tool) must disconnect it and end the room."""
    from worker.sip import hang_up

    tok = TokenOptions(api_key=args.api_key, api_secret=args.api_secret, agent_name="")
    room = rtc.Room()
    gone = asyncio.Event()
    reason: list[str] = []

    @room.on("disconnected")
    def _on_disconnected(why: object) -> None:
        reason.append(rtc.DisconnectReason.Name(why) if isinstance(why, int) else str(why))  # type: ignore[arg-type]
        gone.set()

    await room.connect(args.url, issue_call_token(tok, args.room, "caller").token, room_options())
    http = args.url.replace("ws://", "http://", 1)
    async with api.LiveKitAPI(http, args.api_key, args.api_secret) as lkapi:
        await hang_up(lkapi, args.room)
        await asyncio.wait_for(gone.wait(), 10)
        listed = await lkapi.room.list_rooms(api.ListRoomsRequest(names=[args.room]))
        await hang_up(lkapi, args.room)  # a second hang-up of a gone room is not an error
    return {"disconnected": gone.is_set(), "reason": reason, "room_left": [r.name for r in listed.rooms]}


async def rooms(args: argparse.Namespace) -> dict[str, object]:
    """The rooms the server has now (to see a hang-up end the call's room)."""
    http = args.url.replace("ws://", "http://", 1)
    async with api.LiveKitAPI(http, args.api_key, args.api_secret) as lkapi:
        listed = await lkapi.room.list_rooms(api.ListRoomsRequest())
        result: dict[str, object] = {"rooms": []}
        for room in listed.rooms:
            people = await lkapi.room.list_participants(api.ListParticipantsRequest(room=room.name))
            kinds = [api.ParticipantInfo.Kind.Name(p.kind) for p in people.participants]
            result["rooms"].append({"name": room.name, "participants": kinds})  # type: ignore[attr-defined]
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.rtc_peer")
    sub = parser.add_subparsers(dest="mode", required=True)
    for name in ("loopback", "rooms", "publish-metrics", "hang-up"):
        p = sub.add_parser(name)
        p.add_argument("--url", default="ws://127.0.0.1:7880")
        p.add_argument("--api-key", required=True)
        p.add_argument("--api-secret", required=True)
        p.add_argument("--out", required=True)
    sub.choices["loopback"].add_argument("--wav", required=True)
    sub.choices["hang-up"].add_argument("--room", required=True)
    m = sub.choices["publish-metrics"]
    m.add_argument("--room", required=True)
    m.add_argument("--turn", type=int, default=99)
    args = parser.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    fn = {
        "loopback": loopback,
        "rooms": rooms,
        "publish-metrics": publish_metrics,
        "hang-up": hang_up_check,
    }[args.mode]
    result = asyncio.run(fn(args))
    (Path(args.out) / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k not in ("transcripts", "metrics")}))
    return 0


if __name__ == "__main__":
    exit_now(main())
