"""Worker-facing wiring: local models pinned, profiles from the participant kind, detector timing."""

from __future__ import annotations

import time
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from livekit import rtc
from livekit.agents import AgentSession, llm, stt
from livekit.agents.language import LanguageCode
from livekit.agents.types import TimedString
from livekit.plugins import silero

from turn_detection import (
    ParleyTurnDetector,
    Profile,
    TurnHooks,
    TurnOptions,
    build_turn_handling,
    params_for,
    profile_for_participant,
)
from turn_detection.audio_eot import AudioTurnBuffer, load_model, predict_window


def test_sip_callers_get_the_telephony_profile() -> None:
    assert profile_for_participant(rtc.ParticipantKind.PARTICIPANT_KIND_SIP) is Profile.TELEPHONY
    assert profile_for_participant(rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD) is Profile.WEB
    assert profile_for_participant(SimpleNamespace(kind=rtc.ParticipantKind.PARTICIPANT_KIND_SIP)) is (
        Profile.TELEPHONY
    )
    assert profile_for_participant(None) is Profile.WEB


async def test_session_kwargs_pin_every_mode_to_local_models() -> None:
    setup = build_turn_handling(TurnOptions(), Profile.TELEPHONY)
    kw = setup.session_kwargs
    assert isinstance(kw["vad"], silero.VAD)
    th = kw["turn_handling"]
    assert th["turn_detection"] is setup.detector
    assert th["interruption"]["mode"] == "vad"  # "adaptive" is LiveKit Cloud
    # phone callers pause the agent with their voice alone, as web callers do: words decide afterwards
    assert th["interruption"]["min_words"] == 0
    assert th["interruption"]["min_duration"] == pytest.approx(setup.params.interrupt_min_speech_s)
    session = AgentSession(**kw)
    # the session took our detector and VAD instead of its cloud-capable defaults
    assert session.turn_detection is setup.detector
    assert session.interruption_detection == "vad"
    assert session.vad is kw["vad"]
    assert setup.params.vad.sample_rate == 8000


def test_profiles_differ_and_delay_scale_applies() -> None:
    web, tel = params_for(Profile.WEB, TurnOptions()), params_for(Profile.TELEPHONY, TurnOptions())
    assert tel.vad.activation_threshold > web.vad.activation_threshold
    assert tel.endpoint.min_delay >= web.endpoint.min_delay
    slow = params_for(Profile.WEB, TurnOptions(delay_scale=2.0))
    assert slow.endpoint.hesitation_delay == pytest.approx(2 * web.endpoint.hesitation_delay)
    for profile in Profile:  # every delay scales, the sequence hold too: a snappier table stays valid
        base, quick = params_for(profile, TurnOptions()), params_for(profile, TurnOptions(delay_scale=0.5))
        assert quick.endpoint.sequence_delay == pytest.approx(0.5 * base.endpoint.sequence_delay)
        assert quick.endpoint.max_delay == pytest.approx(0.5 * base.endpoint.max_delay)
    with pytest.raises(ValueError):
        TurnOptions(delay_scale=10)
    with pytest.raises(ValueError):
        TurnOptions(language="fr")  # type: ignore[arg-type]


def _ctx(*user_texts: str) -> llm.ChatContext:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="assistant", content="How can I help?")
    for t in user_texts:
        ctx.add_message(role="user", content=t)
    return ctx


def _detector() -> tuple[ParleyTurnDetector, TurnHooks]:
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params_for(Profile.WEB, TurnOptions()))
    return ParleyTurnDetector(hooks), hooks


async def test_complete_turn_answers_at_once_with_high_probability() -> None:
    det, hooks = _detector()
    hooks.last_speech_end = time.time()
    t0 = time.monotonic()
    p = await det.predict_end_of_turn(_ctx("What time do you open on Sunday?"))
    assert p >= hooks.params.endpoint.confident_p
    assert time.monotonic() - t0 < hooks.params.endpoint.hesitation_delay  # no hold for a clear end
    assert await det.unlikely_threshold(None) == hooks.params.endpoint.unlikely_p


async def test_trailing_conjunction_returns_below_the_unlikely_threshold() -> None:
    det, hooks = _detector()
    hooks.last_speech_end = time.time()
    p = await det.predict_end_of_turn(_ctx("I want to book a table and"))
    # below the threshold the session itself waits its max_delay: the detector must not also hold
    assert p < await det.unlikely_threshold(None)


async def test_ambiguous_turn_is_held_until_speech_end_plus_delay() -> None:
    web = params_for(Profile.WEB, TurnOptions())
    wide = replace(web, endpoint=replace(web.endpoint, confident_p=0.7, unlikely_p=0.3))  # 0.6 in between
    hooks = TurnHooks(TurnOptions(use_audio_model=False), wide)
    det = ParleyTurnDetector(hooks)
    hooks.last_speech_end = time.time()
    p = await det.predict_end_of_turn(_ctx("I need two tickets"))
    decision = det.last_decision
    assert decision is not None
    assert hooks.params.endpoint.min_delay < decision.delay < hooks.params.endpoint.max_delay
    assert time.time() >= hooks.last_speech_end + decision.delay - 0.01
    assert p == pytest.approx(decision.probability)


def test_only_the_current_user_turn_is_read() -> None:
    _detector()
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="Old question?")
    ctx.add_message(role="assistant", content="Answer.")
    ctx.add_message(role="user", content="I'd like to book")
    ctx.add_message(role="user", content="a table for")
    from turn_detection.detector import _last_user_text

    assert _last_user_text(ctx) == "I'd like to book a table for"


def _speech_event(kind: stt.SpeechEventType, text: str) -> stt.SpeechEvent:
    return stt.SpeechEvent(type=kind, alternatives=[stt.SpeechData(language=LanguageCode("en"), text=text)])


def test_filter_drops_backchannels_only_over_agent_speech() -> None:
    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    final = stt.SpeechEventType.FINAL_TRANSCRIPT
    hooks.on_agent_state(SimpleNamespace(new_state="speaking"))
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=1.0))
    assert hooks.should_drop(_speech_event(final, "Mm-hmm."))
    assert hooks.should_drop(_speech_event(stt.SpeechEventType.INTERIM_TRANSCRIPT, "yeah"))
    assert not hooks.should_drop(_speech_event(final, "Wait, stop."))
    assert not hooks.should_drop(stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH))
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=2.5))
    assert hooks.last_speech_end == 2.5
    # a "yeah" answering a question (agent silent) is a turn, not a backchannel
    hooks.on_agent_state(SimpleNamespace(new_state="listening"))
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=3.0))
    assert not hooks.should_drop(_speech_event(final, "Yeah."))
    assert hooks.backchannels_ignored == 1


def test_filter_reads_a_short_unsure_sound_over_the_agent_as_listening() -> None:
    """The STT's speech span and word probabilities reach the policy: tiny.en's "Mama." for a hummed
    "mm-hmm" (0.4 s, unsure) is dropped; the same words said for a second and a half, or sure, are a turn."""
    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    final = stt.SpeechEventType.FINAL_TRANSCRIPT
    hooks.on_agent_state(SimpleNamespace(new_state="speaking"))
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=1.0))

    def said(seconds: float, probability: float) -> stt.SpeechEvent:
        data = stt.SpeechData(
            language=LanguageCode("en"),
            text="Mama.",
            start_time=10.0,
            end_time=10.0 + seconds,
            words=[TimedString("Mama.", confidence=probability)],
        )
        return stt.SpeechEvent(type=final, alternatives=[data])

    assert hooks.should_drop(said(0.4, 0.36))
    assert not hooks.should_drop(said(1.5, 0.36))
    assert not hooks.should_drop(said(0.4, 0.9))
    assert not hooks.should_drop(_speech_event(final, "Mama."))  # nothing known besides the words


def test_a_continuation_after_an_early_answer_is_never_a_backchannel() -> None:
    """The agent answered a pause inside the caller's turn; the caller goes on, briefly and unsurely
    ("nine in the morning.", 0.5 s, mean probability 0.4), over the answer: more of the turn, not listening.
    The same sound well after the caller's last words, over an answer, is still read as a backchannel."""
    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    final = stt.SpeechEventType.FINAL_TRANSCRIPT

    def said(text: str) -> stt.SpeechEvent:
        data = stt.SpeechData(
            language=LanguageCode("en"),
            text=text,
            start_time=10.0,
            end_time=10.5,
            words=[TimedString(w, confidence=0.4) for w in text.split()],
        )
        return stt.SpeechEvent(type=final, alternatives=[data])

    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=1.0))
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=2.0))
    hooks.on_agent_state(SimpleNamespace(old_state="listening", new_state="thinking"))
    hooks.on_agent_state(SimpleNamespace(old_state="thinking", new_state="speaking"))
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=3.4))
    assert hooks.continuing and not hooks.should_drop(said("nine in the morning."))
    assert not hooks.should_drop(said("Mm-hmm."))  # whatever it says: the turn is the caller's
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=4.0))
    # later in the same answer, long after the caller's last words: listening again
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=9.0))
    assert not hooks.continuing and hooks.should_drop(said("Mm-hmm."))
    assert hooks.should_drop(said("in a month."))  # a hum misread, unsure and short


def test_a_whole_turn_text_never_puts_back_words_already_committed() -> None:
    """The session committed the turn's first words (the agent is about to answer them) before the STT's
    whole-turn reading of the caller's next words came: those words go alone, the first sentence is not
    said twice in the next user turn."""
    from plugins.whisper.stream import TURN_TEXT

    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    recognition = SimpleNamespace(_audio_transcript="")
    hooks.attach(
        SimpleNamespace(on=lambda *a: None, _activity=SimpleNamespace(_audio_recognition=recognition))
    )
    ev = _speech_event(stt.SpeechEventType.FINAL_TRANSCRIPT, "nine in the morning.")
    ev.alternatives[0].metadata = {TURN_TEXT: "It is on Monday at nine in the morning."}
    hooks.replace_turn_text(ev)
    assert recognition._audio_transcript == ""


async def test_audio_tap_passes_frames_and_fills_the_buffer() -> None:
    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    frames = [rtc.AudioFrame(np.full(480, 1000, np.int16).tobytes(), 48000, 1, 480) for _ in range(50)]

    async def source():  # type: ignore[no-untyped-def]
        for f in frames:
            yield f

    out = [f async for f in hooks.tap_audio(source())]
    assert out == frames
    window = hooks.audio.window(time.time() + 1)
    assert 7000 <= window.size <= 8000  # 0.5 s at 16 kHz (resampler latency aside)


def test_bundled_audio_model_runs_offline() -> None:
    model = load_model()
    assert model is not None
    buf = AudioTurnBuffer()
    buf.push(np.zeros(32000, np.int16), 16000, end_time=10.0)
    assert buf.window(9.5).size == int(1.2 * 16000)
    p = predict_window(model, buf.window(10.0))
    assert p is not None and 0.0 <= p <= 1.0


async def test_stt_node_replaces_a_dropped_final_with_an_empty_interim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from livekit.agents import Agent

    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    hooks.on_agent_state(SimpleNamespace(new_state="speaking"))
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=1.0))
    interim, final = stt.SpeechEventType.INTERIM_TRANSCRIPT, stt.SpeechEventType.FINAL_TRANSCRIPT
    upstream = [
        stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH),
        _speech_event(interim, "so the"),  # passes: not a backchannel
        _speech_event(interim, "yeah"),  # dropped
        _speech_event(final, "Yeah."),  # dropped, and the held interim words cleared
    ]

    async def fake_default(agent, audio, model_settings):  # type: ignore[no-untyped-def]
        async for _ in audio:
            pass
        for ev in upstream:
            yield ev

    monkeypatch.setattr(Agent.default, "stt_node", fake_default)

    async def no_audio():  # type: ignore[no-untyped-def]
        return
        yield

    out = [ev async for ev in hooks.stt_node(None, no_audio(), None)]
    assert [e.type for e in out] == [stt.SpeechEventType.START_OF_SPEECH, interim, interim]
    assert out[1].alternatives[0].text == "so the"
    assert out[2].alternatives[0].text == ""


async def test_a_whole_turn_transcript_becomes_the_turns_text_and_an_answer_starts_a_new_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session's joined text of the turn is set so that, with the event's own words appended, it is
    the whole-turn reading; and the STT is told once per answer that the caller's next words start anew."""
    from livekit.agents import Agent

    from plugins.whisper.stream import TURN_TEXT

    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    recognition = SimpleNamespace(_audio_transcript="It is on Monday yet.")
    hooks.attach(
        SimpleNamespace(on=lambda *a: None, _activity=SimpleNamespace(_audio_recognition=recognition))
    )
    answered: list[int] = []
    agent = SimpleNamespace(stt=SimpleNamespace(new_turn=lambda: answered.append(1)))
    final = stt.SpeechEventType.FINAL_TRANSCRIPT
    seen: list[str] = []

    def whole(part: str, turn: str) -> stt.SpeechEvent:
        ev = _speech_event(final, part)
        ev.alternatives[0].metadata = {TURN_TEXT: turn}
        return ev

    async def fake_default(agent, audio, model_settings):  # type: ignore[no-untyped-def]
        async for _ in audio:
            pass
        yield whole("in the evening.", "It is on Monday at nine in the morning.")  # not its end: ignored
        seen.append(recognition._audio_transcript)
        yield whole("nine in the morning.", "It is on Monday at nine in the morning.")
        seen.append(recognition._audio_transcript)

    monkeypatch.setattr(Agent.default, "stt_node", fake_default)

    async def no_audio():  # type: ignore[no-untyped-def]
        return
        yield

    out = [ev async for ev in hooks.stt_node(agent, no_audio(), None)]
    assert len(out) == 2 and seen == ["It is on Monday yet.", "It is on Monday at"]
    hooks.on_agent_state(SimpleNamespace(old_state="listening", new_state="thinking"))
    hooks.on_agent_state(SimpleNamespace(old_state="thinking", new_state="speaking"))  # the same answer
    assert answered == [1]
    # a whole-turn text that reaches the session after the answer began is not the new turn's text
    recognition._audio_transcript = ""
    hooks.replace_turn_text(whole("nine in the morning.", "It is on Monday at nine in the morning."))
    assert recognition._audio_transcript == ""


class SlowModel:
    """Stands in for the native model: a fixed probability after a short think."""

    calls = 0

    def predict(self, pcm: np.ndarray) -> float:
        SlowModel.calls += 1
        time.sleep(0.2)
        return 0.9


async def test_audio_prediction_starts_at_speech_end_and_survives_a_cancelled_call() -> None:
    import asyncio

    hooks = TurnHooks(TurnOptions(), params_for(Profile.WEB, TurnOptions()))
    det = ParleyTurnDetector(hooks, audio_model=SlowModel())
    hooks.audio.push(np.zeros(16000, np.int16), 16000, end_time=time.time())
    SlowModel.calls = 0
    end = time.time() - 0.2
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=end))
    first = asyncio.create_task(det.predict_end_of_turn(_ctx("What time do you open?")))
    await asyncio.sleep(0.05)
    first.cancel()  # the caller resumed; the session cancels its end-of-turn task
    with pytest.raises(asyncio.CancelledError):
        await first
    p = await det.predict_end_of_turn(_ctx("What time do you open?"))
    assert p > 0.8
    assert SlowModel.calls == 1  # one prediction per utterance end, shared by both calls


async def test_stale_text_waits_for_the_final_of_the_new_speech() -> None:
    import asyncio

    det, hooks = _detector()
    hooks.stt_node_running = True  # as when the agent's stt_node is wired through the hooks
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=time.time()))
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=time.time()))
    # the turn so far reads complete, but the words just spoken are not final yet: no answer until they are
    call = asyncio.create_task(det.predict_end_of_turn(_ctx("I need a taxi.")))
    await asyncio.sleep(0.1)
    assert not call.done()
    hooks.on_final()  # what the STT node does when a FINAL passes through
    assert await call < await det.unlikely_threshold(None)  # superseded: the FINAL re-runs the detector
    assert await det.predict_end_of_turn(_ctx("I need a taxi. To the airport.")) >= 0.7


async def test_stale_text_is_judged_when_no_final_comes() -> None:
    det, hooks = _detector()
    hooks.stt_node_running = True
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=time.time()))
    end = time.time() - hooks.params.endpoint.final_wait  # a cough long enough ago: its FINAL never came
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=end))
    assert await det.predict_end_of_turn(_ctx("What time do you open?")) >= 0.7


async def test_first_fragments_final_does_not_complete_a_turn_still_being_spoken() -> None:
    import asyncio

    det, hooks = _detector()
    hooks.stt_node_running = True
    now = time.time()
    # fragment 1 spoken and flushed; fragment 2 starts before fragment 1's FINAL arrives
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=now))
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=now))
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=now))
    hooks.on_final()  # fragment 1's FINAL
    assert hooks.pending_finals == 1 and hooks.text_is_stale and not hooks.final_arrived.is_set()
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=time.time()))
    call = asyncio.create_task(det.predict_end_of_turn(_ctx("My number is 555.")))
    await asyncio.sleep(0.1)
    assert not call.done()  # fragment 2's words are not in yet: no judgement on fragment 1 alone
    hooks.on_final()
    assert hooks.pending_finals == 0 and hooks.final_arrived.is_set()
    assert await call < await det.unlikely_threshold(None)  # superseded by the call the FINAL triggers


async def test_finals_that_never_come_do_not_hold_later_turns() -> None:
    det, hooks = _detector()
    hooks.stt_node_running = True
    hooks.on_user_state(SimpleNamespace(old_state="listening", new_state="speaking", created_at=time.time()))
    end = time.time() - hooks.params.endpoint.final_wait
    hooks.on_user_state(SimpleNamespace(old_state="speaking", new_state="listening", created_at=end))
    await det.predict_end_of_turn(_ctx("What time do you open?"))
    assert hooks.pending_finals == 0 and not hooks.text_is_stale
    hooks.on_final()  # a late or extra FINAL never makes the count negative
    assert hooks.pending_finals == 0


async def test_a_hold_the_models_alone_ask_for_ends_at_its_own_delay_not_max_delay() -> None:
    # the recogniser's doubt about "war." reads the turn as unlikely to be over, and a policy whose
    # `model_hold` is under max_delay caps such a hold; LiveKit holds any probability under the threshold
    # to max_delay, so the detector times the hold itself and hands the turn over as likely over
    web = params_for(Profile.WEB, TurnOptions(delay_scale=0.5))
    params = replace(web, endpoint=replace(web.endpoint, model_hold=None))  # the cap: hesitation_delay
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params)
    det = ParleyTurnDetector(hooks)
    words = [TimedString("The", confidence=0.9), TimedString("bus", confidence=0.8)]
    words.append(TimedString("war.", confidence=0.05))
    final = stt.SpeechEvent(
        type=stt.SpeechEventType.FINAL_TRANSCRIPT,
        alternatives=[stt.SpeechData(language=LanguageCode("en"), text="The bus war.", words=words)],
    )
    for listener in hooks.transcript_listeners:
        listener(final)
    hooks.last_speech_end = time.time()
    p = await det.predict_end_of_turn(_ctx("The bus war."))
    held = time.time() - hooks.last_speech_end
    decision = det.last_decision
    assert decision is not None and decision.probability < params.endpoint.unlikely_p
    assert decision.delay == pytest.approx(params.endpoint.hesitation_delay)
    assert params.endpoint.hesitation_delay - 0.01 <= held < params.endpoint.max_delay
    assert p >= await det.unlikely_threshold(None)  # the session adds only min_delay, already past


async def test_the_last_words_probability_reaches_the_decision() -> None:
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params_for(Profile.WEB, TurnOptions()))
    det = ParleyTurnDetector(hooks)  # no LM scorer given: the decision is text and the last word
    words = [TimedString("The", confidence=0.9), TimedString("bus", confidence=0.8)]
    words.append(TimedString("war.", confidence=0.31))
    final = stt.SpeechEvent(
        type=stt.SpeechEventType.FINAL_TRANSCRIPT,
        alternatives=[
            stt.SpeechData(language=LanguageCode("en"), text="The bus war.", confidence=0.7, words=words)
        ],
    )
    for listener in hooks.transcript_listeners:
        listener(final)
    hooks.last_speech_end = time.time()
    await det.predict_end_of_turn(_ctx("The bus war."))
    assert det.last_decision is not None and det.last_decision.confidence == pytest.approx(0.31)
    unscored = replace(final, alternatives=[replace(final.alternatives[0], words=None)])
    for listener in hooks.transcript_listeners:
        listener(unscored)  # no words from the recogniser: unknown, not "very unsure"
    await det.predict_end_of_turn(_ctx("The bus war."))
    assert det.last_decision is not None and det.last_decision.confidence is None
    korean = replace(final.alternatives[0], text="내일 오전에", words=[TimedString("오전에", confidence=0.2)])
    for listener in hooks.transcript_listeners:
        listener(replace(final, alternatives=[korean]))
    await det.predict_end_of_turn(_ctx("내일 오전에"))
    # calibrated on English turns (as the LM term): a Korean turn's last word is not read
    assert det.last_decision is not None and det.last_decision.confidence is None
