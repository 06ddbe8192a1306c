"""One caller for the multi-node test, run inside the test's network namespace.

Joins one room through one livekit-server node with the Parley agent dispatched in its token. Reports (one
JSON line each on stdout) when the agent joins and when it publishes its voice track, stays in the call,
and on SIGTERM (the test's "hang up") deletes the room through the server API, which ends the agent's job.
It also reports if the agent leaves early.

    python -m tests.deploy.mn_caller --url ws://10.77.0.1:7880 --room mn-01 --api-key K --api-secret S
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

from livekit import api, rtc

from simulator.rtc_exit import exit_now
from web.tokens import TokenOptions, issue_call_token


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def is_agent(p: rtc.RemoteParticipant) -> bool:
    return p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT


async def run(args: argparse.Namespace) -> int:
    hangup = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, hangup.set)
    opts = TokenOptions(api_key=args.api_key, api_secret=args.api_secret, agent_name=args.agent_name)
    call = issue_call_token(opts, room=args.room, identity=f"caller-{args.room}")

    room = rtc.Room()
    agent_seen = asyncio.Event()

    def on_join(p: rtc.RemoteParticipant) -> None:
        if is_agent(p) and not agent_seen.is_set():
            agent_seen.set()
            emit("agent", room=args.room, identity=p.identity)

    audio_seen = asyncio.Event()

    def on_publish(pub: rtc.RemoteTrackPublication, p: rtc.RemoteParticipant) -> None:
        if is_agent(p) and pub.kind == rtc.TrackKind.KIND_AUDIO and not audio_seen.is_set():
            audio_seen.set()
            emit("agent_audio", room=args.room, identity=p.identity)

    def on_leave(p: rtc.RemoteParticipant) -> None:
        if is_agent(p) and not hangup.is_set():
            emit("agent_left", room=args.room, identity=p.identity)

    room.on("participant_connected", on_join)
    room.on("participant_disconnected", on_leave)
    room.on("track_published", on_publish)
    started = time.monotonic()
    options = rtc.RoomOptions(auto_subscribe=False, rtc_config=rtc.RtcConfiguration(ice_servers=[]))
    await room.connect(args.url, call.token, options=options)
    emit("joined", room=args.room)
    for p in room.remote_participants.values():
        on_join(p)
        for pub in p.track_publications.values():
            on_publish(pub, p)
    try:
        await asyncio.wait_for(agent_seen.wait(), args.agent_timeout)
    except TimeoutError:
        emit("no_agent", room=args.room, waited_s=round(time.monotonic() - started, 1))
    await hangup.wait()
    http_url = args.url.replace("ws://", "http://").replace("wss://", "https://")
    async with api.LiveKitAPI(http_url, args.api_key, args.api_secret) as lk:
        await lk.room.delete_room(api.DeleteRoomRequest(room=args.room))
    emit("hung_up", room=args.room)
    await room.disconnect()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--room", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--api-secret", required=True)
    parser.add_argument("--agent-name", default="parley")
    parser.add_argument("--agent-timeout", type=float, default=90.0)
    args = parser.parse_args()
    try:
        return asyncio.run(run(args))
    except Exception as err:  # one line for the test's failure message
        print(f"mn_caller: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    exit_now(main())
