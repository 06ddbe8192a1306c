"""What the turn detector needs from a live AgentSession, and the backchannel filter in the STT path.

`TurnHooks.attach(session)` follows the caller's and the agent's states (public session events), so the
detector knows when the last speech ended and whether the caller started talking over the agent.
`TurnHooks.stt_node(...)` wraps the agent's STT node: it taps the caller audio into the buffer the audio
end-of-turn model reads, and drops transcripts that are only a backchannel said over the agent — so the
framework never sees words, never pauses or interrupts the agent, and never commits a turn for them. Settled
words that do pass while the caller's voice holds the agent's reply paused end that reply first, so the
turn's preflight can start the next one (`TurnHooks.end_paused_reply`). A transcript that holds the caller's
whole turn, decoded again as one (`plugins.whisper` with `whole_turn`), replaces the turn's earlier FINALs in
the session instead of following them (`TurnHooks.replace_turn_text`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import stt

from plugins.whisper.stream import turn_text

from .audio_eot import AudioTurnBuffer
from .interruption_policy import Overlap, OverlapVerdict, classify_overlap
from .options import ProfileParams, TurnOptions

logger = logging.getLogger("parley.turns")

_TEXT_EVENTS = (
    stt.SpeechEventType.INTERIM_TRANSCRIPT,
    stt.SpeechEventType.PREFLIGHT_TRANSCRIPT,
    stt.SpeechEventType.FINAL_TRANSCRIPT,
)
_SETTLED_EVENTS = (stt.SpeechEventType.PREFLIGHT_TRANSCRIPT, stt.SpeechEventType.FINAL_TRANSCRIPT)
_END_REPLY_TIMEOUT_S = 0.3
"""How long the STT node waits for the cut-short reply to reach the context before passing the words on."""


class TurnHooks:
    """Per-session turn state shared by the detector and the STT-node filter (one per AgentSession)."""

    def __init__(self, options: TurnOptions, params: ProfileParams) -> None:
        self.options = options
        self.params = params
        self.audio = AudioTurnBuffer()
        self.last_speech_end: float | None = None
        self.agent_speaking = False
        self.replies_started = 0
        """Agent replies begun so far: a new one means the caller's previous turn is over."""
        self.overlapping = False
        """True while the caller's current utterance started over the agent's speech."""
        self.caller_speaking = False
        self.continuing = False
        """True while the caller's current utterance goes on with a turn the agent answered too early
        (within `max_delay` of their last words): never a backchannel."""
        self._replies_at_speech_end = 0
        """`replies_started` when the caller's previous utterance ended."""
        self._voice_ended_at: float | None = None
        """Wall-clock time the VAD said the caller's latest utterance ended (not back-dated)."""
        self.backchannels_ignored = 0
        self._overlap_read: tuple[float, OverlapVerdict] | None = None  # (when, verdict) of the last words
        self.floor_listeners: list[Callable[[], None]] = []
        """Called when words said over the agent (an interim is enough) take the floor."""
        self._speech_started_at = 0.0
        self.pending_finals = 0
        """Caller utterances (VAD speech starts) of this turn whose FINAL has not come through the STT node.
        A count, not a flag: the FINAL of a first fragment may arrive while a second is being spoken, and
        must not mark the turn's text as complete."""
        self.final_arrived = asyncio.Event()
        """Set when every pending FINAL has come (`pending_finals` back to 0)."""
        self.stt_node_running = False
        self.transcript_listeners: list[Callable[[stt.SpeechEvent], None]] = []
        """Told of every transcript event the session is given (after the backchannel filter)."""
        self._stt_pipeline: Any | None = None
        self.speech_end_listeners: list[Callable[[float], None]] = []
        """Called with the end time of each caller utterance (the detector starts its audio model there)."""
        self._attached = False
        self._session: Any | None = None
        self._stt: Any | None = None
        """The STT behind the node, told when the agent answers (`new_turn()`, where it has one)."""
        self._replies_at_final = 0
        """`replies_started` when the last FINAL came: a whole-turn text revises only the same turn."""
        self.agent_line = ""
        """The agent's newest line in the chat context (as far as it was said): the caller's next words
        answer it, and the LM end-of-turn scorer reads them after it."""
        self.agent_line_listeners: list[Callable[[str], None]] = []
        """Told of each new `agent_line` (the detector has the scorer read it ahead)."""

    # -- session events ------------------------------------------------------------------------------------
    def attach(self, session: Any) -> None:
        """Follow `user_state_changed` / `agent_state_changed` of an AgentSession (call before start)."""
        if self._attached:
            return
        session.on("user_state_changed", self.on_user_state)
        session.on("agent_state_changed", self.on_agent_state)
        session.on("conversation_item_added", self.on_item_added)
        self._session = session
        self._attached = True

    def on_user_state(self, ev: Any) -> None:
        self.caller_speaking = ev.new_state == "speaking"
        if ev.new_state == "speaking":
            self._speech_started_at = time.time()
            self.overlapping = self.agent_speaking or self._reply_held()
            # the caller goes on within a pause the policy would have waited out (`max_delay`) while the
            # agent has begun an answer to their last words: the answer came too early, and whatever the
            # caller says now is more of their turn, not a reaction to the answer
            gap = None if self.last_speech_end is None else float(ev.created_at) - self.last_speech_end
            self.continuing = (
                self.overlapping
                and self.replies_started > self._replies_at_speech_end
                and gap is not None
                and gap <= self.params.endpoint.max_delay
            )
            self.pending_finals += 1
            self.final_arrived.clear()
        elif ev.old_state == "speaking":
            # the framework back-dates this event to the end of the speech (VAD silence subtracted)
            self.last_speech_end = float(ev.created_at)
            self._replies_at_speech_end = self.replies_started
            self._voice_ended_at = time.time()
            self._flush_stt()
            for listener in self.speech_end_listeners:
                listener(self.last_speech_end)

    def _reply_held(self) -> bool:
        """A reply is on air but paused by the caller's voice (the agent state is not "speaking" then): a
        second backchannel inside the pause is still said over the agent."""
        handle = self._session.current_speech if self._session is not None else None
        return (
            handle is not None and not handle.interrupted and not handle.done() and self.replies_started > 0
        )

    def _flush_stt(self) -> None:
        """Ask a manual-flush STT for its FINAL as soon as the VAD says the caller stopped.

        LiveKit flushes only after asking the turn detector, and while the last words are not final yet
        the detector can only judge the stale text of the turn so far; on an "unlikely" answer the session
        then holds the flush for max_delay/2. Flushing here (in audio order, like the session does) gets the
        FINAL at once and the detector re-runs on the whole text.
        """
        pipeline = self._stt_pipeline
        try:
            if pipeline is not None and pipeline.manual_flush:
                pipeline.flush()
        except Exception as e:  # private livekit-agents 1.8.9 API: degrade to LiveKit's own flush timing
            logger.warning("could not flush the STT at end of speech: %s", e)
            self._stt_pipeline = None

    def on_agent_state(self, ev: Any) -> None:
        self.agent_speaking = ev.new_state == "speaking"
        busy = ("thinking", "speaking")
        if ev.new_state in busy and getattr(ev, "old_state", None) not in busy:
            self.replies_started += 1
            new_turn = getattr(self._stt, "new_turn", None)
            if callable(new_turn):
                new_turn()  # the caller's next words are a turn of their own, not more of this one

    def on_item_added(self, ev: Any) -> None:
        """Keep the agent's newest line (livekit-agents adds a reply when it ends or is cut short)."""
        item = getattr(ev, "item", None)
        if getattr(item, "role", None) != "assistant":
            return
        text = getattr(item, "text_content", None)
        if isinstance(text, str) and text.strip():
            self.agent_line = text.strip()
            for listener in self.agent_line_listeners:
                listener(self.agent_line)

    def replace_turn_text(self, ev: stt.SpeechEvent) -> None:
        """Make a whole-turn transcript the turn's text: livekit-agents joins a turn's FINALs, appending
        each new one's text (a PREFLIGHT's likewise), and the event's text is the end of the whole turn,
        so the joined text is set to the rest of it first. The caller's transcript display keeps the
        appended parts. Private livekit-agents 1.8.9 state (`AudioRecognition._audio_transcript`)."""
        whole = turn_text(ev)
        part = ev.alternatives[0].text.strip() if ev.alternatives else ""
        same_turn = self.replies_started == self._replies_at_final  # no answer since the FINAL it revises
        if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
            self._replies_at_final = self.replies_started
        if whole is None or not part or not whole.endswith(part) or not same_turn or self._session is None:
            return
        try:
            recognition = self._session._activity._audio_recognition
            if recognition is not None and recognition._audio_transcript.strip():
                # only text the session still holds is revised: once the turn's earlier words were
                # committed (the agent is about to answer them), putting them back would say them twice
                recognition._audio_transcript = whole[: len(whole) - len(part)].strip()
        except AttributeError as e:  # another livekit-agents: the earlier FINALs stand, the part follows
            logger.warning("could not replace the turn's text with its whole-turn transcript: %s", e)

    @property
    def awaiting_final(self) -> bool:
        return self.pending_finals > 0

    @property
    def text_is_stale(self) -> bool:
        """Some speech of this turn has no final transcript yet (known only when the STT node is ours)."""
        return self.stt_node_running and self.pending_finals > 0

    def on_final(self) -> None:
        """A FINAL came through the STT node (passed on or dropped): one utterance fewer to wait for."""
        self.pending_finals = max(0, self.pending_finals - 1)
        if self.pending_finals == 0:
            self.final_arrived.set()

    def give_up_on_finals(self) -> None:
        """The detector waited long enough: utterances the STT never finalised (a cough, audio with no
        speech in it) stop counting, so they cannot hold later turns."""
        self.pending_finals = 0
        self.final_arrived.set()

    # -- STT path ------------------------------------------------------------------------------------------
    def should_drop(self, ev: stt.SpeechEvent) -> bool:
        """True for a transcript that is only a backchannel said over the agent."""
        if not (self.options.ignore_backchannels and self.overlapping) or ev.type not in _TEXT_EVENTS:
            return False
        if self.continuing:
            return False  # more of a turn answered too early ("nine in the morning."), however unsure
        if not ev.alternatives:
            return False
        alt = ev.alternatives[0]
        korean = str(alt.language or "").lower().startswith("ko")
        sound = overlap_sound(alt)
        verdict = classify_overlap(alt.text, "ko" if korean else None, sound)
        if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
            # what decided it, without the words: a misread "mm-hmm" can be told from a real barge-in here
            logger.debug(
                "words over the agent",
                extra={
                    "verdict": verdict.value,
                    "words": len(alt.text.split()),
                    "speech_s": None if sound.speech_s is None else round(sound.speech_s, 2),
                    "word_p": None if sound.word_probability is None else round(sound.word_probability, 2),
                },
            )
        if verdict is not OverlapVerdict.EMPTY:
            self._overlap_read = (time.time(), verdict)
        if verdict is OverlapVerdict.BARGE_IN:
            for listener in self.floor_listeners:
                listener()
        if verdict is OverlapVerdict.BACKCHANNEL:
            if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
                self.backchannels_ignored += 1
            return True
        return False

    def heard_listening_since(self, t: float) -> bool:
        """The caller's latest words over the agent, written after wall time `t`, read as a backchannel: a
        ducked reply stays on for them however long they take to say (worker/duck.py)."""
        read = self._overlap_read
        return read is not None and read[0] >= t and read[1] is OverlapVerdict.BACKCHANNEL

    def floor_taken(self) -> bool:
        """The caller's words over the agent since their voice began take the floor (worker/duck.py)."""
        read = self._overlap_read
        return read is not None and read[0] >= self._speech_started_at and read[1] is OverlapVerdict.BARGE_IN

    def _reply_stands_paused(self, ev: stt.SpeechEvent) -> bool:
        """True for settled words over the agent's reply while the caller's voice holds it paused."""
        if ev.type not in _SETTLED_EVENTS or not ev.alternatives or not ev.alternatives[0].text.strip():
            return False
        return self._reply_paused()

    def _reply_paused(self) -> bool:
        """The caller's voice holds an interruptible reply paused."""
        if not self.overlapping or self.agent_speaking or self._session is None:
            return False
        handle = self._session.current_speech
        return handle is not None and not handle.interrupted and handle.allow_interruptions

    async def end_paused_reply(self, ev: stt.SpeechEvent) -> None:
        """Settled words over a paused reply (a PREFLIGHT or FINAL the backchannel filter let through) are a
        barge-in: end the reply before the session sees them.

        livekit-agents pauses the reply on the caller's voice and interrupts it only once a FINAL has been
        handled, in a task of its own; until then it starts no preemptive generation for the turn, and one
        started in that window read a context without the cut-short reply, so the end of turn threw it away.
        Every barge-in turn then waited for its LLM request until the turn ended. Interrupting here (and
        waiting until the cut-short reply is in the context) lets the preflight start the reply.
        """
        if not self._reply_stands_paused(ev):
            return
        assert self._session is not None
        try:
            done = self._session.interrupt()
            await asyncio.wait_for(asyncio.shield(done), timeout=_END_REPLY_TIMEOUT_S)
            logger.debug("barge-in ended the paused reply before its words reached the session")
        except (RuntimeError, TimeoutError) as e:  # a reply that disallows interruptions, a slow playout
            logger.debug("could not end the paused reply early: %s", e)

    def resume_paused_reply(self, delay: float = 0.0) -> bool:
        """The caller's voice paused the reply and the recogniser's FINAL says it held no real words (only a
        backchannel: `delay` 0, resume now; nothing: after `false_interruption_timeout_s` from the end of the
        voice). The session's own timer is only the ceiling (`resume_ceiling_s`), so a FINAL that comes late
        on a busy host still decides, instead of the agent resuming over a caller it has not read yet. Uses
        livekit-agents 1.8.9's own resume path (private API: on any change the session still resumes at the
        ceiling)."""
        session = self._session
        if session is None or self.agent_speaking or not self.overlapping or self.caller_speaking:
            return False
        try:
            activity = session._activity
            paused = activity._paused_speech if activity is not None else None
            if paused is None or paused.handle.interrupted:  # unreadable speech ended it (on_unheard)
                return False
            activity._start_false_interruption_timer(max(0.0, delay))
            logger.debug("no words over a paused reply: resuming it", extra={"after_s": round(delay, 2)})
            return True
        except Exception as e:
            logger.debug("could not resume the paused reply early: %s", e)
            return False

    async def tap_audio(self, audio: AsyncIterable[rtc.AudioFrame]) -> AsyncIterator[rtc.AudioFrame]:
        """Pass frames through unchanged, copying them (mono int16) into the end-of-turn audio buffer."""
        async for frame in audio:
            try:
                pcm = np.frombuffer(frame.data, dtype=np.int16)
                if frame.num_channels > 1:
                    pcm = pcm.reshape(-1, frame.num_channels)[:, 0]
                self.audio.push(pcm, frame.sample_rate, time.time())
            except Exception as e:  # the tap must never break the STT path
                logger.warning("audio tap failed: %s", e)
            yield frame

    async def stt_node(
        self, agent: Any, audio: AsyncIterable[rtc.AudioFrame], model_settings: Any
    ) -> AsyncIterator[stt.SpeechEvent]:
        """Drop-in body for `Agent.stt_node`: the default STT node, tapped and backchannel-filtered."""
        from livekit.agents import Agent

        self._stt_pipeline = _current_stt_pipeline()
        self._stt = getattr(agent, "stt", None) or getattr(self._session, "stt", None)
        self.stt_node_running = True
        unheard = getattr(self._stt, "unheard_listeners", None)
        if isinstance(unheard, list) and self.on_unheard not in unheard:
            unheard.append(self.on_unheard)
        try:
            async for ev in Agent.default.stt_node(agent, self.tap_audio(audio), model_settings):
                if isinstance(ev, stt.SpeechEvent) and ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
                    self.on_final()  # the STT finished an utterance, whether we pass it on or not
                    if not _has_words(ev):
                        self.resume_paused_reply(self._resume_delay())
                if isinstance(ev, stt.SpeechEvent) and self.should_drop(ev):
                    if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
                        self.resume_paused_reply()
                    if ev.type != stt.SpeechEventType.INTERIM_TRANSCRIPT:
                        yield _cleared(ev)
                    continue
                if isinstance(ev, stt.SpeechEvent) and ev.alternatives:
                    await self.end_paused_reply(ev)
                    self.replace_turn_text(ev)
                    for listener in self.transcript_listeners:
                        listener(ev)
                yield ev
        finally:
            if isinstance(unheard, list) and self.on_unheard in unheard:
                unheard.remove(self.on_unheard)

    def _resume_delay(self) -> float:
        """What is left of `false_interruption_timeout_s` since the caller's voice ended."""
        ended = self._voice_ended_at if self._voice_ended_at is not None else time.time()
        return ended + self.params.false_interruption_timeout_s - time.time()

    def on_unheard(self, speech_s: float) -> None:
        """The recogniser heard the caller speak over a paused reply but could write none of it (too unsure,
        or a loop). Unknown speech is a barge-in (interruption_policy.py), as it is with words: the reply
        ends here instead of resuming after the false-interruption timeout, and the caller is asked to
        repeat (worker/repeat_request.py). A short unsure sound, which may be a hum, never gets here: the
        STT reports only utterances from `GuardOptions.unheard_min_speech_s` (1 s) of speech on."""
        session = self._session
        if session is None or not self._reply_paused() or not self._reply_held():
            return
        logger.debug(
            "unreadable speech over a paused reply: ending it", extra={"speech_s": round(speech_s, 2)}
        )
        try:
            session.interrupt()
        except RuntimeError as e:  # the reply disallows interruptions after all
            logger.debug("could not end the paused reply: %s", e)


def _has_words(ev: stt.SpeechEvent) -> bool:
    return bool(ev.alternatives and ev.alternatives[0].text.strip())


def _current_stt_pipeline() -> Any | None:
    """The session's STT pipeline feeding this STT node (set by livekit-agents in the node's context)."""
    try:
        from livekit.agents.voice.audio_recognition import _STTPipelineContextVar

        return _STTPipelineContextVar.get(None)
    except Exception:
        return None


def overlap_sound(alt: stt.SpeechData) -> Overlap:
    """How long the caller's voice lasted and how sure the recogniser was of its words (the STT's speech
    span and per-word probabilities; either None when the STT does not report it)."""
    span = alt.end_time - alt.start_time if alt.end_time > alt.start_time else None
    probs = [float(p) for w in alt.words or () if (p := getattr(w, "confidence", None)) is not None]
    return Overlap(speech_s=span, word_probability=sum(probs) / len(probs) if probs else None)


def _cleared(ev: stt.SpeechEvent) -> stt.SpeechEvent:
    """An empty interim in place of a dropped FINAL/PREFLIGHT: the session forgets any interim words it
    still holds for this utterance, so they cannot count toward the next interruption."""
    alt = ev.alternatives[0]
    return stt.SpeechEvent(
        type=stt.SpeechEventType.INTERIM_TRANSCRIPT,
        request_id=ev.request_id,
        alternatives=[stt.SpeechData(language=alt.language, text="")],
    )
