"""Parley's turn detector: plugs into AgentSession as `turn_handling["turn_detection"]`.

It implements LiveKit's text turn-detector protocol (`predict_end_of_turn(chat_ctx)`), which the session
calls once the VAD says the caller stopped and a final transcript exists. The answer blends text cues, a
language model's end-of-sentence score (lm_eot.py, asked on every interim so it is ready by then) and
LiveKit's local audio end-of-turn model into a probability and a delay after the last speech. LiveKit itself
only knows two delays (endpointing min/max, picked by `probability < unlikely_threshold`), so for the range in
between the detector holds its answer until `last speech + delay`; the session then commits at once. A caller
who resumes cancels the wait (the session cancels the end-of-turn task on new speech).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from livekit.agents import stt

from plugins.whisper.stream import turn_text

from .audio_eot import TRAILING_SILENCE_S, load_model, predict_window
from .dialogue import expects_sequence
from .endpoint_policy import EndpointDecision, decide, lm_judges
from .eot_text import EotTextModel
from .lm_eot import LmEotScorer
from .session_hooks import TurnHooks
from .text_cues import detect_language, text_cue

logger = logging.getLogger("parley.turns")

_ORIGINS: dict[Any, str] = {
    stt.SpeechEventType.INTERIM_TRANSCRIPT: "interim",
    stt.SpeechEventType.PREFLIGHT_TRANSCRIPT: "preflight",
    stt.SpeechEventType.FINAL_TRANSCRIPT: "final",
}


def _last_user_text(chat_ctx: Any) -> str:
    """The caller's words of the current turn: the user messages after the last assistant message."""
    parts: list[str] = []
    for item in reversed(list(getattr(chat_ctx, "items", []))):
        role = getattr(item, "role", None)
        if role == "assistant":
            break
        if role == "user":
            text = getattr(item, "text_content", None)
            if text:
                parts.append(text)
    return " ".join(reversed(parts))


async def _no_score() -> float | None:
    return None


def last_word_probability(speech: Any) -> float | None:
    """The probability an STT gave the last word of a transcript (`SpeechData.words[-1].confidence`), or
    None when it gave none."""
    words = getattr(speech, "words", None)
    if not words:
        return None
    p = getattr(words[-1], "confidence", None)
    return float(p) if isinstance(p, (int, float)) and 0.0 < p <= 1.0 else None


class ParleyTurnDetector:
    """Local end-of-turn detector (text + LiveKit v1-mini audio model + VAD silence). No network."""

    def __init__(
        self,
        hooks: TurnHooks,
        *,
        audio_model: Any | None = None,
        lm_scorer: LmEotScorer | None = None,
        text_model: EotTextModel | None = None,
    ) -> None:
        self._hooks = hooks
        self._opts = hooks.params.endpoint
        self._model = audio_model
        self._model_loaded = audio_model is not None or not hooks.options.use_audio_model
        self._text_model = text_model if self._opts.lm_weight > 0.0 else None
        """The trained end-of-turn text model (eot_text.py): in process, ~0.1 ms, so always in time; when
        given, the server scorer is not asked."""
        self._lm = lm_scorer if self._opts.lm_weight > 0.0 and self._text_model is None else None
        self.last_decision: EndpointDecision | None = None
        self._prefetched: tuple[float, asyncio.Task[float | None]] | None = None
        self._turn_prefix: tuple[int, str] = (-1, "")
        """(reply count, the caller's earlier words of this turn) when a decision was held."""
        self._confidence: float | None = None
        self._judging: set[asyncio.Task[None]] = set()
        """The recogniser's probability for the newest FINAL's last word (None: unknown)."""
        hooks.speech_end_listeners.append(self._prefetch)
        hooks.transcript_listeners.append(self._note_confidence)
        if self._lm is not None:
            hooks.transcript_listeners.append(self._prefetch_lm)
            hooks.agent_line_listeners.append(self._lm.warm)

    @property
    def model(self) -> str:
        return "parley-turns"

    @property
    def provider(self) -> str:
        return "parley"

    async def unlikely_threshold(self, language: Any = None) -> float | None:
        return self._opts.unlikely_p

    async def supports_language(self, language: Any = None) -> bool:
        return True

    def _audio_model(self) -> Any | None:
        if not self._model_loaded:  # built without build_turn_handling: load on first use
            self._model_loaded = True
            self._model = load_model()
        return self._model

    def _prefetch(self, speech_end: float) -> None:
        """Run the audio model as soon as the utterance ends, while the STT is still finishing its text."""
        if self._audio_model() is None:
            return
        try:
            task = asyncio.get_running_loop().create_task(self.audio_probability(speech_end))
        except RuntimeError:  # no running loop (unit tests driving the hooks by hand)
            return
        self._prefetched = (speech_end, task)

    def turn_text(self, utterance: str) -> str:
        """The whole turn's words once `utterance` is final: the words of the held decisions before it
        (the same turn: no reply has started since) and the utterance."""
        replies, prefix = self._turn_prefix
        if prefix and replies == self._hooks.replies_started:
            return f"{prefix} {utterance}".strip()
        return utterance.strip()

    def _note_confidence(self, ev: Any) -> None:
        """Keep the recogniser's probability for the newest FINAL's last word (None: not reported)."""
        if getattr(ev, "type", None) != stt.SpeechEventType.FINAL_TRANSCRIPT or not ev.alternatives:
            return
        self._confidence = last_word_probability(ev.alternatives[0])

    def _prefetch_lm(self, ev: Any) -> None:
        """Score each transcript as it comes, so the FINAL's score is cached when the decision asks."""
        if self._lm is None or not getattr(ev, "alternatives", None):
            return
        origin = _ORIGINS.get(getattr(ev, "type", None), "interim")
        if origin == "interim" and not self._lm.opts.read_interims:
            return
        text = ev.alternatives[0].text
        if text and text.strip():
            self._lm.prefetch(turn_text(ev) or self.turn_text(text), self._hooks.agent_line, origin)

    async def lm_probability(self, text: str) -> float | None:
        """The language model's score of the turn's text after the agent's last line, or None when it does
        not answer by the deadline (the policy then decides on text cues and audio: a slow scorer never
        delays the endpoint more)."""
        if self._text_model is not None:
            return self._text_model.probability(text, self._hooks.agent_line)
        if self._lm is None:
            return None
        return await self._lm.wait(text, agent_line=self._hooks.agent_line)

    async def _audio_probability_for(self, speech_end: float) -> float | None:
        if self._prefetched is not None and self._prefetched[0] == speech_end:
            task = self._prefetched[1]
            if not task.cancelled():
                # shielded: the session cancels this call when the caller resumes; the prediction is
                # still good for the next call about the same utterance
                return await asyncio.shield(task)
        return await self.audio_probability(speech_end)

    async def audio_probability(self, speech_end: float) -> float | None:
        model = self._audio_model()
        if model is None:
            return None
        window = self._hooks.audio.window(speech_end + TRAILING_SILENCE_S)
        if window.size == 0:
            return None
        return await asyncio.to_thread(predict_window, model, window)

    def _judge_afterwards(
        self, text: str, speech_end: float, redecide: Callable[[float], EndpointDecision]
    ) -> None:
        """A turn handed over without its late score: when the score lands, count whether the decision made
        with it would still have been holding the turn then (`late_would_hold`: what a longer deadline
        would have changed, a cut-off saved or a finished turn delayed)."""
        lm = self._lm
        if lm is None:
            return

        async def judge() -> None:
            p = await lm.late(text, lm.opts.request_timeout_s, self._hooks.agent_line, used=False)
            if p is not None and self._commit_at(redecide(p), speech_end) > time.time():
                lm.answers["late_would_hold"] += 1

        task = asyncio.get_running_loop().create_task(judge())
        self._judging.add(task)
        task.add_done_callback(self._judging.discard)

    def _holds_itself(self, decision: EndpointDecision) -> bool:
        """Whether the detector times this turn itself, or leaves it to the session's `max_delay`.

        LiveKit waits `max_delay` whenever the probability it is given is under the unlikely threshold. The
        policy can read a turn as unlikely to be over and still mean a shorter hold: the language model
        and the recogniser's doubt never hold a turn past `model_hold` on their own (endpoint_policy.
        decide). Left to the session, such turns would wait `max_delay` in a call while `benchmarks.turns`
        counts the shorter hold, so every decision shorter than `max_delay` is timed here."""
        return decision.probability >= self._opts.unlikely_p or decision.delay < self._opts.max_delay

    def _commit_at(self, decision: EndpointDecision, speech_end: float) -> float:
        """When the turn is handed over after `decision`: its own delay (at least the session's
        `min_delay`), or the session's `max_delay` when it reads the turn as unfinished."""
        if self._holds_itself(decision):
            return speech_end + max(decision.delay, self._opts.min_delay)
        return speech_end + self._opts.max_delay

    async def predict_end_of_turn(self, chat_ctx: Any, *, timeout: float | None = None) -> float:
        speech_end = self._hooks.last_speech_end or (
            time.time() - self._hooks.params.vad.min_silence_duration
        )
        if self._hooks.text_is_stale:
            # the newest words are not final yet (the hooks flushed the STT at the end of speech): the FINAL
            # re-runs the detector on the whole turn and the session cancels this call. If none comes (a
            # cough, words the STT dropped), judge the text we have.
            wait = speech_end + self._opts.final_wait - time.time()
            try:
                await asyncio.wait_for(self._hooks.final_arrived.wait(), timeout=max(0.0, wait))
                return 0.0  # superseded by the call the FINAL triggers
            except TimeoutError:
                self._hooks.give_up_on_finals()
        text = _last_user_text(chat_ctx)
        self._turn_prefix = (self._hooks.replies_started, text)
        lang = detect_language(text, self._hooks.options.language)
        # digits, letters and commas are a sequence read out in chunks only where the agent asked for one
        cue = text_cue(text, lang, sequences=expects_sequence(self._hooks.agent_line) is not False)
        # a cue the policy does not let the model judge (a number at the end) need not wait for its score
        lm = self.lm_probability(text) if lm_judges(cue, self._opts) else _no_score()
        audio_p, lm_p = await asyncio.gather(self._audio_probability_for(speech_end), lm)
        # the last word's probability was calibrated on English turns, as the LM's score was
        confidence = self._confidence if lang == "en" else None
        decision = decide(cue, audio_p, self._opts, lang, lm_p, confidence)
        if lm_p is None and self._lm is not None and lm_judges(cue, self._opts):
            # the score missed its deadline (a busy scorer): until the moment this decision would hand
            # the turn over anyway, waiting for it costs the caller nothing, so a late score still counts
            late = await self._lm.late(
                text, self._commit_at(decision, speech_end) - time.time(), self._hooks.agent_line
            )
            if late is not None:
                lm_p = late
                decision = decide(cue, audio_p, self._opts, lang, lm_p, confidence)
            elif self._holds_itself(decision):
                self._judge_afterwards(
                    text, speech_end, lambda p: decide(cue, audio_p, self._opts, lang, p, confidence)
                )
        self.last_decision = decision
        logger.debug(
            "end of turn decision",
            extra={
                "p": round(decision.probability, 3),
                "delay": round(decision.delay, 3),
                "audio_p": audio_p,
                "lm_p": None if lm_p is None else round(lm_p, 4),
                "confidence": None if confidence is None else round(confidence, 3),
                "reason": decision.reason,
            },
        )
        if not self._holds_itself(decision):
            return decision.probability  # under the threshold the session waits its max_delay itself
        if decision.delay > self._opts.min_delay:
            # the session waits only min_delay once it reads the turn as likely over: the rest is ours
            wait = speech_end + decision.delay - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
        # a turn the policy would hand over before max_delay must not read as unlikely to be over, or the
        # session holds it to max_delay anyway
        return max(decision.probability, self._opts.unlikely_p)
