"""A scripted call through a real local LiveKit room (`benchmarks.call --livekit`, `make demo`).

    python -m benchmarks.livekit_call caller --url ws://… --api-key K --api-secret S --turn F.wav … --out DIR

The runner (`run_livekit_call`) starts livekit-server and the Parley worker (benchmarks.livekit_stack: a
sealed network namespace when root, else plain loopback), then runs the caller above as its own process in
that network. The caller is a real rtc participant: it joins with a token that dispatches the agent, sends
its turns as real-time 10 ms microphone frames (digital silence in between), and records every frame it sent
and received on the machine's monotonic clock, plus both sides' transcripts and the worker's per-turn
latency messages. `to_call_result` turns that record into the offline harness's `CallResult`, so the same
report, JSON, stereo WAV and timeline PNG come out.

Voice-to-voice is measured at the caller (DESIGN §6): the send time of a turn's last sample above −50 dBFS →
the arrival of the first agent frame above −50 dBFS after it that is not a cached filler (an agent
transcript segment whose text is a filler phrase marks its audio as a filler window). `stt_final_ms` is the
arrival of the caller's final transcript; `endpoint_ms`, `llm_ttft_ms` and `tts_ttfb_ms` are the worker's
own figures for the reply (room message `parley.metrics`), durations on the agent side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import soundfile as sf
from livekit import rtc

from worker.turn_marks import answer_offset_s  # the worker's rule for where an answer starts

from .audio_io import Loudspeaker, ScriptedMic, Track, first_voiced_sample, last_voiced_sample, voiced_seconds
from .call_plan import TurnPlan, agent_fixed_lines, plan_from_json, plan_to_json, reply_problem
from .harness import CallResult, Mark, TurnResult
from .livekit_stack import (
    API_KEY,
    API_SECRET,
    PYTHON,
    REPO,
    ComponentMissing,
    E2EStack,
    StackError,
    StackOptions,
    livekit_server_problem,
    netns_available,
)

log = logging.getLogger("parley.bench.livekit_call")

MIC_RATE = 16_000
AGENT_RATE = 24_000
FRAME_S = 0.01
VOICED_DBFS = -50.0
METRICS_TOPIC = "parley.metrics"
MARKS_TOPIC = "parley.marks"  # worker/turn_marks.py
RECORD_JSON = "record.json"
RECORD_AUDIO = "audio.npz"


# --- the caller's devices -----------------------------------------------------------------------------------


def _voiced_frame(pcm: np.ndarray) -> bool:
    if pcm.size == 0:
        return False
    rms = float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2)))
    return rms > 0 and 20 * np.log10(rms / 32768) > VOICED_DBFS


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
    """Records one remote audio track with the arrival time of every frame."""

    def __init__(self, rate: int = AGENT_RATE) -> None:
        self.rate = rate
        self.track = Track(rate)
        self.voiced: list[bool] = []
        self.first_frame = asyncio.Event()

    async def record(self, track: rtc.Track) -> None:
        stream = rtc.AudioStream(track, sample_rate=self.rate, num_channels=1)
        async for ev in stream:
            samples = np.frombuffer(ev.frame.data, dtype=np.int16).copy()
            self.track.add(time.monotonic(), samples)
            self.voiced.append(_voiced_frame(samples))
            self.first_frame.set()

    def first_voiced_after(self, t: float) -> float | None:
        for (ts, _), v in zip(self.track.chunks, self.voiced, strict=False):
            if ts > t and v:
                return ts
        return None

    def last_voiced_time(self) -> float | None:
        for (ts, _), v in zip(reversed(self.track.chunks), reversed(self.voiced), strict=False):
            if v:
                return ts
        return None

    def voiced_seconds(self) -> float:
        return (
            sum(len(pcm) for (_, pcm), v in zip(self.track.chunks, self.voiced, strict=False) if v)
            / self.rate
        )


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


def load_wav_16k(path: Path) -> np.ndarray:
    data, sr = sf.read(str(path), dtype="int16", always_2d=True)
    pcm = data[:, 0].copy()
    if sr != MIC_RATE:
        import soxr

        pcm = soxr.resample(pcm, sr, MIC_RATE).astype(np.int16)
    return np.asarray(pcm, np.int16)


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
    marks: list[dict[str, Any]] = field(default_factory=list)  # the worker's parley.marks messages

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        meta = {
            "room": self.room,
            "t_connect": self.t_connect,
            "end": self.end,
            "greeting_first_audio": self.greeting_first_audio,
            "turns": [asdict(t) for t in self.turns],
            "transcripts": [asdict(t) for t in self.transcripts],
            "metrics": [[t, m] for t, m in self.metrics],
            "errors": self.errors,
            "marks": self.marks,
        }
        (out / RECORD_JSON).write_text(json.dumps(meta, indent=1))
        arrays = {**_pack(self.mic, "mic"), **_pack(self.agent, "agent")}
        np.savez(out / RECORD_AUDIO, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls, out: Path) -> RoomCallRecord:
        meta = json.loads((out / RECORD_JSON).read_text())
        with np.load(out / RECORD_AUDIO) as z:
            mic, agent = _unpack(z, "mic"), _unpack(z, "agent")
        return cls(
            room=meta["room"],
            t_connect=meta["t_connect"],
            end=meta["end"],
            greeting_first_audio=meta["greeting_first_audio"],
            turns=[SentTurn(**t) for t in meta["turns"]],
            transcripts=[Transcript(**t) for t in meta["transcripts"]],
            metrics=[(float(t), m) for t, m in meta["metrics"]],
            errors=list(meta["errors"]),
            mic=mic,
            agent=agent,
            marks=list(meta.get("marks", [])),
        )


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


async def call_in_room(opts: CallerOptions, turns: Sequence[Path | TurnPlan]) -> RoomCallRecord:
    """Join, wait for the agent's greeting, say each turn after the agent's previous reply (or over it, for
    a `during_reply` turn), and record."""
    plan = [t if isinstance(t, TurnPlan) else TurnPlan(t) for t in turns]
    marks: list[dict[str, Any]] = []
    room = rtc.Room()
    listener = Listener()
    transcripts: list[Transcript] = []
    metrics: list[tuple[float, dict[str, Any]]] = []
    errors: list[str] = []
    tasks: list[asyncio.Task[None]] = []
    agent_joined = asyncio.Event()
    agent_state = {"value": ""}

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
                marks.append(json.loads(packet.data))
            except ValueError:
                errors.append(f"malformed {MARKS_TOPIC} message")

    async def _read(reader: rtc.TextStreamReader, who: Literal["caller", "agent"], opened: float) -> None:
        text = await reader.read_all()
        final = (reader.info.attributes or {}).get("lk.transcription_final") == "true"
        transcripts.append(Transcript(who, text, final, opened, time.monotonic()))

    def _on_transcript(reader: rtc.TextStreamReader, identity: str) -> None:
        who: Literal["caller", "agent"] = "caller" if identity == opts.identity else "agent"
        tasks.append(asyncio.create_task(_read(reader, who, time.monotonic())))

    room.register_text_stream_handler("lk.transcription", _on_transcript)

    def busy() -> bool:
        return agent_state["value"] in ("speaking", "thinking")

    norm_fillers = {_norm(t) for t in opts.filler_texts}

    async def wait_reply_done(since: float) -> None:
        """Like the offline harness: the agent's reply (not a filler) is over, it is not speaking or
        thinking, and it has been silent for quiet_s."""

        def done() -> bool:
            last = listener.last_voiced_time()
            replied = any(
                t.closed > since and t.who == "agent" and not _is_filler(t, norm_fillers) for t in transcripts
            )
            return replied and last is not None and not busy() and time.monotonic() - last > opts.quiet_s

        await wait_for(done, opts.reply_timeout_s, step=0.05)

    t_connect = time.monotonic()
    await room.connect(opts.url, opts.token, room_options())
    mic = await publish_mic(room)
    sent: list[SentTurn] = []
    greeting: float | None = None
    try:
        joined = await wait_for(agent_joined.is_set, opts.join_timeout_s) or any(
            is_agent(p) for p in room.remote_participants.values()
        )
        if not joined:
            raise CallerError(f"no agent joined room {opts.room} within {opts.join_timeout_s:.0f} s")
        await wait_for(lambda: listener.first_voiced_after(t_connect), opts.reply_timeout_s)
        greeting = listener.first_voiced_after(t_connect)
        if greeting is None:
            errors.append("no greeting heard")
        await wait_reply_done(t_connect)
        await asyncio.sleep(opts.settle_s)

        def reply_heard_after(t: float) -> float | None:
            """When the caller heard the reply (not a filler) that started after t; a worker without marks:
            any agent audio after t."""
            if not any(m.get("kind") == "speech_start" for m in marks):
                return listener.first_voiced_after(t)
            starts = [
                float(m["t"])
                for m in marks
                if m.get("kind") == "speech_start" and m.get("source") == "reply" and float(m["t"]) > t
            ]
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
            if i > 0 and item.start == "during_reply":
                prev = sent[-1]
                if not await wait_for(partial(reply_heard_after, prev.last_voiced), opts.reply_timeout_s):
                    prev.replied = False
                await asyncio.sleep((item.delay_ms or 0.0) / 1000)
            elif i > 0:
                await after_reply(sent[-1], item.delay_ms)
            utt = mic.say(load_wav_16k(item.path))
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
        if sent:
            await after_reply(sent[-1], None)
        await asyncio.sleep(0.5)  # late transcripts, metrics and marks
    finally:
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
    )


class CallerError(RuntimeError):
    """The call could not happen (no agent came); the message is one line."""


# --- the record as the offline harness's CallResult ---------------------------------------------------------

_WORD = re.compile(r"[^\w']+")


def _norm(text: str) -> str:
    return " ".join(_WORD.sub(" ", text.lower()).split())


def _is_filler(tr: Transcript, norm_fillers: set[str]) -> bool:
    return tr.who == "agent" and _norm(tr.text) in norm_fillers


def filler_windows(
    record: RoomCallRecord, filler_texts: set[str], lead_s: float = 0.3
) -> list[tuple[float, float]]:
    """When the agent played a cached filler: its transcript segment's lifetime (padded before, since the
    audio may arrive a moment before the text)."""
    norm = {_norm(t) for t in filler_texts}
    return [(tr.opened - lead_s, tr.closed) for tr in record.transcripts if _is_filler(tr, norm)]


def _first_voiced(track: Track, after: float, before: float, skip: list[tuple[float, float]]) -> float | None:
    for start, pcm in track.chunks:
        if start < after or start >= before:
            continue
        if any(a <= start < b for a, b in skip):
            continue
        idx = first_voiced_sample(pcm, track.sample_rate)
        if idx is not None:
            return start + idx / track.sample_rate
    return None


def _metric_ms(msg: dict[str, Any] | None, key: str) -> float | None:
    v = msg.get(key) if msg else None
    return float(v) if isinstance(v, int | float) else None


USER_MARKS = ("vad_end", "end_of_turn", "stt_final")
REPLY_MARKS = (
    "llm_request",
    "llm_first_token",
    "tts_text",
    "tts_first_audio",
    "published_first",
    "published_first_voiced",
    "answer_published",
)


def _reply_speeches(record: RoomCallRecord) -> list[dict[str, Any]]:
    """The worker's reply speeches (not greetings, fillers or hold lines), in the order they went out."""
    found = [
        m
        for m in record.marks
        if m.get("kind") == "speech"
        and m.get("source") == "reply"
        and "published_first" in m.get("marks", {})
    ]
    return sorted(found, key=lambda m: float(m["marks"]["published_first"]))


def _first_heard(track: Track, at: float, before: float) -> float | None:
    """The first voiced 10 ms the caller received at or after `at` (the agent handed that audio out then;
    the room path only delays it, so nothing earlier than `at` can be it)."""
    for start, pcm in track.chunks:
        if start < at or start >= before:
            continue
        idx = first_voiced_sample(pcm, track.sample_rate)
        if idx is not None:
            return start + idx / track.sample_rate
    return None


def _answer_heard(track: Track, reply: dict[str, Any], hi: float) -> float | None:
    """When the caller heard the answer: the reply's first voiced audio as it arrived, then as far into it
    as the answer lies in the reply's own audio (the room plays it out in real time). Publish times alone
    would be off by the output's queue (up to 200 ms) when the answer starts mid-reply."""
    start = reply["marks"].get("published_first_voiced")
    if start is None:
        return None
    first = _first_heard(track, float(start), hi)
    if first is None:
        return None
    offsets = reply.get("offsets_s") or {}
    into = float(offsets.get("answer_published", 0.0)) - float(offsets.get("published_first_voiced", 0.0))
    if "answer_published" not in offsets and reply.get("pieces"):  # an older worker: from its pieces
        into = answer_offset_s([(str(p), float(d)) for p, d in reply["pieces"]])
    if into <= 0.0:
        return first
    return _first_heard(track, first + into - 0.01, hi)


def spoken_end(turn: SentTurn) -> float:
    """When the turn's last voiced sample left the scripted caller for WebRTC: the zero of every mark.

    The caller hands 10 ms frames to its audio source, which plays them out in real time. When the caller's
    process is descheduled (it shares the host's cores with the worker it measures), it catches up with a
    burst and the source holds the surplus: measured at 4 calls on 2 cores, p50 20-34 ms, p90 60-100 ms, up
    to 280 ms. A real caller's microphone does not queue behind a benchmark's scheduling, so that wait is
    not the agent's latency; one frame of queue is the normal hand-over and stays counted."""
    return turn.last_voiced + max(0.0, turn.mic_queue_ms / 1000 - FRAME_S)


def _turn_from_marks(
    tr: TurnResult,
    record: RoomCallRecord,
    reply: dict[str, Any] | None,
    end: float,
    hi: float,
    marks_hi: float,
) -> None:
    """Every mark of one turn, in ms after the caller's last voiced sample; the answer found by source."""
    stamps: dict[str, float] = {}
    for m in record.marks:
        if m.get("kind") == "user" and m.get("mark") in USER_MARKS and end < float(m["t"]) < marks_hi:
            stamps.setdefault(str(m["mark"]), float(m["t"]))
    if reply is not None:
        for k in REPLY_MARKS:
            if k in reply["marks"]:
                stamps[k] = float(reply["marks"][k])
        heard = _answer_heard(record.agent, reply, hi)
        if heard is not None:
            stamps["caller_first_voiced"] = heard
            tr.v2v_ms = (heard - end) * 1000
        tr.reply_text = str(reply.get("text", "")).strip()
        tr.reply_words = int(reply.get("words", len(tr.reply_text.split())))
        tr.spoken_s = float(reply.get("spoken_s", 0.0))
    audible = _first_voiced(record.agent, end, hi, [])
    if audible is not None:
        stamps["caller_first_audible"] = audible
    tr.marks = {k: (v - end) * 1000 for k, v in stamps.items()}
    mic_queue = next((t.mic_queue_ms for t in record.turns if spoken_end(t) == end), 0.0)
    tr.marks["caller_mic_queue"] = mic_queue
    tr.endpoint_ms = tr.marks.get("end_of_turn")
    eot = stamps.get("end_of_turn")
    if eot is not None and "llm_first_token" in stamps:
        tr.llm_ttft_ms = (stamps["llm_first_token"] - eot) * 1000
    if "tts_text" in stamps and "tts_first_audio" in stamps:
        tr.tts_ttfb_ms = (stamps["tts_first_audio"] - stamps["tts_text"]) * 1000


def to_call_result(
    record: RoomCallRecord, filler_texts: set[str] | None = None, pipeline: str = "parley"
) -> CallResult:
    """The same `CallResult` the offline harness builds, so report.py and the JSON contract apply as is.

    With the worker's marks (worker/turn_marks.py) the answer is the first voiced audio of the reply speech
    that the worker handed out; without them (an older worker) cached-filler transcripts are skipped."""
    fillers = filler_windows(record, filler_texts or set())
    norm_fillers = {_norm(t) for t in filler_texts or set()}
    replies = _reply_speeches(record)
    has_marks = any(m.get("kind") == "speech" for m in record.marks)
    lines = agent_fixed_lines()
    # CallResult wants devices; these two hold only what the caller sent and heard
    mic = ScriptedMic(sample_rate=record.mic.sample_rate)
    mic.track = record.mic
    speaker = Loudspeaker(sample_rate=record.agent.sample_rate)
    speaker.track = record.agent
    marks: list[Mark] = []
    results: list[TurnResult] = []
    for i, sent in enumerate(record.turns):
        last = i + 1 == len(record.turns)
        hi = record.end + 1 if last else record.turns[i + 1].start
        next_end = record.end + 1 if last else spoken_end(record.turns[i + 1])
        end = spoken_end(sent)
        tr = TurnResult(file=sent.file, speech_start=sent.start, speech_end=end, start=sent.start_mode)
        marks += [Mark("speech_start", sent.start, sent.file), Mark("speech_end", end, sent.file)]
        audible = _first_voiced(record.agent, end, hi, [])
        tr.first_audible_ms = (audible - end) * 1000 if audible is not None else None
        finals = [
            t for t in record.transcripts if t.who == "caller" and t.final and sent.start <= t.closed < hi
        ]
        if finals:
            tr.stt_final_ms = (finals[0].closed - end) * 1000
            marks.append(Mark("stt_final", finals[0].closed))
        tr.user_text = " ".join(t.text.strip() for t in finals if t.text.strip())
        if has_marks:
            # a reply belongs to the turn it followed: it went out after this turn's end, before the next's
            reply = next((r for r in replies if end < float(r["marks"]["published_first"]) < next_end), None)
            _turn_from_marks(tr, record, reply, end, hi, next_end)
        else:
            audio = _first_voiced(record.agent, end, hi, fillers)
            tr.v2v_ms = (audio - end) * 1000 if audio is not None else None
            replies_t = [
                t
                for t in record.transcripts
                if t.who == "agent" and sent.start <= t.opened < hi and not _is_filler(t, norm_fillers)
            ]
            tr.reply_text = " ".join(t.text.strip() for t in replies_t if t.text.strip())
            tr.reply_words = len(tr.reply_text.split())
            tr.spoken_s = voiced_seconds(record.agent, end, hi)
            msg = next(
                (m for t, m in reversed(record.metrics) if sent.start <= t < hi and m.get("turn")), None
            )
            tr.endpoint_ms = _metric_ms(msg, "end_of_turn_ms")
            tr.llm_ttft_ms = _metric_ms(msg, "llm_ttft_ms")
            tr.tts_ttfb_ms = _metric_ms(msg, "tts_ttfb_ms")
        tr.problem = reply_problem(tr.reply_text, lines)
        if not sent.replied:
            tr.error = "no reply within timeout"
        elif tr.v2v_ms is None and sent.start_mode == "after_reply":
            tr.error = "no reply speech found"  # a turn said over the agent may rightly get none
        results.append(tr)
    greeting = record.greeting_first_audio
    return CallResult(
        pipeline=pipeline,
        t0=record.t_connect,
        greeting_first_audio_ms=(greeting - record.t_connect) * 1000 if greeting is not None else None,
        turns=results,
        marks=sorted(marks, key=lambda m: m.t),
        mic=mic,
        speaker=speaker,
        filler_windows=fillers,
        errors=list(record.errors),
        end=record.end,
    )


def default_filler_texts() -> set[str]:
    """Every acknowledgement and hold line of the phrase set (what the worker may play as a filler)."""
    from caches.phrases import load_phrases

    phrases = load_phrases()
    out: set[str] = set()
    for kinds in [
        *phrases.defaults.values(),
        *(v for by in phrases.voice_overrides.values() for v in by.values()),
    ]:
        for kind in ("acknowledgement", "hold"):
            out.update(kinds.get(kind, ()))  # type: ignore[call-overload]
    return out


# --- the runner: stack + worker + caller ---------------------------------------------------------


@dataclass(frozen=True)
class LiveKitCallOptions:
    out_dir: Path  # logs, server config and the caller's record
    isolation: Literal["auto", "netns", "loopback"] = "auto"  # auto: netns when allowed, else loopback
    base_env: Mapping[str, str] = field(default_factory=dict)  # e.g. the caller's PARLEY_* settings
    worker_env: Mapping[str, str] = field(default_factory=dict)
    capture: bool = False  # netns only: capture and check that no packet left the namespace
    join_timeout_s: float = 90.0
    reply_timeout_s: float = 30.0
    worker_ready_timeout_s: float = 180.0
    call_timeout_s: float = 600.0


def room_unavailable_reason() -> str | None:
    """One line saying why a real local room cannot be used here, or None when it can."""
    problem = livekit_server_problem()
    if problem:
        return problem
    if not (REPO / "worker.py").is_file():
        return "worker.py is not in this checkout"
    return None


def stack_options(opts: LiveKitCallOptions, with_worker: bool = True) -> StackOptions:
    isolation = opts.isolation
    if isolation == "auto":
        isolation = "netns" if netns_available() else "loopback"
    return StackOptions(
        out_dir=opts.out_dir,
        isolation=isolation,
        with_worker=with_worker,
        capture=opts.capture and isolation == "netns",
        base_env=dict(opts.base_env),
        worker_env=dict(opts.worker_env),
        worker_ready_timeout_s=opts.worker_ready_timeout_s,
    )


def run_caller(
    stack: E2EStack,
    turns: Sequence[Path | TurnPlan],
    out: Path,
    opts: LiveKitCallOptions,
    agent_name: str | None = None,
) -> RoomCallRecord:
    """Run the caller as its own process inside the stack's network and read back what it recorded."""
    plan = [t if isinstance(t, TurnPlan) else TurnPlan(t) for t in turns]
    out.mkdir(parents=True, exist_ok=True)
    plan_file = out / "plan.json"
    plan_file.write_text(json.dumps(plan_to_json(plan)))
    cmd = [
        str(PYTHON),
        "-m",
        "benchmarks.livekit_call",
        "caller",
        *("--url", stack.livekit_url, "--api-key", API_KEY, "--api-secret", API_SECRET),
        *("--agent-name", agent_name or stack.opts.agent_name, "--out", str(out)),
        *("--join-timeout-s", str(opts.join_timeout_s), "--reply-timeout-s", str(opts.reply_timeout_s)),
        *("--plan", str(plan_file)),
    ]
    res = stack.run_in_ns(cmd, timeout=opts.call_timeout_s)
    if res.returncode != 0:
        lines = (res.stderr or res.stdout).strip().splitlines()
        raise CallerError(f"the caller failed: {lines[-1] if lines else f'exit code {res.returncode}'}")
    return RoomCallRecord.load(out)


def run_call_on_stack(
    stack: E2EStack,
    turns: Sequence[Path | TurnPlan],
    out: Path,
    opts: LiveKitCallOptions | None = None,
    pipeline: str = "parley",
    agent_name: str | None = None,
) -> CallResult:
    """One scripted call through a stack that is already up (with its worker)."""
    opts = opts or LiveKitCallOptions(out_dir=out)
    record = run_caller(stack, turns, out, opts, agent_name)
    return to_call_result(record, default_filler_texts(), pipeline=pipeline)


def run_livekit_call(turns: Sequence[Path | TurnPlan], opts: LiveKitCallOptions) -> CallResult:
    """Start a local stack (server + worker), make one scripted call through it, tear it all down."""
    stack = E2EStack(stack_options(opts))
    t = time.monotonic()
    with stack:
        log.info(
            "local LiveKit stack up",
            extra={"isolation": stack.opts.isolation, "seconds": round(time.monotonic() - t, 1)},
        )
        result = run_call_on_stack(stack, turns, opts.out_dir / "caller", opts)
    if stack.opts.capture:
        count, leaks = stack.capture_summary()
        if leaks:
            result.errors.append(f"{len(leaks)} of {count} packets left the namespace, first: {leaks[0]}")
    return result


def try_room_call(
    turns: Sequence[Path | TurnPlan], opts: LiveKitCallOptions
) -> tuple[CallResult | None, str]:
    """(the call's result, "") through a real local room, or (None, one line saying why there is none)."""
    reason = room_unavailable_reason()
    if reason:
        return None, reason
    try:
        return run_livekit_call(turns, opts), ""
    except (ComponentMissing, StackError, CallerError) as err:
        first = str(err).strip().splitlines()
        return None, first[0] if first else type(err).__name__


@dataclass(frozen=True)
class RoomRun:
    """One call of an interleaved benchmark."""

    round: int
    pipeline: str
    call: str
    result: CallResult


def wait_until_quiet(stack: E2EStack, max_s: float = 180.0, idle_pct: float = 15.0) -> float:
    """Wait until the stack's processes (workers loading models in their job processes) stop using the CPU,
    so the first round is not measured against model loading. Returns the seconds waited."""
    import psutil

    t0 = time.monotonic()
    procs: list[psutil.Process] = []
    for mp in stack.procs:
        try:
            root = psutil.Process(mp.popen.pid)
            procs += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    while time.monotonic() - t0 < max_s:
        busy = 0.0
        for p in procs:
            try:
                p.cpu_percent(None)
            except psutil.NoSuchProcess:
                pass
        time.sleep(2.0)
        for p in procs:
            try:
                busy += p.cpu_percent(None)
            except psutil.NoSuchProcess:
                pass
        if busy < idle_pct:
            break
    return time.monotonic() - t0


def run_room_benchmark(
    calls: Mapping[str, Sequence[TurnPlan]],
    pipelines: Sequence[str],
    runs: int,
    opts: LiveKitCallOptions,
    on_run: Callable[[RoomRun], None] | None = None,
    first_round: int = 0,
) -> list[RoomRun]:
    """Every pipeline served by its own real worker process (`PARLEY_PIPELINE`, one agent name each) behind
    one livekit-server; each round calls every pipeline with every call, the pipeline order rotated."""
    from .call_plan import rotated

    stack = E2EStack(stack_options(opts, with_worker=False))
    runs_out: list[RoomRun] = []
    with stack:
        for name in pipelines:
            log_name = "worker" if name == "parley" else f"worker-{name}"
            stack.start_worker(name=log_name, env={"PARLEY_PIPELINE": name, "PARLEY_AGENT_NAME": name})
        waited = wait_until_quiet(stack)
        log.info("workers ready", extra={"pipelines": list(pipelines), "waited_s": round(waited, 1)})
        for r in range(first_round, first_round + runs):
            for name in rotated(list(pipelines), r):
                for call, plan in calls.items():
                    out = opts.out_dir / f"round{r}" / f"{name}-{call}"
                    res = run_call_on_stack(stack, plan, out, opts, pipeline=name, agent_name=name)
                    run = RoomRun(r, name, call, res)
                    runs_out.append(run)
                    if on_run:
                        on_run(run)
    return runs_out


# --- the caller process -------------------------------------------------------------------------


async def _caller_main(args: argparse.Namespace) -> int:
    from web.tokens import TokenOptions, issue_call_token

    tok = TokenOptions(api_key=args.api_key, api_secret=args.api_secret, agent_name=args.agent_name)
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
    ap = argparse.ArgumentParser(prog="python -m benchmarks.livekit_call", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("caller", help="the scripted rtc caller (run inside the stack's network)")
    c.add_argument("--url", required=True)
    c.add_argument("--api-key", required=True)
    c.add_argument("--api-secret", required=True)
    c.add_argument("--agent-name", default="parley")
    c.add_argument("--room", default="")
    c.add_argument("--turn", action="append", default=[], help="a caller turn WAV (repeat, in order)")
    c.add_argument("--plan", help="the turns as JSON (benchmarks.call_plan.plan_to_json), after any --turn")
    c.add_argument("--out", required=True, help="folder for record.json and audio.npz")
    c.add_argument("--join-timeout-s", type=float, default=60.0)
    c.add_argument("--reply-timeout-s", type=float, default=30.0)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    return asyncio.run(_caller_main(args))


if __name__ == "__main__":
    sys.exit(main())
