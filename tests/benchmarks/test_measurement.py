"""The room benchmark's measurement on synthetic tracks: −50 dBFS marks, the answer found by source (a
filler or a one-word opener is not the answer), medians with bootstrap intervals and the ratios, the turn
plan, reply judging, and the pinned stock-tuned settings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from livekit import rtc

from benchmarks.report import pipelines_json
from simulator.audio_io import Track, first_voiced_sample, voiced_seconds
from simulator.call_plan import PlanError, load_plan, median_ci, ratio_ci, reply_problem, rotated
from simulator.offline import CallResult, TurnResult
from simulator.room_caller import last_voiced_index
from worker.measurement import answer_offset_s, frame_voiced, parse_mark
from worker.turn_marks import SpeechMarks, TurnMarks, tap_tts_pieces

RATE = 24_000


def level(dbfs: float, seconds: float, rate: int = RATE) -> np.ndarray:
    """A 220 Hz tone whose RMS is `dbfs`."""
    t = np.arange(int(seconds * rate)) / rate
    amp = 10 ** (dbfs / 20) * np.sqrt(2) * 32768
    return (amp * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def frame(pcm: np.ndarray) -> rtc.AudioFrame:
    return rtc.AudioFrame(pcm.tobytes(), RATE, 1, len(pcm))


def test_the_minus_50_dbfs_rule_at_both_ends() -> None:
    speech = np.concatenate([level(-20, 0.5, 16000), level(-60, 0.3, 16000)])  # -60 dB hiss after it
    assert last_voiced_index(speech, 16000) == pytest.approx(8000 - 1, abs=160)
    assert last_voiced_index(level(-60, 0.5, 16000), 16000) == -1
    quiet_then_loud = np.concatenate([level(-55, 0.1), level(-45, 0.1)])
    assert first_voiced_sample(quiet_then_loud, RATE) == pytest.approx(2400, abs=240)
    assert not frame_voiced(level(-55, 0.02).tobytes()) and frame_voiced(level(-45, 0.02).tobytes())
    click = np.zeros(480, np.int16)
    click[100] = 1000  # one sample at -30 dBFS: not speech by RMS (a peak rule would call it voiced)
    assert not frame_voiced(click.tobytes(), RATE)
    track = Track(RATE, [(10.0, level(-30, 0.5)), (10.5, level(-70, 0.5)), (11.0, level(-30, 0.25))])
    assert voiced_seconds(track, 10.0, 12.0) == pytest.approx(0.75, abs=0.02)


def test_answer_offset_skips_a_short_opener_unless_it_is_the_whole_reply() -> None:
    assert answer_offset_s([("Sure.", 0.4), ("The shop opens at nine.", 1.5)]) == pytest.approx(0.4)
    assert answer_offset_s([("Yes.", 0.3)]) == 0.0  # the whole reply
    assert answer_offset_s([("Okay.", 0.3), ("Fine.", 0.3)]) == 0.0  # no piece holds 3 words: all short
    assert answer_offset_s([("We open at nine.", 1.0), ("Sure.", 0.3)]) == 0.0
    assert answer_offset_s([]) == 0.0


def test_speech_marks_place_the_answer_on_the_first_voiced_frame_of_its_piece() -> None:
    sm = SpeechMarks("SH_1", "reply", pieces=[("Sure.", 0.1), ("We open at nine tomorrow.", 0.2)])
    frames = [level(-80, 0.02), *[level(-30, 0.02)] * 4, level(-80, 0.02), *[level(-30, 0.02)] * 9]
    for i, pcm in enumerate(frames):
        sm.published(100.0 + i * 0.02, frame(pcm))
    sm.finish()
    assert sm.marks["published_first"] == pytest.approx(100.0)
    assert sm.marks["published_first_voiced"] == pytest.approx(100.02)
    assert sm.marks["answer_published"] == pytest.approx(100.12)  # the 2nd piece starts 0.1 s in
    msg = sm.message()
    assert msg["source"] == "reply" and msg["spoken_s"] == pytest.approx(0.26, abs=1e-6)
    assert msg["offsets_s"] == {"published_first_voiced": 0.02, "answer_published": 0.12}
    filler = SpeechMarks("SH_2", "say")
    filler.published(5.0, frame(level(-30, 0.02)))
    filler.finish()
    assert "answer_published" not in filler.marks  # a say speech is never an answer


def test_piece_taps_hear_the_cpu_voice_and_the_stock_tts() -> None:
    class CpuLike:
        sample_rate = RATE

        async def synth_piece(self, text: str) -> bytes:
            return b"\0\0" * (RATE // 2)  # 0.5 s

    heard: list[tuple[str, float]] = []
    voice = CpuLike()
    assert tap_tts_pieces(voice, lambda t, s: heard.append((t, s)))
    assert tap_tts_pieces(voice, lambda t, s: heard.append(("again:" + t, s)))  # a later call replaces it
    import asyncio

    asyncio.run(voice.synth_piece("Hello there."))
    assert heard == [("again:Hello there.", pytest.approx(0.5))]

    class StockLike:
        def __init__(self) -> None:
            self.piece_listeners: list[object] = []

    stock = StockLike()
    assert tap_tts_pieces(stock, lambda t, s: None) and len(stock.piece_listeners) == 1
    assert not tap_tts_pieces(object(), lambda t, s: None)


def test_user_marks_are_sent_on_one_clock() -> None:
    sent: list[dict[str, object]] = []
    marks = TurnMarks(sent.append, clock=lambda: 42.0)

    class Ev:
        old_state, new_state, is_final = "speaking", "listening", True

    marks._on_user_state(Ev())
    marks._on_transcript(Ev())
    assert sent == [
        {"kind": "user", "mark": "vad_end", "t": 42.0},
        {"kind": "user", "mark": "stt_final", "t": 42.0},
    ]


async def test_a_reply_reports_how_many_of_the_callers_words_its_llm_was_sent() -> None:
    """The speech report says what the reply answered (a count): after a cut-in, the caller's whole turn."""
    from livekit.agents import llm
    from livekit.agents.voice.agent_activity import _SpeechHandleContextVar

    from worker.agent import AgentOptions, ParleyAgent

    class ScriptedLLMAgent(ParleyAgent):
        """Test double at the LLM boundary: it answers one line and keeps what it was sent."""

        seen: list[llm.ChatContext] = []

        async def llm_node(self, chat_ctx, tools, model_settings):  # type: ignore[no-untyped-def,override]
            self.seen.append(self.reply_context(chat_ctx))
            yield "The ninth of June, noted."

    marks = TurnMarks(lambda _m: None, clock=lambda: 1.0)
    agent = ScriptedLLMAgent(AgentOptions())
    marks._wrap_agent(agent)

    class Handle:
        id = "speech-1"

    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="My sister can bring me over on,")
    ctx.add_message(role="assistant", content="Sounds good", interrupted=True)
    ctx.add_message(role="user", content="the ninth of June.")
    token = _SpeechHandleContextVar.set(Handle())  # type: ignore[arg-type]
    try:
        out = [c async for c in agent.llm_node(ctx, [], None)]  # type: ignore[arg-type]
    finally:
        _SpeechHandleContextVar.reset(token)
    assert out == ["The ninth of June, noted."]
    assert agent.seen[-1].items[-1].text_content == "My sister can bring me over on, the ninth of June."  # type: ignore[union-attr]
    speech = marks.speeches["speech-1"]
    assert speech.report().answered_words == 11
    assert parse_mark(speech.message()).answered_words == 11  # type: ignore[union-attr]


def test_median_interval_and_ratio() -> None:
    rng = np.random.default_rng(1)
    fast = list(rng.normal(600, 50, 60))
    slow = list(rng.normal(1500, 100, 60))
    lo, hi = median_ci(fast)  # type: ignore[misc]
    assert lo < float(np.median(fast)) < hi and hi - lo < 60
    wide = median_ci(fast[:6])
    assert wide is not None and wide[1] - wide[0] > hi - lo  # fewer turns, wider interval
    rlo, rhi = ratio_ci(fast, slow)  # type: ignore[misc]
    assert rlo < float(np.median(fast) / np.median(slow)) < rhi and 0.3 < rlo < rhi < 0.5
    assert median_ci([]) is None and ratio_ci([1.0], []) is None
    assert rotated(["a", "b", "c"], 0) == ["a", "b", "c"] and rotated(["a", "b", "c"], 4) == ["b", "c", "a"]


def fake_result(pipeline: str, v2v: list[float], problem: str = "") -> CallResult:
    turns = []
    for i, v in enumerate(v2v):
        tr = TurnResult(file=f"t{i}.wav", speech_start=0.0, speech_end=1.0, v2v_ms=v, first_audible_ms=v)
        tr.reply_words, tr.spoken_s, tr.reply_text = 5, 1.5, "We open at nine."
        tr.marks = {"end_of_turn": v / 3, "caller_first_voiced": v}
        turns.append(tr)
    if problem:
        turns[0].problem, turns[0].reply_text = problem, "Sorry, something went wrong."
    return CallResult(pipeline, 0.0, 500.0, turns, [], None, None)  # type: ignore[arg-type]


@pytest.mark.slow
def test_pipelines_report_keeps_the_contract_keys() -> None:
    runs = [
        ("parley", "fixture", 0, fake_result("parley", [500, 600, 700], problem="apology")),
        ("stock", "fixture", 0, fake_result("stock", [1500, 1600, 1700])),
        ("stock-tuned", "fixture", 0, fake_result("stock-tuned", [1000, 1200, 1400])),
    ]
    rep = pipelines_json(runs, ["parley", "stock-tuned", "stock"], 1, livekit=True)
    assert rep["runs"] == 1 and rep["livekit"] is True
    p = rep["pipelines"]["parley"]
    for key in (
        "v2v_ms",
        "v2v_ci95_ms",
        "first_audible_ms",
        "greeting_first_audio_ms",
        "errors",
        "reply_words",
    ):
        assert key in p
    assert p["v2v_ms"]["p50"] == 600 and p["apologies"] == 1 and len(p["errors"]) == 1
    assert rep["ratio_v2v_p50"] == {"stock-tuned": 0.5, "stock": pytest.approx(0.375)}
    assert p["turns"][0]["marks"]["caller_first_voiced"] == 500
    json.dumps(rep)


def test_turn_plan_from_turns_json(tmp_path: Path) -> None:
    for name in ("01-a.wav", "02-b.wav"):
        sf.write(str(tmp_path / name), np.zeros(1600, np.int16), 16000)
    assert [t.path.name for t in load_plan(tmp_path)] == ["01-a.wav", "02-b.wav"]  # no turns.json: name order
    spec = [
        {"file": "02-b.wav", "text": "b", "start": "after_reply", "delay_ms": 300},
        {"file": "01-a.wav", "text": "a", "start": "during_reply", "delay_ms": 800, "expect": ["x"]},
    ]
    (tmp_path / "turns.json").write_text(json.dumps(spec))
    plan = load_plan(tmp_path)
    assert [(t.path.name, t.start, t.delay_ms) for t in plan] == [
        ("02-b.wav", "after_reply", 300.0),
        ("01-a.wav", "during_reply", 800.0),
    ]
    spec[0]["start"] = "whenever"
    (tmp_path / "turns.json").write_text(json.dumps(spec))
    with pytest.raises(PlanError, match="start must be after_reply or during_reply"):
        load_plan(tmp_path)


def test_apologies_and_repeat_requests_are_recognised() -> None:
    lines = {"apology": {"Sorry, I had trouble with that."}, "repeat_request": {"Could you say that again?"}}
    assert reply_problem("Sorry, I had trouble with that. Let's try again.", lines) == "apology"
    assert reply_problem("could you say that again?", lines) == "repeat_request"
    assert reply_problem("I'm sorry, I can't help with that.") == "apology"
    assert reply_problem("I didn't catch that, what day?") == "repeat_request"
    assert reply_problem("We're sorry to see the rain, but we open at nine.") == ""
    assert reply_problem("We open at nine on Wednesday.") == ""


def test_stock_tuned_settings_are_pinned() -> None:
    from worker.stock_pipeline import STOCK, STOCK_TUNED, stock_options, turn_handling

    assert (STOCK_TUNED.vad_min_silence_s, STOCK_TUNED.min_endpointing_delay_s) == (0.2, 0.2)
    assert STOCK_TUNED.whisper_beam_size == 1
    assert STOCK_TUNED.trim_leading_silence and STOCK_TUNED.prewarm_tts and STOCK_TUNED.premade_greeting
    assert turn_handling(STOCK_TUNED)["endpointing"] == {"min_delay": 0.2}
    # stock keeps every library default (Silero 0.55 s, endpointing 0.5 s, beam 5, greeting synthesised)
    assert STOCK.vad_min_silence_s is None and STOCK.min_endpointing_delay_s is None
    assert STOCK.whisper_beam_size == 5 and not (STOCK.trim_leading_silence or STOCK.prewarm_tts)
    assert "endpointing" not in turn_handling(STOCK)
    assert turn_handling(STOCK)["turn_detection"] == "vad"  # never LiveKit Cloud
    assert stock_options("stock-tuned") is STOCK_TUNED
    with pytest.raises(ValueError, match="not a stock pipeline"):
        stock_options("parley")


def test_leading_silence_trim_keeps_the_speech() -> None:
    from worker.stock_pipeline import trim_leading

    audio = np.concatenate([np.zeros(7200, np.float32), np.full(2400, 0.2, np.float32)])
    out = trim_leading(audio)
    assert len(out) == pytest.approx(2400 + 480, abs=240)  # 0.3 s of silence gone, a 20 ms pad kept
    assert np.allclose(out[-2400:], 0.2)


def test_room_load_counts_silences_inside_a_reply_as_underruns() -> None:
    from benchmarks.load_room import reply_gap_spans

    chunks = []
    t = 0.0
    for _ in range(300):  # 3 s of 10 ms frames: voiced, except a 0.5 s hole at 1.0 s and 0.1 s at 2.0 s
        hole = 1.0 <= t < 1.5 or 2.0 <= t < 2.1
        chunks.append((t, level(-80 if hole else -30, 0.01)))
        t = round(t + 0.01, 6)
    track = Track(RATE, chunks)
    gaps = [gap for _, gap in reply_gap_spans(track, 0.0, 3.0)]
    assert gaps == [pytest.approx(0.5, abs=0.011)]  # the 0.1 s pause between words is no underrun
    assert reply_gap_spans(track, 1.6, 3.0) == []


def _frames_track(start: float, holes: list[tuple[float, float]], seconds: float) -> Track:
    """10 ms chunks from `start`: voiced except inside the (from, to) holes (seconds after `start`)."""
    chunks = []
    for i in range(round(seconds * 100)):
        t = i / 100
        hole = any(a <= t < b for a, b in holes)
        chunks.append((start + t, level(-80 if hole else -30, 0.01)))
    return Track(RATE, chunks)


def test_voice_to_voice_starts_when_the_callers_last_sample_left_its_own_queue() -> None:
    """The scripted caller shares the host's cores: audio it queued after a stall is its own delay, not the
    agent's; one frame of queue is the normal hand-over."""
    from simulator.room_caller import RoomCallRecord, SentTurn
    from simulator.room_result import spoken_end, to_call_result

    def record(queue_ms: float) -> RoomCallRecord:
        agent = _frames_track(10.8, [], 1.0)  # the agent answers at 10.8 s
        turn = SentTurn("t1.wav", start=8.0, last_voiced=10.0, mic_queue_ms=queue_ms)
        return RoomCallRecord("r", 7.0, 12.0, None, [turn], [], [], [], Track(16_000), agent)

    assert spoken_end(SentTurn("t", 0.0, 10.0, mic_queue_ms=10.0)) == 10.0
    assert to_call_result(record(10.0)).turns[0].v2v_ms == pytest.approx(800, abs=1)
    queued = to_call_result(record(210.0)).turns[0]
    assert queued.v2v_ms == pytest.approx(600, abs=1)


def test_the_worker_reports_the_pauses_in_its_own_audio() -> None:
    sm = SpeechMarks("s1", "reply")
    tens = [level(-80 if 1.03 <= i / 100 < 1.63 or i / 100 >= 2.9 else -30, 0.01) for i in range(300)]
    for f in range(15):  # 3 s handed out in 200 ms frames; the voice itself is silent 1.03-1.63 s
        pcm = np.concatenate(tens[f * 20 : (f + 1) * 20])
        sm.published(10.0 + f / 5, rtc.AudioFrame(pcm.tobytes(), RATE, 1, len(pcm)))
    [(offset, seconds)] = sm.silences()  # the silence after the last word is not a pause
    assert offset == pytest.approx(1.03, abs=0.011) and seconds == pytest.approx(0.6, abs=0.011)
    assert sm.message()["silences_s"] == [[pytest.approx(1.03, abs=0.011), pytest.approx(0.6, abs=0.011)]]


def test_room_load_tells_underruns_from_the_voices_own_pauses() -> None:
    from benchmarks.load_room import underruns
    from simulator.room_caller import RoomCallRecord
    from worker.measurement import parse_mark

    # the caller hears the reply from t=2.0 s: a 0.6 s hole at 1.0 s (the voice paused there: it published
    # silence) and a 0.5 s hole at 2.5 s (the worker had nothing to send)
    heard = _frames_track(2.0, [(1.0, 1.6), (2.5, 3.0)], 4.0)
    reply = {
        "kind": "speech",
        "source": "reply",
        "marks": {"published_first": 1.9, "published_first_voiced": 1.9},
        "offsets_s": {"published_first_voiced": 0.0},
        "silences_s": [[1.0, 0.6]],
    }
    record = RoomCallRecord("r", 0.0, 7.0, None, [], [], [], [], heard, heard, [parse_mark(reply)])
    turn = TurnResult(file="t0.wav", speech_start=0.0, speech_end=1.0, v2v_ms=1000.0)
    speaker = type("Speaker", (), {"track": heard})()
    res = CallResult("parley", 0.0, None, [turn], [], None, speaker, end=7.0)  # type: ignore[arg-type]
    starved, own = underruns(res, record)
    assert starved == [pytest.approx(0.5, abs=0.011)]
    assert own == [pytest.approx(0.6, abs=0.011)]
    assert underruns(res) == ([pytest.approx(0.6, abs=0.011), pytest.approx(0.5, abs=0.011)], [])


def test_stage_histograms_export_for_prometheus() -> None:
    from prometheus_client import generate_latest

    from worker.turn_marks import StageHistograms

    first, again = StageHistograms("stock-tuned"), StageHistograms("stock-tuned")  # one per process
    first.observe("end_of_turn", 0.3)
    again.observe("answer_published", 0.9)
    again.observe("answer_published", -1.0)  # a mark before its reference is not a duration
    text = generate_latest().decode()
    assert 'parley_turn_stage_seconds_count{pipeline="stock-tuned",stage="end_of_turn"} 1.0' in text
    assert 'parley_turn_stage_seconds_count{pipeline="stock-tuned",stage="answer_published"} 1.0' in text


def test_worker_failures_keep_the_workers_own_lines_and_drop_model_written_sorries() -> None:
    from simulator.call_plan import worker_failures
    from worker.agent import APOLOGY, REPEAT

    errors = [
        "c1.wav: no reply within timeout",
        'c2.wav: apology: "I\'m sorry for your loss, but as of now"',
        f"c3.wav: apology: {APOLOGY['en']!r}",
        f"c4.wav: repeat_request: {REPEAT['en'][:20]!r}",  # cut short in the report: still the worker's line
        "call1 c5.wav: repeat_request: 'Pardon me, what time did you say?'",
    ]
    assert worker_failures(errors) == [errors[0], errors[2], errors[3]]


def test_cpu_cores_counts_each_process_from_when_it_was_first_seen() -> None:
    from benchmarks.load_room import cpu_cores

    samples = [
        {1: ("livekit-server", 50.0), 2: ("jobs", 3.0)},  # running before the run: counted from here
        {1: ("livekit-server", 54.0), 2: ("jobs", 7.0), 3: ("callers", 2.0)},  # a caller started meanwhile
        {1: ("livekit-server", 58.0), 3: ("callers", 6.0), 4: ("jobs", 1.0)},  # pid 2 ended, pid 4 new
    ]
    cores = cpu_cores(samples, seconds=4.0)
    assert cores == {"callers": 1.5, "jobs": 1.25, "livekit-server": 2.0}


def _agent_track(voiced: list[tuple[float, float]], until: float, rate: int = 24_000) -> Track:
    """10 ms chunks from t=0 to `until`, a tone inside the voiced spans, digital silence elsewhere."""
    from simulator.audio_io import Track

    track = Track(rate)
    n = rate // 100
    tone = (0.2 * 32767 * np.sin(2 * np.pi * 220 * np.arange(n) / rate)).astype(np.int16)
    for k in range(int(until * 100)):
        t = k / 100
        on = any(a <= t < b for a, b in voiced)
        track.add(t, tone.copy() if on else np.zeros(n, np.int16))
    return track


def test_agent_stop_is_its_last_voiced_sample_before_a_real_silence() -> None:
    from simulator.room_result import agent_stop_after

    # the agent speaks 0-1.0 s, pauses 0.4 s between sentences, speaks 1.4-2.35 s, is cut, answers at 4 s
    track = _agent_track([(0.0, 1.0), (1.4, 2.35), (4.0, 5.0)], until=5.5)
    stop = agent_stop_after(track, 2.0)  # the caller's first voiced sample at 2.0 s
    assert stop is not None and abs(stop - 2.35) < 0.011  # the sentence pause at 1.0 s is not a stop
    early = agent_stop_after(track, 0.5)
    assert early is not None and abs(early - 2.35) < 0.011
    assert agent_stop_after(track, 3.3) is None  # the agent was silent when the caller spoke


def test_an_agent_that_stopped_before_the_caller_spoke_counts_zero() -> None:
    from simulator.room_result import agent_stop_after

    track = _agent_track([(0.0, 1.0)], until=3.0)
    assert agent_stop_after(track, 1.3) == 1.3  # its last sound was 0.3 s before: within the gap, stop = t0


def test_agent_voice_inside_a_callers_turn_counts_as_taken_early() -> None:
    from benchmarks.report import turn_taking
    from simulator.room_caller import RoomCallRecord, SentTurn
    from simulator.room_result import to_call_result

    # turn 1: caller 1.0-1.8 s, pause, 2.6-3.4 s; the agent answered into the pause (2.0-2.5 s) and again
    # after the end. Turn 2: caller 6.0-7.0 s, the agent waits until 7.6 s. Turn 3 is said over the agent.
    mic = _agent_track([(1.0, 1.8), (2.6, 3.4), (6.0, 7.0), (9.0, 9.5)], until=10.0, rate=16_000)
    agent = _agent_track([(2.0, 2.5), (3.9, 5.0), (7.6, 9.2)], until=10.0)
    turns = [
        SentTurn("a.wav", start=0.9, last_voiced=3.4),
        SentTurn("b.wav", start=5.9, last_voiced=7.0),
        SentTurn("c.wav", start=8.9, last_voiced=9.5, start_mode="during_reply"),
    ]
    record = RoomCallRecord("r", 0.0, 10.0, None, turns, [], [], [], mic, agent)
    res = to_call_result(record)
    assert [t.spoke_over_ms for t in res.turns] == [pytest.approx(500, abs=20), 0.0, None]
    rows = [{**t.as_json(), "call": "c", "run": 0} for t in res.turns]
    rows[1]["endpoint_ms"] = 1600.0  # a finished turn held in silence
    rows[2]["endpoint_ms"] = 3000.0  # over the agent: not a held turn
    tt = turn_taking(rows)
    assert (tt["taken_early"], tt["turns_after_reply"], tt["held_over_1500ms"]) == (1, 2, 1)
    assert tt["early_turns"][0]["file"] == "a.wav"
    assert tt["fragment_replies"] is None  # no worker marks: not known
    rows[0]["user_text"], rows[0]["answered_words"] = "My sister can bring me over on, the ninth of June.", 4
    rows[1]["user_text"], rows[1]["answered_words"] = "That is all.", 3
    tt = turn_taking(rows)
    assert tt["fragment_replies"] == 1 and tt["fragment_turns"][0]["file"] == "a.wav"


def test_a_room_calls_record_reads_back_as_it_was_saved(tmp_path: Path) -> None:
    from simulator.room_caller import RoomCallRecord, SentTurn
    from simulator.room_result import to_call_result

    mic = _agent_track([(1.0, 1.8), (4.0, 4.4)], until=6.0, rate=16_000)
    agent = _agent_track([(2.3, 5.0)], until=6.0)
    turns = [
        SentTurn("a.wav", start=0.9, last_voiced=1.8),
        SentTurn("b.wav", start=3.9, last_voiced=4.4, start_mode="during_reply"),
    ]
    saved = RoomCallRecord("r", 0.0, 6.0, None, turns, [], [(2.0, {"k": 1})], ["e"], mic, agent, hung_up=5.5)
    saved.save(tmp_path)
    loaded = RoomCallRecord.load(tmp_path)
    assert (loaded.turns, loaded.metrics, loaded.errors, loaded.hung_up) == (
        turns,
        [(2.0, {"k": 1})],
        ["e"],
        5.5,
    )
    assert loaded.agent.chunks[0][0] == agent.chunks[0][0] and len(loaded.mic.chunks) == len(mic.chunks)
    assert [t.file for t in to_call_result(loaded).turns] == ["a.wav", "b.wav"]
