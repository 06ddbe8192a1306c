"""The real-room call runner's logic without a server: what the caller recorded → the harness's CallResult,
the record's trip between processes, the stack's loopback config, and the CLI's one-line refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from benchmarks.report import call_json, latency_table, timeline_png
from simulator import room_runner
from simulator.audio_io import Track
from simulator.call_plan import default_filler_texts
from simulator.livekit_stack import (
    E2EStack,
    HostLoopback,
    Netns,
    StackOptions,
    livekit_server_config,
)
from simulator.offline import write_stereo
from simulator.room_caller import RoomCallRecord, SentTurn, Transcript
from simulator.room_result import to_call_result
from tests.e2e.harness import PYTHON, REPO
from worker.measurement import parse_mark

T0 = 1000.0


def tone(seconds: float, rate: int, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amp * 32767 * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def track_with(rate: int, voiced: list[tuple[float, float]], until: float) -> Track:
    """10 ms frames from T0 to `until`; voiced (tone) inside the given (start, end) spans, else silence."""
    track = Track(rate)
    n = rate // 100
    t = T0
    while t < until:
        on = any(a <= t < b for a, b in voiced)
        track.add(t, tone(0.01, rate) if on else np.zeros(n, np.int16))
        t = round(t + 0.01, 6)
    return track


def record() -> RoomCallRecord:
    """Greeting at +0.5 s; turn c1 spoken 3–5 s, filler 'Sure.' at 5.4 s, reply at 6.2 s;
    turn c2 spoken 10–12 s, no reply."""
    mic = track_with(16000, [(T0 + 3, T0 + 5), (T0 + 10, T0 + 12)], T0 + 16)
    agent = track_with(24000, [(T0 + 0.5, T0 + 2), (T0 + 5.4, T0 + 5.8), (T0 + 6.2, T0 + 8)], T0 + 16)
    return RoomCallRecord(
        room="call-x",
        t_connect=T0,
        end=T0 + 16,
        greeting_first_audio=T0 + 0.5,
        turns=[SentTurn("c1.wav", T0 + 3, T0 + 5), SentTurn("c2.wav", T0 + 10, T0 + 12, replied=False)],
        transcripts=[
            Transcript("agent", "Hi, how can I help?", True, T0 + 0.5, T0 + 2),
            Transcript("caller", "book a", False, T0 + 4, T0 + 4),
            Transcript("caller", "Book a cleaning.", True, T0 + 5.3, T0 + 5.3),
            Transcript("agent", "Sure.", True, T0 + 5.45, T0 + 5.8),
            Transcript("agent", "When would you like to come?", True, T0 + 6.2, T0 + 8),
            Transcript("caller", "Wednesday.", True, T0 + 12.4, T0 + 12.4),
        ],
        metrics=[
            (T0 + 2.1, {"turn": 0}),
            (T0 + 8.1, {"turn": 1, "end_of_turn_ms": 250.0, "llm_ttft_ms": 400.0, "tts_ttfb_ms": 60.0}),
        ],
        errors=[],
        mic=mic,
        agent=agent,
    )


def test_stt_final_is_the_one_that_completes_the_turn() -> None:
    """A turn with a pause gets a final per fragment; the turn's STT figure is the final after its end."""
    rec = record()
    rec.transcripts.insert(1, Transcript("caller", "Book", True, T0 + 3.6, T0 + 3.6))  # the first fragment
    c1 = to_call_result(rec, {"Sure."}).turns[0]
    assert c1.stt_final_ms == pytest.approx(300, abs=1)
    assert c1.user_text == "Book Book a cleaning."


def test_record_becomes_the_harness_result_with_fillers_kept_out_of_v2v() -> None:
    res = to_call_result(record(), {"Sure.", "One moment."})
    assert res.greeting_first_audio_ms == pytest.approx(500, abs=1)
    c1, c2 = res.turns
    assert c1.first_audible_ms == pytest.approx(400, abs=11)  # the filler is heard first
    assert c1.v2v_ms == pytest.approx(1200, abs=11)  # v2v counts the reply, not the filler
    assert c1.stt_final_ms == pytest.approx(300, abs=1)
    assert c1.user_text == "Book a cleaning."
    assert c1.reply_text == "When would you like to come?"
    assert (c1.endpoint_ms, c1.llm_ttft_ms, c1.tts_ttfb_ms) == (250.0, 400.0, 60.0)
    assert res.filler_windows == [(pytest.approx(T0 + 5.15), T0 + 5.8)]
    assert c2.v2v_ms is None and c2.error == "no reply within timeout"
    assert c2.user_text == "Wednesday." and c2.endpoint_ms is None
    report = call_json(res)
    assert report["errors"] == ["c2.wav: no reply within timeout"]
    assert report["v2v_ms"]["p50"] == pytest.approx(1200, abs=11)


def test_without_filler_texts_the_filler_counts_as_the_reply() -> None:
    res = to_call_result(record(), set())
    assert res.turns[0].v2v_ms == pytest.approx(400, abs=11)
    assert res.turns[0].reply_text == "Sure. When would you like to come?"


def test_record_survives_the_trip_between_processes(tmp_path: Path) -> None:
    rec = record()
    rec.save(tmp_path)
    back = RoomCallRecord.load(tmp_path)
    assert back.turns == rec.turns and back.transcripts == rec.transcripts and back.metrics == rec.metrics
    assert back.agent.sample_rate == 24000 and len(back.agent.chunks) == len(rec.agent.chunks)
    assert back.mic.chunks[300][0] == rec.mic.chunks[300][0]
    assert np.array_equal(back.mic.chunks[300][1], rec.mic.chunks[300][1])


def test_report_outputs_come_from_a_room_result_unchanged(tmp_path: Path) -> None:
    res = to_call_result(record(), {"Sure."})
    table = latency_table(res)
    assert "c1.wav" in table and "c2.wav" in table
    write_stereo(res, tmp_path / "call.wav")
    timeline_png(res, tmp_path / "timeline.png")
    audio, rate = sf.read(str(tmp_path / "call.wav"))
    assert rate == 24000 and audio.shape[1] == 2
    # caller on the left from 3 s, agent on the right at 0.5 s (the greeting)
    assert np.abs(audio[int(3.1 * rate) : int(4 * rate), 0]).max() > 0.1
    assert np.abs(audio[int(0.6 * rate) : int(1.5 * rate), 1]).max() > 0.1
    assert np.abs(audio[int(2.5 * rate) : int(2.9 * rate)]).max() < 1e-3
    assert (tmp_path / "timeline.png").stat().st_size > 10_000


def test_filler_texts_come_from_the_phrase_set() -> None:
    texts = default_filler_texts()
    assert "Okay." in texts and "Let me check that for you." in texts
    assert "Hi, thanks for calling. How can I help you today?" not in texts  # a greeting is no filler


def test_loopback_stack_binds_and_offers_only_127_0_0_1(tmp_path: Path) -> None:
    stack = E2EStack(StackOptions(out_dir=tmp_path, isolation="loopback"))
    assert isinstance(stack.ns, HostLoopback) and not stack.opts.capture
    ports = {stack.opts.livekit_port, stack.opts.rtc_tcp_port, stack.opts.web_port}
    assert len(ports) == 3 and 7880 not in ports  # free ports, not the defaults a `make dev` may hold
    cfg = livekit_server_config(stack.opts, stack.ns)
    assert 'bind_addresses: ["127.0.0.1"]' in cfg and "node_ip: 127.0.0.1" in cfg
    assert "use_external_ip: false" in cfg and "includes: [lo]" in cfg
    netns_cfg = livekit_server_config(StackOptions(out_dir=tmp_path), Netns("x"))
    assert "node_ip: 10.77.0.1" in netns_cfg and "includes" not in netns_cfg
    env = E2EStack(
        StackOptions(out_dir=tmp_path, base_env={"PARLEY_LIVEKIT_URL": "wss://far", "PARLEY_TOOL_X": "1"})
    )
    assert env.env()["LIVEKIT_URL"] == env.livekit_url and "PARLEY_LIVEKIT_URL" not in env.env()
    assert env.env()["PARLEY_TOOL_X"] == "1"


def test_no_room_falls_back_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import call

    monkeypatch.setattr(room_runner, "livekit_server_problem", lambda: "livekit-server not installed: run x")
    res, why = room_runner.try_room_call([], room_runner.LiveKitCallOptions(out_dir=Path("unused")))
    assert res is None and why == "livekit-server not installed: run x"
    assert call.use_room("auto") is False
    out = capsys.readouterr()
    assert out.out.strip().splitlines() == [
        "no local LiveKit room (livekit-server not installed: run x); running the call offline instead"
    ]
    with pytest.raises(SystemExit) as exc:
        call.use_room("on")
    assert str(exc.value).startswith("error: no local LiveKit room: livekit-server not installed")
    assert call.use_room(None) is False


@pytest.mark.slow
def test_bad_pipeline_or_empty_call_is_refused_in_one_line(tmp_path: Path) -> None:
    base = [str(PYTHON), "-m", "benchmarks.call", "--data", str(tmp_path)]
    res = subprocess.run(
        [*base, "--pipeline", "parley,bogus"], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert res.returncode == 2
    assert res.stderr.strip() == "error: unknown pipeline 'bogus'; choose from parley, stock-tuned, stock"
    res = subprocess.run(
        [*base, "--pipeline", "stock-tuned"], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert res.returncode == 2 and res.stderr.strip() == f"error: no *.wav turns in {tmp_path}"


def marked_record(opener: bool) -> RoomCallRecord:
    """record() plus the worker's marks: the filler 'Sure.' is a `say` speech; the reply went out 50 ms
    before the caller heard it. With `opener`, the reply itself starts with a one-word piece."""
    rec = record()
    rec.transcripts = [t for t in rec.transcripts if t.text != "Sure."]  # no filler text to go by
    reply_marks = {"published_first": T0 + 6.15, "published_first_voiced": T0 + 6.15}
    reply_marks["answer_published"] = T0 + (6.2 if opener else 6.15)  # queued: published early
    offsets = {"published_first_voiced": 0.0, "answer_published": 0.4 if opener else 0.0}
    messages = [
        {"kind": "speech", "source": "say", "marks": {"published_first": T0 + 0.45}},
        {"kind": "user", "mark": "vad_end", "t": T0 + 5.2},
        {"kind": "user", "mark": "end_of_turn", "t": T0 + 5.25},
        {"kind": "speech", "source": "say", "marks": {"published_first": T0 + 5.35}},
        {
            "kind": "speech",
            "source": "reply",
            "marks": reply_marks,
            "text": "When would you like to come?",
            "words": 6,
            "offsets_s": offsets,
            "spoken_s": 1.8,
        },
    ]
    rec.marks = [parse_mark(m) for m in messages]
    if opener:  # the answer's audio: a pause after the opener, then the rest from 6.6 s
        rec.agent = track_with(
            24000,
            [(T0 + 0.5, T0 + 2), (T0 + 5.4, T0 + 5.8), (T0 + 6.2, T0 + 6.4), (T0 + 6.6, T0 + 8)],
            T0 + 16,
        )
    return rec


def test_answer_is_found_by_the_speech_that_made_it_not_by_filler_text() -> None:
    res = to_call_result(marked_record(opener=False), set())  # no filler texts at all
    c1 = res.turns[0]
    assert c1.first_audible_ms == pytest.approx(400, abs=11)  # the filler is heard first
    assert c1.v2v_ms == pytest.approx(1200, abs=11)  # the reply speech's first voiced audio
    assert c1.marks["vad_end"] == pytest.approx(200, abs=1)
    assert c1.marks["end_of_turn"] == pytest.approx(250, abs=1) and c1.endpoint_ms == pytest.approx(
        250, abs=1
    )
    assert c1.marks["caller_first_voiced"] == pytest.approx(1200, abs=11)
    assert (c1.reply_words, c1.spoken_s, c1.problem) == (6, 1.8, "")


def test_a_one_word_opener_is_not_the_answer() -> None:
    res = to_call_result(marked_record(opener=True), set())
    assert res.turns[0].v2v_ms == pytest.approx(1600, abs=11)
    assert res.turns[0].marks["published_first_voiced"] == pytest.approx(1150, abs=1)
    assert res.turns[0].first_audible_ms == pytest.approx(400, abs=11)


@pytest.mark.slow
def test_caller_refuses_a_missing_turn_file_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.wav"
    cmd = [str(PYTHON), "-m", "simulator.room_caller", "caller", "--url", "ws://127.0.0.1:9"]
    cmd += ["--api-key", "k", "--api-secret", "s" * 32, "--turn", str(missing), "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip() == f"caller: no such turn file: {missing}"
