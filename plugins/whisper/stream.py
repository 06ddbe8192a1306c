"""The streaming recognition policy: one `WhisperStream` per session audio stream.

The session sends every frame (silence included) and a flush when its VAD / turn detector ends the turn.
- A speech gate (Silero VAD) cuts utterances out of the stream: Whisper never decodes silence or noise.
- While the caller speaks, the utterance is re-decoded from its start at a bounded cadence (beam 1, no
  timestamps, short encoder window), one partial at a time. Words two consecutive hypotheses agree on are
  confirmed; INTERIM = confirmed + tentative.
- At the first silence (`settle_s`) the whole utterance is decoded with the final settings, without waiting
  for a running partial; at the gate's pause its text goes out as PREFLIGHT, and at the flush, if no speech
  came since, it is the FINAL at once.
- Long turns commit whole confirmed sentences and trim their audio, so decodes stay inside 30 s.
See README.md for the numbers behind each choice.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
from livekit import rtc
from livekit.agents import APIConnectOptions, stt
from livekit.agents.language import LanguageCode
from livekit.agents.stt import STT
from livekit.agents.types import TimedString

from .agreement import LocalAgreement, find_sentence_commit, words_after, words_kept
from .engine import DecodeDropped
from .guard import clean_text, looped, unintelligible
from .model import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_PAUSE,
    SAMPLE_RATE,
    DecodeRequest,
    DecodeResult,
    Transcriber,
)
from .options import WhisperSTTOptions
from .speech_gate import GateEvent, SpeechGate, SpeechProb
from .vocabulary import with_vocabulary

logger = logging.getLogger("parley.stt")

_CONTEXT_GAP_S = 0.3
"""Silence put between a turn's earlier audio and the new utterance when they are decoded together."""

TURN_TEXT = "parley.turn_text"
"""`SpeechData.metadata` key: the caller's whole turn so far, decoded again as one
(`StreamingOptions.whole_turn`). The event's own text is the end of it that follows the turn's earlier
FINALs, so a consumer that only appends FINALs (LiveKit alone, a transcript display) still reads sense; one
that knows the key replaces the turn's text with this."""


def turn_text(ev: stt.SpeechEvent) -> str | None:
    """The caller's whole turn so far when a transcript event carries it (see TURN_TEXT), else None."""
    meta = ev.alternatives[0].metadata if ev.alternatives else None
    whole = meta.get(TURN_TEXT) if meta else None
    return whole if isinstance(whole, str) and whole else None


def frame_to_float(frame: rtc.AudioFrame) -> np.ndarray:
    """int16 frame -> float32 mono in [-1, 1]."""
    pcm = np.frombuffer(frame.data, dtype=np.int16)
    if frame.num_channels > 1:
        pcm = pcm.reshape(-1, frame.num_channels).mean(axis=1)
    return (pcm.astype(np.float32)) / 32768.0


@dataclass
class _Decode:
    """One decode in flight, and what audio it covers, so its result can be judged current or stale."""

    kind: str  # partial (cadence) | settle (at the first silence, final settings) | final (at flush)
    epoch: int
    """Bumped at each FINAL and each trim: results from an older epoch describe other audio."""
    revision: int
    length: int
    complete: bool
    """At submit the audio held all speech so far plus a tail: if no speech comes, its text is final."""
    task: asyncio.Task[DecodeResult | None]
    prompt: str | None = None
    said: str | None = None
    """Text already sent as FINAL for the earlier audio decoded in front of this utterance."""
    earlier_speech_s: float = 0.0
    """Speech in that earlier audio (the guard weighs the whole decode's speech)."""


@dataclass(frozen=True)
class _TurnContext:
    """The caller's turn so far: its audio from the turn's first word (None once it cannot be decoded again
    whole: too long, or part of it committed), the FINAL text sent for it, the stream sample where its last
    speech ended, and how much speech it holds."""

    audio: np.ndarray | None
    text: str
    end_sample: int
    speech_s: float = 0.0


@dataclass(frozen=True)
class _Settled:
    revision: int
    text: str
    result: DecodeResult
    revises: str | None = None
    """The text is the whole turn, revising this earlier FINAL text (None: the utterance's own text)."""


@dataclass(frozen=True)
class _Text:
    """An utterance's final text, the decode it came from, and the earlier FINAL text it revises when it
    is the whole turn's."""

    text: str
    result: DecodeResult | None
    revises: str | None = None


class StreamOwner(Protocol):
    """What a stream asks of the STT that opened it (stt.WhisperSTT, which imports this file)."""

    unheard_listeners: list[Callable[[float], None]]

    @property
    def options(self) -> WhisperSTTOptions: ...

    @property
    def transcriber(self) -> Transcriber: ...

    def new_speech_prob(self) -> SpeechProb: ...

    def forget_stream(self, stream: WhisperStream) -> None: ...


class WhisperStream(stt.RecognizeStream):
    def __init__(self, *, stt: StreamOwner, language: str | None, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=cast(STT, stt), conn_options=conn_options, sample_rate=SAMPLE_RATE)
        self._w = stt
        self._opts = stt.options.streaming
        self._language = language
        self._gate = SpeechGate(stt.new_speech_prob(), self._opts.gate)
        self._agreement = LocalAgreement()
        self._epoch = 0
        self._partial: _Decode | None = None
        self._settle: _Decode | None = None
        self._stale: _Decode | None = None  # a settle decode overtaken by new speech, still running
        self._decode_s = 0.0
        self._settled: _Settled | None = None
        self._committed: list[str] = []
        self._previous: _TurnContext | None = None
        self._context_failed = False  # this utterance's words could not be lined up behind the context
        self._last_decode_len = 0
        self._last_sent: dict[str, str] = {}
        self._finalizing = False
        self._request_id = uuid.uuid4().hex
        self._usage_samples = 0
        self._settle_samples = round(self._opts.settle_s * SAMPLE_RATE)
        self._flushed_at: deque[float] = deque()  # when each pending flush was asked for (debug timing)

    # ---- events -------------------------------------------------------------------------------------------

    def _speech(self, text: str, result: DecodeResult | None, revises: str | None = None) -> stt.SpeechData:
        # from the voice's onset, not the pre-roll's first sample: the span is how long the caller spoke
        start = self._gate.voice_start / SAMPLE_RATE + self.start_time_offset
        end = (self._gate.start_sample + self._gate.speech_end) / SAMPLE_RATE + self.start_time_offset
        words = _scored_words(text, result)  # the decode's own words: the whole turn's when it is one
        metadata = None
        if revises is not None and text:
            whole = " ".join(text.split())
            text, metadata = _new_part(revises, whole), {TURN_TEXT: whole}
        language = result.language if result is not None else (self._language or "en")
        confidence = result.confidence if result is not None else 0.0
        return stt.SpeechData(
            language=LanguageCode(language),
            text=text,
            start_time=start,
            end_time=end,
            confidence=confidence,
            words=words,
            metadata=metadata,
        )

    def _emit(
        self,
        kind: stt.SpeechEventType,
        text: str = "",
        result: DecodeResult | None = None,
        revises: str | None = None,
    ) -> None:
        alternatives = [self._speech(text, result, revises)] if kind in _TEXT_EVENTS else []
        self._event_ch.send_nowait(
            stt.SpeechEvent(type=kind, request_id=self._request_id, alternatives=alternatives)
        )

    def _emit_text(
        self, kind: stt.SpeechEventType, text: str, result: DecodeResult, revises: str | None = None
    ) -> None:
        full = " ".join([*self._committed, text]).strip()
        # an unchanged INTERIM is not repeated; a PREFLIGHT goes out even when an INTERIM said the same
        if full and full != self._last_sent.get(kind.value):
            self._emit(kind, full, result, revises)
            self._last_sent[kind.value] = full

    def _emit_usage(self) -> None:
        if self._usage_samples <= 0:
            return
        usage = stt.RecognitionUsage(audio_duration=self._usage_samples / SAMPLE_RATE)
        self._usage_samples = 0
        self._event_ch.send_nowait(
            stt.SpeechEvent(
                type=stt.SpeechEventType.RECOGNITION_USAGE,
                request_id=self._request_id,
                recognition_usage=usage,
            )
        )

    def flush(self) -> None:
        self._flushed_at.append(time.monotonic())
        super().flush()

    # ---- main loop ----------------------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            async for item in self._input_ch:
                if isinstance(item, self._FlushSentinel):
                    asked = self._flushed_at.popleft() if self._flushed_at else time.monotonic()
                    picked = time.monotonic()
                    settled = self._is_settled()
                    await self._finalize(flushed=True)
                    logger.debug(
                        "final after flush",
                        extra={
                            "queued_ms": round((picked - asked) * 1000, 1),
                            "final_ms": round((time.monotonic() - picked) * 1000, 1),
                            "settled": settled,
                        },
                    )
                    continue
                pcm = frame_to_float(item)
                self._usage_samples += len(pcm)
                for ev in self._gate.push(pcm):
                    await self._on_gate(ev)
                self._maybe_decode()
            await self._finalize(flushed=False)
        finally:
            for d in (self._partial, self._settle, self._stale):
                if d is not None:
                    d.task.cancel()
            self._w.forget_stream(self)

    async def _on_gate(self, ev: GateEvent) -> None:
        if ev is GateEvent.STARTED:
            self._request_id = uuid.uuid4().hex
            self._emit(stt.SpeechEventType.START_OF_SPEECH)
        elif ev is GateEvent.PAUSED:
            self._send_preflight()
        elif ev is GateEvent.RESUMED and self._settle is not None:
            # speech came back: the running settle decode is now just a partial; the next pause gets its
            # own settle decode at once instead of waiting behind this one
            self._stale, self._settle = self._settle, None
        elif ev is GateEvent.ENDED:
            await self._finalize(flushed=False)

    def _is_settled(self) -> bool:
        return self._settled is not None and self._settled.revision == self._gate.revision

    def _send_preflight(self) -> None:
        if self._settled is not None and self._is_settled():
            settled = self._settled
            self._emit_text(
                stt.SpeechEventType.PREFLIGHT_TRANSCRIPT, settled.text, settled.result, settled.revises
            )

    # ---- decoding -----------------------------------------------------------------------------------------

    def _maybe_decode(self) -> None:
        """Start at most one partial and one settle decode per stream; never queue one behind another."""
        gate = self._gate
        if self._finalizing or not gate.active:
            return
        if gate.silence_s >= self._opts.settle_s:
            # the speaker may have stopped: decode everything now with the final settings, without waiting
            # for a partial still running on older audio
            if self._settle is None and not self._is_settled():
                self._start("settle")
            return
        if self._partial is not None or self._settle is not None or self._stale is not None:
            return
        if gate.silence_s > 0:
            return  # the speaker may be stopping: leave the CPU to the settle decode that may follow
        if gate.speech_s < self._opts.first_partial_speech_s:
            return  # too little speech for a word yet (the pre-roll is silence, not speech)
        if self._last_decode_len == 0:
            self._start("partial")  # the first words decide a barge-in: as soon as there can be one
            return
        # the slower cadence only once words are out: until then a barge-in waits on the next partial
        has_words = bool(self._last_sent.get(stt.SpeechEventType.INTERIM_TRANSCRIPT.value))
        cadence = self._opts.later_partial_interval_s if has_words else self._opts.partial_interval_s
        interval = max(cadence, self._opts.partial_load_factor * self._decode_s)
        if gate.length - self._last_decode_len >= interval * SAMPLE_RATE:
            self._start("partial")

    def _prompt(self) -> str | None:
        """The style prompt and vocabulary, then the end of the committed sentences (long turns)."""
        context = " ".join(self._committed)[-200:]
        return (
            " ".join(
                p for p in (with_vocabulary(self._opts.style_prompt, self._opts.vocabulary), context) if p
            )
            or None
        )

    def _start(self, kind: str, *, primed: bool = True) -> _Decode:
        gate = self._gate
        audio = gate.audio()
        partial = kind == "partial"
        turn = None if partial else self._turn_context()
        if turn is not None and turn.audio is not None:  # _turn_context() gives only a turn with its audio
            audio = _behind(turn.audio, audio)
        request = DecodeRequest(
            language=self._language,
            beam_size=self._opts.partial_beam_size if partial else self._opts.final_beam_size,
            with_timestamps=partial and len(audio) >= self._opts.commit_after_s * SAMPLE_RATE,
            initial_prompt=self._prompt() if primed else None,
            priority={"final": PRIORITY_FINAL, "settle": PRIORITY_PAUSE}.get(kind, PRIORITY_PARTIAL),
            window_s=self._opts.partial_window_s if partial else self._opts.final_window_s,
            stream_id=f"{id(self):x}",
        )
        complete = not partial or gate.length >= gate.speech_end + self._settle_samples
        if partial:
            self._last_decode_len = gate.length
        task = asyncio.create_task(self._decode(audio, request), name=f"whisper-{kind}")
        d = _Decode(
            kind,
            self._epoch,
            gate.revision,
            len(audio),
            complete,
            task,
            request.initial_prompt,
            None if turn is None else turn.text,
            0.0 if turn is None else turn.speech_s,
        )
        if partial:
            self._partial = d
        else:
            self._settle = d
        task.add_done_callback(lambda _t: self._on_decoded(d))
        return d

    def _turn_so_far(self) -> _TurnContext | None:
        """The turn this utterance continues: the previous utterances, when it follows them closely enough."""
        prev = self._previous
        if prev is None or self._gate.start_sample - prev.end_sample > self._opts.context_gap_s * SAMPLE_RATE:
            return None
        return prev

    def _turn_context(self) -> _TurnContext | None:
        """The turn so far when this utterance can be decoded behind its audio."""
        prev = self._turn_so_far()
        if prev is None or prev.audio is None or self._committed or self._context_failed:
            return None
        return prev

    async def _decode(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult | None:
        try:
            return await self._w.transcriber.transcribe(audio, request)
        except DecodeDropped:  # the host engine dropped it for a newer request of this stream
            return None
        except Exception as e:  # a failed decode costs this transcript, never the call
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            logger.warning("whisper decode failed: %s", first)
            return None

    def _on_decoded(self, d: _Decode) -> None:
        if self._partial is d:
            self._partial = None
        if self._settle is d:
            self._settle = None
        if self._stale is d:
            self._stale = None
        if d.task.cancelled() or d.epoch != self._epoch or d.kind == "final" or self._finalizing:
            return
        result = d.task.result()
        if result is not None:
            # recent decode time (queueing included), for the partial cadence
            self._decode_s = 0.7 * self._decode_s + 0.3 * (result.decode_s + result.queued_s)
            self._use_result(d, result)
        if not self._event_ch.closed:
            self._maybe_decode()

    def _use_result(self, d: _Decode, result: DecodeResult) -> None:
        gate = self._gate
        text = self._clean(result, d)
        if text is None:
            return  # the earlier part was heard too differently: the FINAL decodes this utterance alone
        if d.complete and d.revision == gate.revision:
            self._settled = _Settled(d.revision, text, result, self._whole(d))
            if gate.paused:
                self._send_preflight()
            return
        if self._is_settled():
            return  # an older partial finishing after the settle decode: nothing new
        if d.said is not None and self._opts.whole_turn:
            return  # the whole turn read before the caller went on: INTERIMs show this utterance's words
        words = self._agreement.update(text).text.split()
        if d.kind == "partial" and len(result.segments) > 1:
            # the committed words lead the hypothesis: they go out once, as committed text
            words = words[self._maybe_commit(result, d.length) :]
        self._emit_text(stt.SpeechEventType.INTERIM_TRANSCRIPT, " ".join(words), result)

    def _maybe_commit(self, result: DecodeResult, decoded_len: int) -> int:
        """Commit whole confirmed sentences of a long turn and trim their audio; how many of the decode's
        words were committed."""
        if decoded_len < self._opts.commit_after_s * SAMPLE_RATE:
            return 0
        segs = result.segments
        commit = find_sentence_commit(
            segs, self._agreement.confirmed_words, audio_s=decoded_len / SAMPLE_RATE
        )
        if commit is not None:
            self._committed.append(commit.text)
            self._gate.trim(round(commit.end_s * SAMPLE_RATE))
            self._agreement.drop_prefix(commit.n_words)
            n_words = commit.n_words
        elif decoded_len >= self._opts.max_utterance_s * SAMPLE_RATE:
            # no clean sentence boundary: cut after the second-last segment to stay inside 30 s
            head = " ".join(s.text.strip() for s in segs[:-1])
            self._committed.append(head)
            self._gate.trim(round(segs[-2].end * SAMPLE_RATE))
            self._agreement.reset()
            n_words = len(head.split())
        else:
            return 0
        self._epoch += 1
        self._last_decode_len = 0
        self._settled = None
        return n_words

    # ---- end of an utterance ------------------------------------------------------------------------------

    async def _finalize(self, *, flushed: bool) -> None:
        """Emit the FINAL for the current utterance (normally settled already) and start afresh."""
        gate = self._gate
        if not gate.active:
            if flushed and self._usage_samples > 0:
                # audio but no speech: an empty FINAL lets a waiting manual commit go on at once
                self._emit(stt.SpeechEventType.FINAL_TRANSCRIPT, "")
                self._emit_usage()
            return
        self._finalizing = True
        try:
            got = _Text("", None)
            if gate.speech_s >= self._opts.min_speech_s or self._committed:
                got = await self._final_text()
            text, result = got.text, got.result
            final = " ".join([*self._committed, text]).strip()
            if not final and any(self._last_sent.values()):
                # LiveKit keeps the last INTERIM when the FINAL has no words: it would count toward the
                # next barge-in's words and be committed as the caller's turn. An empty INTERIM clears it.
                self._emit(stt.SpeechEventType.INTERIM_TRANSCRIPT, "")
            self._emit(stt.SpeechEventType.FINAL_TRANSCRIPT, final, result, got.revises)
            if result is not None and unintelligible(
                result, final, speech_s=gate.speech_s, opts=self._opts.guard
            ):
                self._tell_unheard(gate.speech_s)
            if final:
                self._remember(final, whole_turn=got.revises is not None)
            self._emit(stt.SpeechEventType.END_OF_SPEECH)
            self._emit_usage()
        finally:
            for d in (self._partial, self._stale):
                if d is not None:
                    d.task.cancel()
            self._epoch += 1
            self._finalizing = False
            gate.finish()
            self._agreement.reset()
            self._committed = []
            self._settled = None
            self._last_decode_len = 0
            self._last_sent = {}
            self._context_failed = False

    def _tell_unheard(self, speech_s: float) -> None:
        logger.info("utterance not understood", extra={"speech_s": round(speech_s, 2)})
        for listener in list(self._w.unheard_listeners):
            try:
                listener(speech_s)
            except Exception as e:  # a listener's fault never ends the stream
                logger.warning("unheard listener failed", extra={"error": str(e)[:200]})

    async def _final_text(self) -> _Text:
        """The utterance's text; when the guard emptied a primed decode that looped, the text of one more
        decode without the prompt, if Whisper is sure of it. Whisper does not come back from a loop, and its
        own remedy is to decode again another way; a priming prompt is a known cause (tiny.en wrote "What
        about the main library?" four times after the style prompt, and once without it, at an average
        log-probability of -0.15). Speech it cannot read loops too, and its second reading is as unsure
        (-1.4 to -2.0 for Korean said to tiny.en): that caller is still asked to repeat."""
        first = await self._first_final_text()
        text, result = first.text, first.result
        if text or result is None or self._prompt() is None or not looped(result, self._opts.guard):
            return first
        again = self._start("final", primed=False)
        retried = await again.task
        if retried is None:
            return first
        retried_text = self._clean(retried, again)
        sure = all(s.avg_logprob >= self._opts.guard.logprob_threshold for s in retried.segments)
        logger.debug(
            "looped final decoded again without the prompt", extra={"kept": bool(retried_text and sure)}
        )
        return _Text(retried_text, retried, self._whole(again)) if retried_text and sure else first

    async def _first_final_text(self) -> _Text:
        """The settled text if current; else the running decode that covers everything; else decode now."""
        gate = self._gate
        for _ in range(2):
            if self._settled is not None and self._is_settled():
                settled = self._settled
                return _Text(settled.text, settled.result, settled.revises)
            running = [
                d
                for d in (self._settle, self._partial)
                if d is not None and d.complete and d.revision == gate.revision and d.epoch == self._epoch
            ]
            if not running:
                break
            d = running[0]
            result = await d.task
            if d.epoch != self._epoch:
                continue  # the agent answered meanwhile (new_turn): this utterance is decoded alone
            text = None if result is None else self._clean(result, d)
            if text is not None:
                return _Text(text, result, self._whole(d))
            if result is not None:
                break
        if len(gate.audio()) == 0:
            return _Text("", None)
        for _ in range(2):  # a context decode that cannot be lined up is retried alone (context_failed)
            final = self._start("final")
            result = await final.task
            if final.epoch != self._epoch:
                continue  # the agent answered meanwhile (new_turn): decoded again, alone
            if result is None:
                return _Text("", None)
            text = self._clean(result, final)
            if text is not None:
                return _Text(text, result, self._whole(final))
        return _Text("", None)

    def _whole(self, d: _Decode) -> str | None:
        """The earlier FINAL text `d`'s text revises when it is the whole turn (it decoded the turn's earlier
        audio in front, and the stream sends whole turns), else None."""
        return d.said if self._opts.whole_turn else None

    def _clean(self, result: DecodeResult, d: _Decode) -> str | None:
        """The decode's new text; None when it held earlier audio whose words it could not line up."""
        speech_s = self._gate.speech_s + d.earlier_speech_s
        text = clean_text(
            result, speech_s=speech_s, opts=self._opts.guard, prompt=d.prompt, terms=self._opts.vocabulary
        )
        if d.said is None or not text:
            return text
        if self._opts.whole_turn:
            if _letters(text) > _letters(d.said):
                return text
            # the turn read again says no more than its first part did: Whisper skipped words; rather than
            # lose them, this utterance is decoded alone and follows the earlier FINAL
            self._context_failed = True
            return None
        new = words_after(d.said, text)
        if new is None:
            self._context_failed = True
        return new

    def _remember(self, final: str, *, whole_turn: bool) -> None:
        """Keep the turn so far, this utterance included, as context for a next utterance of the same turn.
        Its audio always runs from the turn's first word, so a whole-turn reading is the whole turn; once
        that cannot be (too long, or sentences committed), later utterances of the turn are decoded alone."""
        if self._opts.context_gap_s <= 0:
            return
        gate = self._gate
        turn = self._turn_so_far()
        audio: np.ndarray | None = None if self._committed else gate.audio()
        text, speech_s = final, gate.speech_s
        if turn is not None:
            speech_s += turn.speech_s
            text = final if whole_turn else f"{turn.text} {final}"
            audio = None if turn.audio is None or audio is None else _behind(turn.audio, audio)
        if audio is not None and len(audio) > self._opts.context_max_s * SAMPLE_RATE:
            audio = None
        end = gate.start_sample + gate.speech_end
        self._previous = _TurnContext(None if audio is None else audio.copy(), text, end, speech_s)

    def new_turn(self) -> None:
        """The agent answered: the caller's next words start a turn of their own. Decodes of this utterance
        that carry the answered turn's audio are set aside (the FINAL decodes it alone)."""
        self._previous = None
        carried = [d for d in (self._settle, self._stale) if d is not None and d.said is not None]
        if carried or (self._settled is not None and self._settled.revises is not None):
            self._epoch += 1
            self._settled = None
            self._last_decode_len = 0


def _scored_words(text: str, result: DecodeResult | None) -> list[TimedString] | None:
    """The text's words with the recogniser's probability for each (the end-of-turn detector reads the
    last one: a word Whisper invented at a pause is usually one it is unsure of; the backchannel rule reads
    their mean). Only the decode's own last words are scored, so a long turn's committed sentences have
    none; no times (no timestamps are decoded)."""
    if result is None or not result.words or not text:
        return None
    words = words_kept(text, result.text, result.words)
    return [TimedString(w.text, confidence=w.probability) for w in words] or None


def _new_part(said: str, whole: str) -> str:
    """The end of `whole` (the turn decoded again) after what the earlier FINAL text `said` covered: the
    words after it where they line up, else after as many words as it had. Never empty (at least the last
    word), so the session still gets a FINAL to re-judge the turn on."""
    words = whole.split()
    new = words_after(said, whole)
    if new is None:
        new = " ".join(words[len(said.split()) :])
    return new or words[-1]


def _letters(text: str) -> int:
    """Letters and digits in `text` (a word count would call "555-214-8839" one word, as "555-214" is)."""
    return sum(c.isalnum() for c in text)


def _behind(earlier: np.ndarray, audio: np.ndarray) -> np.ndarray:
    """A turn's earlier audio, a short silence, then the new utterance: decoded as one."""
    gap = np.zeros(round(_CONTEXT_GAP_S * SAMPLE_RATE), dtype=np.float32)
    return np.concatenate([earlier, gap, audio])


_TEXT_EVENTS = (
    stt.SpeechEventType.INTERIM_TRANSCRIPT,
    stt.SpeechEventType.PREFLIGHT_TRANSCRIPT,
    stt.SpeechEventType.FINAL_TRANSCRIPT,
)
