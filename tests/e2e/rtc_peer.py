"""Scripted LiveKit rtc clients for the end-to-end tests; run inside the test namespace.

    python -m tests.e2e.rtc_peer loopback --wav F --out DIR   # two clients: one talks, one listens
    python -m tests.e2e.rtc_peer call --turns DIR --out DIR    # a caller talking to the dispatched agent

The caller behaves like a microphone: it sends audio (or digital silence) every 10 ms in real time, and
times everything on its own clock. Voice-to-voice for a turn = the moment the turn's last sample above
-50 dBFS was sent → the arrival of the first agent frame above -50 dBFS after it (DESIGN §6).
Results go to DIR/result.json; the agent's audio to DIR/agent.wav (16 kHz mono).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf
from livekit import api, rtc

from web.tokens import TokenOptions, issue_call_token

SAMPLE_RATE = 16000
FRAME = SAMPLE_RATE // 100  # 10 ms
VOICED_DBFS = -50.0
VOICED_AMPLITUDE = 32768 * 10 ** (VOICED_DBFS / 20)


def frame_dbfs(samples: np.ndarray) -> float:
    if samples.size == 0:
        return -120.0
    rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
    return 20 * np.log10(rms / 32768) if rms > 0 else -120.0


def load_wav_16k(path: Path) -> np.ndarray:
    data, sr = sf.read(str(path), dtype="int16", always_2d=True)
    if sr != SAMPLE_RATE:
        raise SystemExit(f"rtc_peer: {path} is {sr} Hz; 16 kHz expected")
    return data[:, 0].copy()


def last_voiced_index(samples: np.ndarray) -> int:
    idx = np.flatnonzero(np.abs(samples.astype(np.int32)) > VOICED_AMPLITUDE)
    return int(idx[-1]) if idx.size else -1


class Microphone:
    """Pushes 10 ms frames in real time: queued speech, else digital silence. Records send times."""

    def __init__(self, source: rtc.AudioSource) -> None:
        self.source = source
        self._pending: list[tuple[np.ndarray, asyncio.Future[float]]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def say(self, samples: np.ndarray) -> asyncio.Future[float]:
        """Queue speech; the future resolves to the send time of its last voiced sample."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._pending.append((samples, fut))
        return fut

    async def _run(self) -> None:
        silence = np.zeros(FRAME, dtype=np.int16)
        next_t = time.monotonic()
        current: np.ndarray | None = None
        pos = 0
        last_voiced = -1
        fut: asyncio.Future[float] | None = None
        while True:
            if current is None and self._pending:
                current, fut = self._pending.pop(0)
                pos, last_voiced = 0, last_voiced_index(current)
            if current is not None:
                chunk = current[pos : pos + FRAME]
                if chunk.size < FRAME:
                    chunk = np.concatenate([chunk, silence[: FRAME - chunk.size]])
            else:
                chunk = silence
            await self.source.capture_frame(rtc.AudioFrame(chunk.tobytes(), SAMPLE_RATE, 1, FRAME))
            sent = time.monotonic()
            if current is not None:
                if fut is not None and not fut.done() and pos <= last_voiced < pos + FRAME:
                    fut.set_result(sent - (FRAME - 1 - (last_voiced - pos)) / SAMPLE_RATE)
                pos += FRAME
                if pos >= current.size:
                    if fut is not None and not fut.done():
                        fut.set_result(sent)
                    current, fut = None, None
            next_t += FRAME / SAMPLE_RATE
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))


@dataclass
class Listener:
    """Records one remote audio track with arrival times per 10 ms frame."""

    frames: list[np.ndarray] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    levels: list[float] = field(default_factory=list)
    first_frame: asyncio.Event = field(default_factory=asyncio.Event)

    async def record(self, track: rtc.Track) -> None:
        stream = rtc.AudioStream(track, sample_rate=SAMPLE_RATE, num_channels=1)
        async for ev in stream:
            samples = np.frombuffer(ev.frame.data, dtype=np.int16).copy()
            self.frames.append(samples)
            self.times.append(time.monotonic())
            self.levels.append(frame_dbfs(samples))
            self.first_frame.set()

    def first_voiced_after(self, t: float) -> float | None:
        for ts, lvl in zip(self.times, self.levels, strict=False):
            if ts > t and lvl > VOICED_DBFS:
                return ts
        return None

    def last_voiced_time(self) -> float | None:
        for ts, lvl in zip(reversed(self.times), reversed(self.levels), strict=False):
            if lvl > VOICED_DBFS:
                return ts
        return None

    def audio(self) -> np.ndarray:
        return np.concatenate(self.frames) if self.frames else np.zeros(0, np.int16)

    def voiced_seconds(self) -> float:
        return sum(1 for lvl in self.levels if lvl > VOICED_DBFS) * FRAME / SAMPLE_RATE


async def wait_for(predicate: Callable[[], object], timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return bool(predicate())


def room_options() -> rtc.RoomOptions:
    # No ICE servers: the SFU's own (namespace-local) candidates are all a local call needs.
    return rtc.RoomOptions(auto_subscribe=True, rtc_config=rtc.RtcConfiguration(ice_servers=[]))


async def publish_mic(room: rtc.Room) -> Microphone:
    source = rtc.AudioSource(SAMPLE_RATE, 1)
    track = rtc.LocalAudioTrack.create_audio_track("caller-mic", source)
    opts = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
    await room.local_participant.publish_track(track, opts)
    mic = Microphone(source)
    mic.start()
    return mic


# --- loopback: the harness's own check, no agent -----------------------------------------------------------


async def loopback(args: argparse.Namespace) -> dict[str, object]:
    tok = TokenOptions(api_key=args.api_key, api_secret=args.api_secret, agent_name="")
    room_name = "loopback-" + str(int(time.time()))
    talker, listener_room = rtc.Room(), rtc.Room()
    listener = Listener()
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
    speech = load_wav_16k(Path(args.wav))
    if not await wait_for(listener.first_frame.is_set, 15):
        raise SystemExit("rtc_peer: listener got no audio frame within 15 s")
    last_sent = await mic.say(speech)
    first_heard = listener.first_voiced_after(0.0)
    await asyncio.sleep(1.0)
    await mic.stop()
    sent_voiced = float(np.mean(np.abs(speech.astype(np.int32)) > VOICED_AMPLITUDE))
    last_heard = listener.last_voiced_time()
    result = {
        "connect_ms": connect_ms,
        "received_s": len(listener.frames) * FRAME / SAMPLE_RATE,
        "voiced_received_s": listener.voiced_seconds(),
        "sent_speech_s": speech.size / SAMPLE_RATE,
        "sent_voiced_fraction": sent_voiced,
        "first_heard": first_heard is not None,
        "tail_latency_ms": (last_heard - last_sent) * 1000 if last_heard else None,
    }
    sf.write(str(Path(args.out) / "received.wav"), listener.audio(), SAMPLE_RATE, subtype="PCM_16")
    await talker.disconnect()
    await listener_room.disconnect()
    for t in tasks:
        t.cancel()
    return result


# --- call: a caller talking to the agent ------------------------------------------------------------------


@dataclass
class TurnResult:
    file: str
    v2v_ms: float | None
    reply_voiced_s: float
    reply_start_s: float | None  # position of the reply in agent.wav, for per-turn transcription
    reply_end_s: float | None


async def wait_quiet(
    listener: Listener, quiet_s: float, timeout: float, agent_state: Callable[[], str] = lambda: ""
) -> None:
    """Wait until the agent has finished its reply: not speaking or thinking, and silent for quiet_s."""

    def quiet() -> bool:
        last = listener.last_voiced_time()
        busy = agent_state() in ("speaking", "thinking")
        return last is not None and not busy and time.monotonic() - last > quiet_s

    await wait_for(quiet, timeout, step=0.05)


async def call(args: argparse.Namespace) -> dict[str, object]:
    tok = TokenOptions(api_key=args.api_key, api_secret=args.api_secret, agent_name=args.agent_name)
    room_name = args.room or "call-" + str(int(time.time()))
    token = issue_call_token(tok, room_name, "caller")
    room = rtc.Room()
    listener = Listener()
    transcripts: list[dict[str, object]] = []
    metrics: list[dict[str, object]] = []
    errors: list[str] = []
    tasks: list[asyncio.Task[None]] = []
    agent_joined = asyncio.Event()
    agent_state = {"value": ""}

    @room.on("participant_attributes_changed")
    def _on_attributes(changed: dict[str, str], p: rtc.Participant) -> None:
        if "lk.agent.state" in changed and p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            agent_state["value"] = changed["lk.agent.state"]

    @room.on("participant_connected")
    def _on_participant(p: rtc.RemoteParticipant) -> None:
        if p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            agent_joined.set()

    @room.on("track_subscribed")
    def _on_track(track: rtc.Track, _pub: object, p: rtc.RemoteParticipant) -> None:
        if track.kind == rtc.TrackKind.KIND_AUDIO:
            tasks.append(asyncio.create_task(listener.record(track)))

    @room.on("data_received")
    def _on_data(packet: rtc.DataPacket) -> None:
        if packet.topic == "parley.metrics":
            try:
                metrics.append(json.loads(packet.data))
            except ValueError:
                errors.append("malformed parley.metrics message")

    async def _read_transcript(reader: rtc.TextStreamReader, identity: str) -> None:
        text = await reader.read_all()
        attrs = reader.info.attributes or {}
        transcripts.append(
            {
                "who": "caller" if identity == token.identity else "agent",
                "segment": attrs.get("lk.segment_id", ""),
                "final": attrs.get("lk.transcription_final") == "true",
                "text": text,
                "t": time.monotonic(),
            }
        )

    def _on_transcript(reader: rtc.TextStreamReader, identity: str) -> None:
        tasks.append(asyncio.create_task(_read_transcript(reader, identity)))

    room.register_text_stream_handler("lk.transcription", _on_transcript)

    t_connect = time.monotonic()
    await room.connect(args.url, token.token, room_options())
    mic = await publish_mic(room)
    result: dict[str, object] = {"room": room_name}
    try:
        if not await wait_for(agent_joined.is_set, args.join_timeout_s) and not any(
            p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT for p in room.remote_participants.values()
        ):
            raise SystemExit(f"rtc_peer: no agent joined room {room_name} within {args.join_timeout_s:.0f} s")
        greeting = await wait_until_voiced(listener, t_connect, args.reply_timeout_s)
        result["greeting_first_audio_ms"] = (greeting - t_connect) * 1000 if greeting else None
        if greeting is None:
            errors.append("no greeting heard")
        await wait_quiet(listener, args.quiet_s, args.reply_timeout_s, lambda: agent_state["value"])

        turns: list[TurnResult] = []
        for wav in sorted(Path(args.turns).glob("*.wav"))[: args.max_turns or None]:
            t_last = await mic.say(load_wav_16k(wav))
            first = await wait_until_voiced(listener, t_last, args.reply_timeout_s)
            if first is None:
                errors.append(f"{wav.name}: no reply within {args.reply_timeout_s:.0f} s")
                turns.append(TurnResult(wav.name, None, 0.0, None, None))
                continue
            n_before = next(i for i, ts in enumerate(listener.times) if ts >= first)
            await wait_quiet(listener, args.quiet_s, args.reply_timeout_s, lambda: agent_state["value"])
            n_after = len(listener.times)
            voiced = sum(1 for lvl in listener.levels[n_before:n_after] if lvl > VOICED_DBFS)
            turns.append(
                TurnResult(
                    wav.name,
                    (first - t_last) * 1000,
                    voiced * FRAME / SAMPLE_RATE,
                    n_before * FRAME / SAMPLE_RATE,
                    n_after * FRAME / SAMPLE_RATE,
                )
            )
        result["turns"] = [asdict(t) for t in turns]
        v2v = [t.v2v_ms for t in turns if t.v2v_ms is not None]
        result["v2v_ms"] = (
            {"p50": float(np.percentile(v2v, 50)), "p95": float(np.percentile(v2v, 95))} if v2v else None
        )
        await asyncio.sleep(0.5)  # late transcripts and metrics
    finally:
        await mic.stop()
        sf.write(str(Path(args.out) / "agent.wav"), listener.audio(), SAMPLE_RATE, subtype="PCM_16")
        await room.disconnect()
        for t in tasks:
            t.cancel()
    result.update({"transcripts": transcripts, "metrics": metrics, "errors": errors})
    return result


async def wait_until_voiced(listener: Listener, after: float, timeout: float) -> float | None:
    found: list[float] = []

    def check() -> bool:
        t = listener.first_voiced_after(after)
        if t is not None:
            found.append(t)
            return True
        return False

    await wait_for(check, timeout)
    return found[0] if found else None


async def publish_metrics(args: argparse.Namespace) -> dict[str, object]:
    """Join a room and send one turn's latency through worker.room_metrics, as the worker does."""
    from worker.room_metrics import RoomMetricsPublisher, TurnLatency

    tok = TokenOptions(api_key=args.api_key, api_secret=args.api_secret, agent_name="")
    room = rtc.Room()
    await room.connect(args.url, issue_call_token(tok, args.room, "metrics-probe").token, room_options())
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
    for name in ("loopback", "call", "rooms", "publish-metrics", "hang-up"):
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
    c = sub.choices["call"]
    c.add_argument("--turns", required=True, help="folder of caller turns (*.wav, 16 kHz mono)")
    c.add_argument("--agent-name", default="parley")
    c.add_argument("--room", default="")
    c.add_argument("--max-turns", type=int, default=0)
    c.add_argument("--join-timeout-s", type=float, default=60.0)
    c.add_argument("--reply-timeout-s", type=float, default=30.0)
    c.add_argument("--quiet-s", type=float, default=1.2)
    args = parser.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    fn = {
        "loopback": loopback,
        "call": call,
        "rooms": rooms,
        "publish-metrics": publish_metrics,
        "hang-up": hang_up_check,
    }[args.mode]
    result = asyncio.run(fn(args))
    (Path(args.out) / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k not in ("transcripts", "metrics")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
