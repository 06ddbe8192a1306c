"""What the scripted caller recorded → the offline harness's `CallResult`, so the same report, JSON, stereo
WAV and timeline PNG come out of a call through a real room.

Voice-to-voice is measured at the caller (DESIGN §6): from the moment the turn's last voiced sample left the
caller (`spoken_end`) to when the caller heard the answer of the reply speech the worker's marks name
(`worker.measurement.answer_heard`). Without marks (a worker that sends none) the first voiced agent audio
after the turn that is not a cached filler counts. `stt_final_ms` is the arrival of the caller's final
transcript; `endpoint_ms`, `llm_ttft_ms` and `tts_ttfb_ms` come from the worker's marks.
"""

from __future__ import annotations

from typing import Any

from worker.measurement import REPLY_MARKS, USER_MARKS, SpeechReport, UserMark, answer_heard

from .audio_io import (
    Loudspeaker,
    ScriptedMic,
    Track,
    first_voiced_sample,
    last_voiced_sample,
    voiced_seconds,
)
from .call_plan import agent_fixed_lines, is_filler_text, norm_text, reply_problem
from .offline import CallResult, Mark, TurnResult
from .room_caller import FRAME_S, RoomCallRecord, SentTurn, Transcript

# --- the record as the offline harness's CallResult ---------------------------------------------------------


def _is_filler(tr: Transcript, norm_fillers: set[str]) -> bool:
    return tr.who == "agent" and is_filler_text(tr.text, norm_fillers)


def filler_windows(
    record: RoomCallRecord, filler_texts: set[str], lead_s: float = 0.3
) -> list[tuple[float, float]]:
    """When the agent played a cached filler: its transcript segment's lifetime (padded before, since the
    audio may arrive a moment before the text)."""
    norm = {norm_text(t) for t in filler_texts}
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


STOP_GAP_S = 0.8
"""A silence this long in the agent's audio at the caller is the agent having stopped: longer than the voice's
own pauses between sentences (up to ~0.76 s in the room load's `voice_pauses_ms`)."""


def agent_stop_after(track: Track, t0: float, gap_s: float = STOP_GAP_S) -> float | None:
    """When the agent's audio the caller heard last sounded before its first silence of `gap_s` after `t0`
    (the caller's first voiced sample of a barge-in). None when the agent was not speaking at `t0`."""
    last: float | None = None
    for start, pcm in track.chunks:
        end = start + len(pcm) / track.sample_rate
        if end < t0 - gap_s:
            continue
        if start >= t0 and (last is None or start - last >= gap_s):
            break  # silent from before the caller spoke: the agent was not speaking
        stop = last_voiced_sample(pcm, track.sample_rate)
        if stop is None:
            if last is not None and start - last >= gap_s:
                break
            continue
        first = start + (first_voiced_sample(pcm, track.sample_rate) or 0) / track.sample_rate
        if last is not None and first - last >= gap_s:
            break  # a new reply after the stop
        last = start + stop / track.sample_rate
    if last is None or last < t0 - gap_s:
        return None
    return max(last, t0)


def spoke_over_ms(agent: Track, spoke: float | None, end: float) -> float:
    """Voiced agent audio the caller heard between its turn's first voiced sample (`spoke`) and its last.

    A turn said after the agent's reply starts in silence, so any agent voice inside it is the agent taking
    the turn at a pause the caller meant to go on from (a reply, a filler or a hold line alike: the caller
    hears them the same). Caller-side and pipeline-agnostic, so stock pipelines are held to the same count."""
    return 0.0 if spoke is None else voiced_seconds(agent, spoke, end) * 1000


def _metric_ms(msg: dict[str, Any] | None, key: str) -> float | None:
    v = msg.get(key) if msg else None
    return float(v) if isinstance(v, int | float) else None


def _reply_speeches(record: RoomCallRecord) -> list[SpeechReport]:
    """The worker's reply speeches (not greetings, fillers or hold lines), in the order they went out."""
    found = [
        m
        for m in record.marks
        if isinstance(m, SpeechReport) and m.source == "reply" and "published_first" in m.marks
    ]
    return sorted(found, key=lambda m: m.marks["published_first"])


def _answer_heard(track: Track, reply: SpeechReport, hi: float) -> float | None:
    """When the caller heard the reply's answer (the shared rule: worker.measurement.answer_heard). Publish
    times alone would be off by the output's queue (up to 200 ms) when the answer starts mid-reply."""
    start = reply.marks.get("published_first_voiced")
    if start is None:
        return None
    return answer_heard(track.chunks, track.sample_rate, start, reply.answer_into_s(), hi)


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
    reply: SpeechReport | None,
    end: float,
    hi: float,
    marks_hi: float,
) -> None:
    """Every mark of one turn, in ms after the caller's last voiced sample; the answer found by source."""
    stamps: dict[str, float] = {}
    for m in record.marks:
        if isinstance(m, UserMark) and m.mark in USER_MARKS and end < m.t < marks_hi:
            stamps.setdefault(m.mark, m.t)
    if reply is not None:
        for k in REPLY_MARKS:
            if k in reply.marks:
                stamps[k] = reply.marks[k]
        heard = _answer_heard(record.agent, reply, hi)
        if heard is not None:
            stamps["caller_first_voiced"] = heard
            tr.v2v_ms = (heard - end) * 1000
        tr.reply_text = reply.text.strip()
        tr.reply_words = reply.words or len(tr.reply_text.split())
        tr.spoken_s = reply.spoken_s
        tr.answered_words = reply.answered_words or None
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
    norm_fillers = {norm_text(t) for t in filler_texts or set()}
    replies = _reply_speeches(record)
    has_marks = any(isinstance(m, SpeechReport) for m in record.marks)
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
        spoke = _first_voiced(record.mic, sent.start, end + 0.01, [])
        if sent.start_mode == "during_reply":
            stopped = agent_stop_after(record.agent, spoke) if spoke is not None else None
            tr.agent_stop_ms = (stopped - spoke) * 1000 if stopped is not None and spoke is not None else None
        else:
            tr.spoke_over_ms = spoke_over_ms(record.agent, spoke, end)
        audible = _first_voiced(record.agent, end, hi, [])
        tr.first_audible_ms = (audible - end) * 1000 if audible is not None else None
        finals = [
            t for t in record.transcripts if t.who == "caller" and t.final and sent.start <= t.closed < hi
        ]
        if finals:
            # a turn with a pause in it may get a final per fragment: the one that completes the turn is
            # the first to close after the turn's last voiced sample (else the last one)
            final = next((t for t in finals if t.closed >= end), finals[-1])
            tr.stt_final_ms = (final.closed - end) * 1000
            marks.append(Mark("stt_final", final.closed))
        tr.user_text = " ".join(t.text.strip() for t in finals if t.text.strip())
        if has_marks:
            # a reply belongs to the turn it followed: it went out after this turn's end, before the next's
            after = [r for r in replies if end < r.marks["published_first"] < next_end]
            reply = next(iter(after), None)
            completed = [r.text.strip() for r in after if not r.interrupted and r.text.strip()]
            tr.completed_reply = completed[-1] if completed else ""
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
