"""benchmarks.heard: what counts as a reply cut off, lost words or a reply not made out; which audio belongs
to which reply; and a reply spoken by the real hibari voice, cut or whole, heard by the real Whisper base."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.call import mark_backchannels
from benchmarks.heard import Listener, judge, listen_call, replies_heard, reply_windows
from benchmarks.report import backchannels
from caches.builder import synthesize_pcm
from plugins.cpu_voice import CpuVoiceTTS
from plugins.cpu_voice.voice import open_voice
from simulator.audio_io import Loudspeaker, ScriptedMic
from simulator.call_plan import TurnPlan
from simulator.offline import CallResult, TurnResult

SAID = "Your cleaning is booked for Thursday at three. We will send a reminder the day before."


def test_a_reply_heard_whole_despite_the_listeners_own_slips() -> None:
    heard = judge(SAID, "Your cleaning is booked for Thursday at 3. We'll send a reminder the day before.")
    assert not heard["cut_off"] and not heard["unheard"] and heard["words_heard"] > 0.85
    one_slip = judge(
        SAID, "Your cleaning is booked for Thursday at three. We will send a reminder the day bee."
    )
    assert not one_slip["cut_off"]  # one misheard last word is the listener, not a lost ending


def test_a_lost_ending_is_a_cut_off_unless_the_caller_talked_over_it() -> None:
    heard = judge(SAID, "Your cleaning is booked for Thursday at three. We will")
    assert heard["cut_off"] and heard["heard_to"] == 10 and heard["said"] == 16
    assert not judge(SAID, "Your cleaning is booked for Thursday at three. We will", interrupted=True)[
        "cut_off"
    ]
    replaced = judge(SAID, "Your cleaning. Oh, let me check the reminder.")  # stopped; another reply said
    assert replaced["heard_to"] == 2 and replaced["cut_off"]
    missing_middle = judge(SAID, "Your cleaning is booked. We will send a reminder the day before.")
    assert not missing_middle["cut_off"] and missing_middle["words_heard"] < 0.8  # lost words, not the end


def test_a_reply_nobody_could_make_out_is_unheard_not_cut() -> None:
    garbled = judge(SAID, "Mm. Okay then.")
    assert garbled["unheard"] and not garbled["cut_off"]
    assert not judge("Sure.", "")["cut_off"]  # too short to call cut off


def test_korean_is_compared_by_characters() -> None:
    said = "목요일 세 시로 예약해 드렸습니다. 하루 전에 문자 드릴게요."
    assert not judge(said, "목요일 3시로 예약해 드렸습니다 하루 전에 문자 드릴게요")["cut_off"]
    cut = judge(said, "목요일 세 시로 예약해 드렸습니다")
    assert cut["language"] == "ko" and cut["cut_off"]


def turn(
    file: str, end: float, audible_ms: float | None, reply: str, start: str = "after_reply"
) -> TurnResult:
    tr = TurnResult(file=file, speech_start=end - 1.0, speech_end=end, reply_text=reply, start=start)
    tr.first_audible_ms = audible_ms
    return tr


def test_each_replys_window_runs_past_a_backchannel_to_the_end_of_the_callers_next_turn() -> None:
    turns = [
        turn("a", 2.0, 500, "One."),
        turn("b", 6.0, 400, "Two.", start="during_reply"),
        turn("c", 9.0, None, ""),
        turn("d", 12.0, 300, "Four."),
        turn("e", 15.0, 300, "Five.", start="during_reply"),
    ]
    w = reply_windows(turns, end=20.0)
    # no worker marks: b, said over a's reply, is taken to have stopped it; the window still runs to c's end
    assert w[0] == (0, pytest.approx(2.4), 9.0, True)
    assert w[2] is None  # no reply
    assert w[3] == (3, pytest.approx(12.2), 20.0, True)
    turns[0].completed_reply = "One."  # the marks say a's reply played to its end over b (a backchannel)
    turns[1].completed_reply = ""  # and that every reply speech begun after b was stopped,
    turns[1].spoke_over_ms = 250.0  # begun inside b, which the caller went on with
    turns[3].completed_reply = "Four."
    w = reply_windows(turns, end=20.0)
    assert w[0] == (0, pytest.approx(2.4), 9.0, False) and w[1] == (1, pytest.approx(6.3), 9.0, True)
    assert w[3] == (3, pytest.approx(12.2), 20.0, False)
    turns[3].completed_reply = ""  # d's reply stopped, nobody talking over it: judged, so a lost end counts
    assert reply_windows(turns[:4], end=20.0)[3] == (3, pytest.approx(12.2), 20.0, False)
    turns[3].spoke_over_ms = 300.0  # the agent began inside d and the caller went on: the caller stopped it
    assert reply_windows(turns[:4], end=20.0)[3] == (3, pytest.approx(12.2), 20.0, True)


def test_the_summary_pools_words_and_names_the_cut_replies() -> None:
    turns = [
        {"file": "a", "reply_text": SAID, "heard": judge(SAID, SAID)},
        {"file": "b", "reply_text": SAID, "heard": judge(SAID, "Your cleaning is booked for")},
        {"file": "c", "reply_text": "", "heard": None},
        {"file": "d", "reply_text": SAID, "heard": judge(SAID, "Your", interrupted=True)},
    ]
    s = replies_heard(turns)
    assert s is not None and s["replies"] == 2 and s["cut_off"] == 1 and s["unheard"] == 0
    assert s["stopped_by_caller"] == 1  # not judged, and not in the pooled share
    assert s["words_heard"] == pytest.approx(21 / 32, abs=0.001)
    assert (
        s["cut_off_turns"][0]["file"] == "b"
        and s["cut_off_turns"][0]["heard"] == "Your cleaning is booked for"
    )
    assert replies_heard([{"file": "x", "heard": None}]) is None


@pytest.mark.slow
def test_a_real_voice_cut_short_is_heard_as_cut_and_the_whole_reply_is_not() -> None:
    """The hibari voice says the reply; the caller's track holds all of it after turn 1 and only its first
    sentence after turn 2 (the voice stopped); the real Whisper base listens to both."""
    voice = CpuVoiceTTS(voice="heart", engine=open_voice("heart"))
    pcm = asyncio.run(synthesize_pcm(voice, SAID))
    rate = voice.sample_rate
    first_sentence = int(len(pcm) * 0.45)
    speaker = Loudspeaker(sample_rate=rate)
    speaker.track.add(10.5, pcm)
    speaker.track.add(30.5, pcm[:first_sentence])
    turns = [turn("whole", 10.0, 500, SAID), turn("cut", 30.0, 500, SAID)]
    res = CallResult(
        pipeline="parley",
        t0=0.0,
        greeting_first_audio_ms=None,
        turns=turns,
        marks=[],
        mic=ScriptedMic(sample_rate=16000),
        speaker=speaker,
        filler_windows=[],
        errors=[],
        end=30.5 + len(pcm) / rate + 1.0,
    )
    turns[0].speech_start, turns[1].speech_start = 9.0, 29.0
    listen_call(res, Listener("base"))
    whole, cut = turns[0].heard, turns[1].heard
    assert whole is not None and cut is not None
    assert not whole["cut_off"] and whole["words_heard"] > 0.8, whole
    assert cut["cut_off"] and cut["heard_to"] < cut["said"] - 3, cut


# the backchannels a call plan marks, counted in benchmarks.report


def test_backchannels_count_when_they_stop_the_agent_or_get_answered() -> None:
    def t(
        file: str, run: int, reply: str, completed: str | None, backchannel: bool = False
    ) -> dict[str, object]:
        return {
            "call": "c",
            "run": run,
            "file": file,
            "reply_text": reply,
            "completed_reply": completed,
            "backchannel": backchannel,
        }

    turns = [
        t("06", 0, "Sure, Thursday.", "Sure, Thursday."),  # played to its end over the mm-hmm
        t("07", 0, "", "", backchannel=True),
        t("06", 1, "You're welcome!", ""),  # stopped by the mm-hmm ...
        t("07", 1, "No worries.", "No worries.", backchannel=True),  # ... and the mm-hmm answered
    ]
    assert backchannels(turns) == {"said": 2, "stopped_the_agent": 1, "answered": 1}
    assert backchannels(turns[:1]) is None


def test_the_call_plan_marks_backchannel_turns_by_file(tmp_path: Path) -> None:
    plan = [
        TurnPlan(tmp_path / "06-sorry.wav", "during_reply"),
        TurnPlan(tmp_path / "07-mm.wav", "during_reply"),
    ]
    plan[1] = TurnPlan(plan[1].path, "during_reply", backchannel=True)
    res = CallResult(
        pipeline="parley",
        t0=0.0,
        greeting_first_audio_ms=None,
        turns=[turn("06-sorry.wav", 2.0, 300, "Okay."), turn("07-mm.wav", 4.0, None, "")],
        marks=[],
        mic=ScriptedMic(sample_rate=16000),
        speaker=Loudspeaker(sample_rate=24000),
    )
    mark_backchannels([("parley", "call", 0, res)], {"call": plan})
    assert [tr.backchannel for tr in res.turns] == [False, True]
    assert res.turns[1].as_json()["backchannel"] is True
