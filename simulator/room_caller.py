"""The scripted caller: a real rtc participant in a local LiveKit room, run as its own process.

    python -m simulator.room_caller caller --url ws://… --api-key K --api-secret S --turn F.wav … --out DIR

It joins with a token that dispatches the agent, sends its turns as real-time 10 ms microphone frames
(digital silence in between), and records every frame it sent and received on the machine's monotonic clock,
plus both sides' transcripts and the worker's marks (`worker/measurement.py`). `simulator.room_result` turns
that record into a `CallResult`; `simulator.room_runner` starts the stack and this process.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import logging
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from livekit import rtc

from worker.measurement import (
    MARKS_TOPIC,
    METRICS_TOPIC,
    MarkFormatError,
    SpeechStart,
    decode_mark,
    frame_voiced,
    last_voiced_sample,
    mark_message,
    parse_mark,
)
from worker.measurement import Mark as WorkerMark

from .audio_io import Track, load_turn
from .call_plan import TurnPlan, default_filler_texts, is_filler_text, norm_text, plan_from_json
from .rtc_exit import exit_now

log = logging.getLogger("parley.sim.room_caller")

MIC_RATE = 16_000
AGENT_RATE = 24_000
FRAME_S = 0.01
OPUS_RATE = 48_000  # WebRTC counts received and concealed samples at the decoder's rate
RECORD_JSON = "record.json"
RECORD_AUDIO = "audio.npz"


# --- the caller's devices -----------------------------------------------------------------------------------


def last_voiced_index(samples: np.ndarray, rate: int = MIC_RATE) -> int:
    """Index of the last sample of the last 10 ms window above −50 dBFS RMS (the rule every mark of the
    benchmark uses, DESIGN §6), −1 when there is none."""
    end = last_voiced_sample(np.asarray(samples, np.int16), rate)
    return -1 if end is None else end - 1


@dataclass
class Utterance:
    """One queued turn: resolves when its first frame and its last voiced sample were sent."""

    samples: np.ndarray
    started: asyncio.Future[float]
    last_voiced: asyncio.Future[float]
    queued_s: float = 0.0  # audio still in the source's queue when the last voiced frame went in


class Microphone:
    """Pushes 10 ms frames in real time, queued speech else digital silence, recording what it sent
    (with send times) in `track`.

    A real microphone hands over audio as it is captured; this loop can fall behind (connecting, a busy
    event loop) and then pushes a burst to catch up, which leaves the audio source holding that much audio
    ahead of real time for the rest of the call, a delay no caller has (the source's own count read 90-105
    ms at every turn's last voiced sample; 12-27 ms once drained, the worker's VAD end ~10-20 ms sooner).
    Between utterances silence frames are skipped while the source is ahead, so each turn starts drained."""

    def __init__(self, source: rtc.AudioSource, sample_rate: int = MIC_RATE) -> None:
        self.source = source
        self.rate = sample_rate
        self.frame = sample_rate // 100
        self.track = Track(sample_rate)
        self._pending: list[Utterance] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def say(self, samples: np.ndarray) -> Utterance:
        loop = asyncio.get_running_loop()
        utt = Utterance(np.asarray(samples, np.int16), loop.create_future(), loop.create_future())
        self._pending.append(utt)
        return utt

    async def _run(self) -> None:
        silence = np.zeros(self.frame, dtype=np.int16)
        next_t = time.monotonic()
        current: Utterance | None = None
        pos, last_voiced = 0, -1
        while True:
            if current is None and self._pending:
                current = self._pending.pop(0)
                pos, last_voiced = 0, last_voiced_index(current.samples)
            if current is None and self.source.queued_duration > FRAME_S:
                next_t += self.frame / self.rate  # ahead of real time: let the source drain
                await asyncio.sleep(max(0.0, next_t - time.monotonic()))
                continue
            chunk = silence
            if current is not None:
                chunk = current.samples[pos : pos + self.frame]
                if chunk.size < self.frame:
                    chunk = np.concatenate([chunk, silence[: self.frame - chunk.size]])
            sent = time.monotonic()
            await self.source.capture_frame(rtc.AudioFrame(chunk.tobytes(), self.rate, 1, self.frame))
            self.track.add(sent, chunk)
            if current is not None:
                if pos == 0 and not current.started.done():
                    current.started.set_result(sent)
                if pos <= last_voiced < pos + self.frame and not current.last_voiced.done():
                    current.queued_s = self.source.queued_duration
                    current.last_voiced.set_result(sent + (last_voiced - pos + 1) / self.rate)
                pos += self.frame
                if pos >= current.samples.size:
                    if not current.last_voiced.done():  # a silent turn: its end
                        current.last_voiced.set_result(sent + FRAME_S)
                    current = None
            next_t += self.frame / self.rate
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))


class Listener:
    """Records one remote audio track with the arrival time of every frame.

    The caller asks when the agent was first heard after a time every 20 ms of a call: the voiced frames'
    times are kept sorted apart, so each answer is a bisection, not a scan of the whole call so far (a
    scan cost each caller a growing share of a core as its call went on)."""

    def __init__(self, rate: int = AGENT_RATE) -> None:
        self.rate = rate
        self.track = Track(rate)
        self.voiced_at: list[float] = []  # arrival times of the voiced frames, in order
        self._voiced_samples = 0
        self.first_frame = asyncio.Event()

    async def record(self, track: rtc.Track) -> None:
        stream = rtc.AudioStream(track, sample_rate=self.rate, num_channels=1)
        async for ev in stream:
            samples = np.frombuffer(ev.frame.data, dtype=np.int16).copy()
            now = time.monotonic()
            self.track.add(now, samples)
            if frame_voiced(ev.frame.data, self.rate):
                self.voiced_at.append(now)
                self._voiced_samples += samples.size
            self.first_frame.set()

    def first_voiced_after(self, t: float) -> float | None:
        i = bisect.bisect_right(self.voiced_at, t)
        return self.voiced_at[i] if i < len(self.voiced_at) else None

    def last_voiced_time(self) -> float | None:
        return self.voiced_at[-1] if self.voiced_at else None

    def voiced_seconds(self) -> float:
        return self._voiced_samples / self.rate


async def wait_for(predicate: Callable[[], object], timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return bool(predicate())


def room_options() -> rtc.RoomOptions:
    # No ICE servers: the server's local candidates are all a local call needs (no STUN request).
    return rtc.RoomOptions(auto_subscribe=True, rtc_config=rtc.RtcConfiguration(ice_servers=[]))


async def publish_mic(room: rtc.Room) -> Microphone:
    source = rtc.AudioSource(MIC_RATE, 1)
    track = rtc.LocalAudioTrack.create_audio_track("caller-mic", source)
    await room.local_participant.publish_track(
        track, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
    )
    mic = Microphone(source)
    mic.start()
    return mic


# --- what the caller saw ----------------------------------------------------------------------------------


@dataclass
class SentTurn:
    file: str
    start: float  # first frame sent
    last_voiced: float  # send time of the last sample above −50 dBFS
    replied: bool = True
    start_mode: str = "after_reply"
    mic_queue_ms: float = 0.0  # how far behind real time the caller's audio source was at that sample


@dataclass
class Transcript:
    who: Literal["caller", "agent"]
    text: str
    final: bool
    opened: float  # the stream's header arrived (for agent speech: about when its audio starts)
    closed: float


@dataclass
class RoomCallRecord:
    """Everything the caller observed, on the machine's monotonic clock (shared by all processes)."""

    room: str
    t_connect: float
    end: float
    greeting_first_audio: float | None
    turns: list[SentTurn]
    transcripts: list[Transcript]
    metrics: list[tuple[float, dict[str, Any]]]  # (arrival, parley.metrics message)
    errors: list[str]
    mic: Track
    agent: Track
    marks: list[WorkerMark] = field(default_factory=list)  # the worker's parley.marks records
    receive: dict[str, float] = field(default_factory=dict)  # receive_stats(): the caller's jitter buffer
    hung_up: float | None = None  # when the agent ended the call (the room went away), if it did

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        meta = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("mic", "agent")}
        meta |= {
            "turns": [asdict(t) for t in self.turns],
            "transcripts": [asdict(t) for t in self.transcripts],
            "marks": [mark_message(m) for m in self.marks],
        }
        (out / RECORD_JSON).write_text(json.dumps(meta, indent=1))
        arrays = {**_pack(self.mic, "mic"), **_pack(self.agent, "agent")}
        np.savez(out / RECORD_AUDIO, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls, out: Path) -> RoomCallRecord:
        meta = json.loads((out / RECORD_JSON).read_text())
        with np.load(out / RECORD_AUDIO) as z:
            mic, agent = _unpack(z, "mic"), _unpack(z, "agent")
        meta.update(
            turns=[SentTurn(**t) for t in meta["turns"]],
            transcripts=[Transcript(**t) for t in meta["transcripts"]],
            metrics=[(float(t), m) for t, m in meta["metrics"]],
            marks=[parse_mark(m) for m in meta.get("marks", [])],
        )
        return cls(**meta, mic=mic, agent=agent)


def _pack(track: Track, name: str) -> dict[str, np.ndarray]:
    pcm = [c for _, c in track.chunks]
    return {
        f"{name}_pcm": np.concatenate(pcm) if pcm else np.zeros(0, np.int16),
        f"{name}_t": np.array([t for t, _ in track.chunks], np.float64),
        f"{name}_len": np.array([len(c) for c in pcm], np.int64),
        f"{name}_rate": np.array(track.sample_rate),
    }


def _unpack(z: Any, name: str) -> Track:
    track = Track(int(z[f"{name}_rate"]))
    pcm, pos = z[f"{name}_pcm"], 0
    for t, n in zip(z[f"{name}_t"], z[f"{name}_len"], strict=True):
        track.add(float(t), pcm[pos : pos + n])
        pos += int(n)
    return track


ANSWER_AFTER_JOIN_S = 0.5  # an answering callee speaks this long after the agent joined


@dataclass(frozen=True)
class CallerOptions:
    url: str
    token: str
    identity: str
    room: str
    join_timeout_s: float = 60.0
    reply_timeout_s: float = 30.0
    quiet_s: float = 0.6  # after its reply's transcript closed: agent silent this long = reply over
    filler_texts: frozenset[str] = frozenset()  # agent lines that are fillers, not the reply
    settle_s: float = 0.4  # then the caller waits this long before its next turn
    stay_s: float = 0.0  # after the script, stay on the line this long or until the agent ends the call
    answers: bool = False
    """The agent placed the call (worker/outbound.py): the first turn is said as soon as the agent listens,
    without waiting for a greeting (the pick-up line, or an answering machine's greeting)."""


async def call_in_room(opts: CallerOptions, turns: Sequence[Path | TurnPlan]) -> RoomCallRecord:
    """Join, wait for the agent's greeting, say each turn after the agent's previous reply (or over it, for
    a `during_reply` turn), and record."""
    plan = [t if isinstance(t, TurnPlan) else TurnPlan(t) for t in turns]
    marks: list[WorkerMark] = []
    room = rtc.Room()
    listener = Listener()
    transcripts: list[Transcript] = []
    metrics: list[tuple[float, dict[str, Any]]] = []
    errors: list[str] = []
    tasks: list[asyncio.Task[None]] = []
    agent_joined = asyncio.Event()
    agent_state = {"value": ""}
    hung_up: list[float] = []  # when the room went away under the caller (the agent ended the call)

    def is_agent(p: rtc.Participant) -> bool:
        return p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT

    @room.on("participant_attributes_changed")
    def _on_attributes(changed: dict[str, str], p: rtc.Participant) -> None:
        if "lk.agent.state" in changed and is_agent(p):
            agent_state["value"] = changed["lk.agent.state"]

    @room.on("participant_connected")
    def _on_participant(p: rtc.RemoteParticipant) -> None:
        if is_agent(p):
            agent_joined.set()

    @room.on("track_subscribed")
    def _on_track(track: rtc.Track, _pub: object, _p: rtc.RemoteParticipant) -> None:
        if track.kind == rtc.TrackKind.KIND_AUDIO:
            tasks.append(asyncio.create_task(listener.record(track)))

    @room.on("data_received")
    def _on_data(packet: rtc.DataPacket) -> None:
        if packet.topic == METRICS_TOPIC:
            try:
                metrics.append((time.monotonic(), json.loads(packet.data)))
            except ValueError:
                errors.append(f"malformed {METRICS_TOPIC} message")
        elif packet.topic == MARKS_TOPIC:
            try:
                marks.append(decode_mark(packet.data))
            except MarkFormatError as err:
                errors.append(str(err))

    async def _read(reader: rtc.TextStreamReader, who: Literal["caller", "agent"], opened: float) -> None:
        text = await reader.read_all()
        final = (reader.info.attributes or {}).get("lk.transcription_final") == "true"
        transcripts.append(Transcript(who, text, final, opened, time.monotonic()))

    def _on_transcript(reader: rtc.TextStreamReader, identity: str) -> None:
        who: Literal["caller", "agent"] = "caller" if identity == opts.identity else "agent"
        tasks.append(asyncio.create_task(_read(reader, who, time.monotonic())))

    room.register_text_stream_handler("lk.transcription", _on_transcript)

    @room.on("disconnected")
    def _on_disconnected(_reason: object) -> None:
        hung_up.append(time.monotonic())

    def busy() -> bool:
        return agent_state["value"] in ("speaking", "thinking")

    norm_fillers = {norm_text(t) for t in opts.filler_texts}

    async def wait_reply_done(since: float) -> None:
        """Like the offline harness: the agent's reply (not a filler) is over, it is not speaking or
        thinking, and it has been silent for quiet_s."""

        def done() -> bool:
            last = listener.last_voiced_time()
            replied = any(
                t.closed > since and t.who == "agent" and not is_filler_text(t.text, norm_fillers)
                for t in transcripts
            )
            return replied and last is not None and not busy() and time.monotonic() - last > opts.quiet_s

        await wait_for(done, opts.reply_timeout_s, step=0.05)

    t_connect = time.monotonic()
    await room.connect(opts.url, opts.token, room_options())
    mic = await publish_mic(room)
    sent: list[SentTurn] = []
    greeting: float | None = None
    receive: dict[str, float] = {}
    try:
        joined = await wait_for(agent_joined.is_set, opts.join_timeout_s) or any(
            is_agent(p) for p in room.remote_participants.values()
        )
        if not joined:
            raise CallerError(f"no agent joined room {opts.room} within {opts.join_timeout_s:.0f} s")
        if opts.answers:
            # a callee speaks the moment the line opens, while the agent's session is still being built;
            # half a second lets the agent's subscription to this track settle (a SIP callee's audio
            # reaches an agent already in the room)
            await asyncio.sleep(ANSWER_AFTER_JOIN_S)
        else:
            await wait_for(lambda: listener.first_voiced_after(t_connect), opts.reply_timeout_s)
            greeting = listener.first_voiced_after(t_connect)
            if greeting is None:
                errors.append("no greeting heard")
            await wait_reply_done(t_connect)
            await asyncio.sleep(opts.settle_s)

        def reply_heard_after(t: float) -> float | None:
            """When the caller heard the reply (not a filler) that started after t; a worker without marks:
            any agent audio after t."""
            if not any(isinstance(m, SpeechStart) for m in marks):
                return listener.first_voiced_after(t)
            starts = [m.t for m in marks if isinstance(m, SpeechStart) and m.source == "reply" and m.t > t]
            return listener.first_voiced_after(min(starts)) if starts else None

        async def after_reply(prev: SentTurn, delay_ms: float | None) -> None:
            if not await wait_for(
                partial(listener.first_voiced_after, prev.last_voiced), opts.reply_timeout_s
            ):
                prev.replied = False  # reported per turn
            else:
                await wait_reply_done(prev.last_voiced)
            await asyncio.sleep(opts.settle_s if delay_ms is None else delay_ms / 1000)

        for i, item in enumerate(plan):
            if hung_up:  # the agent ended the call (a full host's busy line, an end-of-call tool)
                break
            if i > 0 and item.start == "during_reply":
                prev = sent[-1]
                if not await wait_for(partial(reply_heard_after, prev.last_voiced), opts.reply_timeout_s):
                    prev.replied = False
                await asyncio.sleep((item.delay_ms or 0.0) / 1000)
            elif i > 0:
                await after_reply(sent[-1], item.delay_ms)
            utt = mic.say(load_turn(item.path, MIC_RATE))
            last = await utt.last_voiced
            sent.append(
                SentTurn(
                    item.path.name,
                    utt.started.result(),
                    last,
                    start_mode=item.start,
                    mic_queue_ms=round(utt.queued_s * 1000, 1),
                )
            )
            # read while the agent answers, not in the gap before the next turn; cumulative, and the agent
            # may hang up (the room goes) before the call's end
            receive = await receive_stats(room) or receive
        if sent:
            await after_reply(sent[-1], None)
        if opts.stay_s > 0:
            await wait_for(lambda: hung_up, opts.stay_s, step=0.05)
        await asyncio.sleep(0.5)  # late transcripts, metrics and marks
        if not hung_up:
            receive = await receive_stats(room) or receive
    finally:
        ended_by_agent = hung_up[0] if hung_up else None
        await mic.stop()
        await room.disconnect()
        for t in tasks:
            t.cancel()
    return RoomCallRecord(
        room=opts.room,
        t_connect=t_connect,
        end=time.monotonic(),
        greeting_first_audio=greeting,
        turns=sent,
        transcripts=sorted(transcripts, key=lambda x: x.opened),
        metrics=metrics,
        errors=errors,
        mic=mic.track,
        agent=listener.track,
        marks=marks,
        receive=receive,
        hung_up=ended_by_agent,
    )


async def receive_stats(room: rtc.Room) -> dict[str, float]:
    """The caller's WebRTC receive side for the agent's audio, from the session's own stats.

    `jitter_buffer_ms` is the mean time a sample of the agent's audio waited in the caller's jitter buffer
    (NetEq) before it was played: it grows when the agent's packets arrive in bursts, and it is part of
    every v2v figure. Empty when the stats cannot be read (an older rtc library): the call still counts."""
    try:
        stats = await room.get_rtc_stats()
    except Exception:
        return {}
    # the server may carry both directions on one peer connection: look in both lists
    for s in [*stats.subscriber_stats, *stats.publisher_stats]:
        if s.WhichOneof("stats") != "inbound_rtp" or s.inbound_rtp.stream.kind != "audio":
            continue
        inbound = s.inbound_rtp.inbound
        emitted = inbound.jitter_buffer_emitted_count
        if emitted <= 0:
            continue
        return {
            "jitter_buffer_ms": round(1000 * inbound.jitter_buffer_delay / emitted, 1),
            "jitter_buffer_target_ms": round(1000 * inbound.jitter_buffer_target_delay / emitted, 1),
            "concealed_s": round(inbound.concealed_samples / OPUS_RATE, 2),
            "received_s": round(inbound.total_samples_received / OPUS_RATE, 2),
        }
    return {}


class CallerError(RuntimeError):
    """The call could not happen (no agent came); the message is one line."""


# --- the caller process -------------------------------------------------------------------------


async def _caller_main(args: argparse.Namespace) -> int:
    from web.tokens import TokenOptions, issue_call_token

    tok = TokenOptions(
        api_key=args.api_key,
        api_secret=args.api_secret,
        agent_name=args.agent_name,
        agent_metadata=args.dispatch_metadata,
    )
    # seconds alone collide when several callers start in the same second (benchmarks.load --livekit)
    room = args.room or f"call-{int(time.time())}-{secrets.token_hex(3)}"
    token = issue_call_token(tok, room, "caller")
    opts = CallerOptions(
        url=args.url,
        token=token.token,
        identity=token.identity,
        room=room,
        join_timeout_s=args.join_timeout_s,
        reply_timeout_s=args.reply_timeout_s,
        filler_texts=frozenset(default_filler_texts()),
        stay_s=args.stay_s,
        answers=args.answers,
    )
    turns = [TurnPlan(Path(t)) for t in args.turn]
    if args.plan:
        turns += plan_from_json(json.loads(Path(args.plan).read_text()))
    missing = [str(t.path) for t in turns if not t.path.is_file()]
    if missing:
        print(f"caller: no such turn file: {missing[0]}", file=sys.stderr)
        return 2
    try:
        record = await call_in_room(opts, turns)
    except CallerError as err:
        print(f"caller: {err}", file=sys.stderr)
        return 1
    record.save(Path(args.out))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator.room_caller", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("caller", help="the scripted rtc caller (run inside the stack's network)")
    c.add_argument("--url", required=True)
    c.add_argument("--api-key", required=True)
    c.add_argument("--api-secret", required=True)
    c.add_argument("--agent-name", default="parley")
    c.add_argument("--room", default="")
    c.add_argument("--turn", action="append", default=[], help="a caller turn WAV (repeat, in order)")
    c.add_argument("--plan", help="the turns as JSON (simulator.call_plan.plan_to_json), after any --turn")
    c.add_argument(
        "--stay-s",
        type=float,
        default=0.0,
        help="after the turns, stay on the line this long or until hung up on",
    )
    c.add_argument("--dispatch-metadata", default="", help="the agent dispatch's job metadata (JSON)")
    c.add_argument("--answers", action="store_true", help="the agent placed this call: speak first")
    c.add_argument("--out", required=True, help="folder for record.json and audio.npz")
    c.add_argument("--join-timeout-s", type=float, default=60.0)
    c.add_argument("--reply-timeout-s", type=float, default=30.0)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    return asyncio.run(_caller_main(args))


if __name__ == "__main__":
    exit_now(main())
