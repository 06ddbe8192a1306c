"""Fixes for LiveKit Agents internals that cost a call audible time. Applied to Parley's own calls only: the
stock pipelines are LiveKit as its users get it.

The room's transcript synchronizer estimates the agent's speaking rate from every pushed audio frame with a
Python loop of small FFTs (`SpeakingRateStream._spectral_flux`, livekit-agents 1.8.9): about 3 ms of the job
process's event loop per 0.1 s of reply audio. A reply piece arrives faster than real time, so 3–8 s of audio
blocked the loop for 100–240 ms at the very moment the reply started (the loop monitor named it), delaying
playout, VAD and the next turn. The replacement computes the same number (same window, hop and scale) with
one batched FFT, ~8x cheaper.

When the caller talks over the agent, the session pauses the room's audio output. LiveKit then drops the
output's queued audio (up to 200 ms) only when its forwarding loop next wakes, up to one 50 ms frame later, so
that much more of the agent reached the caller after the pause. The patched pause drops the queue at once,
with the same bookkeeping LiveKit does (the dropped audio counts as discarded, the playhead stays where it
stopped), so a resumed reply goes on exactly where it would have.

With ducking on (`duck_room_output`, the default of both turn profiles) a pause does not stop the reply: it
goes on at the ducked level (worker/duck.py) and a resume brings it back up; what was queued plays out
quieter-from-the-next-frame instead of being dropped, so a backchannel leaves no hole in the agent's words.
A real interruption still clears the output when its words arrive.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from .duck import Duck, OverlapReader

log = logging.getLogger("parley.livekit_patches")

replaced: dict[str, Any] = {}  # what install() swapped out, by name (the tests compare against it)


def spectral_flux(audio: np.ndarray, sample_rate: int) -> float:
    """Mean L1 change of the magnitude spectrum between 25 ms Hann frames at 50 % overlap."""
    frame = int(sample_rate * 0.025)
    hop = frame // 2
    if frame <= 0 or hop <= 0 or len(audio) < frame:
        return 0.0
    count = (len(audio) - frame) // hop + 1
    if count < 2:
        return 0.0
    window = np.hanning(frame)
    scale = 1.0 / np.sqrt(np.sum(window**2))
    frames = np.lib.stride_tricks.sliding_window_view(audio, frame)[::hop][:count]
    magnitudes = np.abs(np.fft.rfft(frames * window, axis=1) * scale)
    return float(np.mean(np.sum(np.abs(np.diff(magnitudes, axis=0)), axis=1)))


def _patched(_self: Any, audio: np.ndarray, sample_rate: int) -> float:
    return spectral_flux(audio, sample_rate)


_patched.parley_patch = True  # type: ignore[attr-defined]


def install() -> bool:
    """Apply every patch; False (and one log line each) when this LiveKit lacks what a patch replaces, so an
    upgrade degrades to LiveKit's own code instead of failing the call."""
    rate = _install_speaking_rate()
    pause = _install_pause_drop()
    return rate and pause


def drop_queued_audio(output: Any) -> float:
    """Discard what the room output's audio source still holds, as LiveKit's forwarding loop does when it
    finds the output paused; returns the seconds dropped."""
    source = output._audio_source
    queued = float(source.queued_duration)
    if queued <= 0.0:
        return 0.0
    output._source_discarded_duration += queued
    output._report_run(
        offset=output._source_pushed_duration - queued,
        ended_at=time.time(),
        resumes_at=output._source_pushed_duration,
    )
    source.clear_queue()
    return queued


def _install_pause_drop() -> bool:
    try:
        from livekit.agents.voice.room_io._output import _ParticipantAudioOutput
    except ImportError:
        log.warning("livekit room audio output not found; a paused reply drains its queue as LiveKit does")
        return False
    current = getattr(_ParticipantAudioOutput, "pause", None)
    needed = ("_report_run", "_source_discarded_duration", "_source_pushed_duration", "_audio_source")
    probe = _ParticipantAudioOutput.__init__.__code__.co_names + tuple(vars(_ParticipantAudioOutput))
    if current is None or not all(name in probe for name in needed):
        log.warning("livekit room audio output changed; a paused reply drains its queue as LiveKit does")
        return False
    if getattr(current, "parley_patch", False):
        return True
    replaced.setdefault("_ParticipantAudioOutput.pause", current)

    def stop(self: Any) -> None:
        current(self)
        drop_queued_audio(self)

    def pause(self: Any) -> None:
        duck = getattr(self, "_parley_duck", None)
        if duck is None:
            stop(self)
        else:  # the reply goes on, quieter, until a resume, a clear, or a caller who keeps talking
            duck.start(lambda: stop(self), self._parley_caller_speaking)

    pause.parley_patch = True  # type: ignore[attr-defined]
    _ParticipantAudioOutput.pause = pause  # type: ignore[method-assign]
    for name in ("resume", "clear_buffer"):
        _unduck_before(_ParticipantAudioOutput, name)
    return True


def _unduck_before(cls: Any, name: str) -> None:
    """A resumed or cleared reply is at full level again (the next reply must not start ducked)."""
    current = getattr(cls, name)
    if getattr(current, "parley_patch", False):
        return
    replaced.setdefault(f"_ParticipantAudioOutput.{name}", current)

    def method(self: Any) -> None:
        duck = getattr(self, "_parley_duck", None)
        if duck is not None:
            duck.stop()
        current(self)

    method.parley_patch = True  # type: ignore[attr-defined]
    setattr(cls, name, method)


class _DuckedSource:
    """The room output's audio source with the duck's gain applied to every frame it is given."""

    def __init__(self, source: Any, duck: Duck) -> None:
        self._source = source
        self._duck = duck

    async def capture_frame(self, frame: Any) -> None:
        await self._source.capture_frame(self._duck.apply(frame))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def room_audio_output(session: Any) -> Any:
    """The room's participant audio output at the bottom of the session's audio chain, or None."""
    try:
        from livekit.agents.voice.room_io._output import _ParticipantAudioOutput
    except ImportError:
        return None
    out = getattr(getattr(session, "output", None), "audio", None)
    for _ in range(16):  # a chain is a few wrappers deep
        if out is None or isinstance(out, _ParticipantAudioOutput):
            return out
        out = getattr(out, "_next_in_chain", None)
    return None


def duck_room_output(
    session: Any,
    level_db: float | None,
    hold_s: float | None = None,
    reader: OverlapReader | None = None,
) -> Duck | None:
    """Duck instead of stopping the session's room audio while the caller's voice pauses it (`level_db`
    below full; None leaves LiveKit's pause), silencing it once the caller has talked on for `hold_s` or as
    soon as the `reader` (the turn hooks) says their words take the floor. Call after `session.start`.
    Returns the duck; None (and one log line when there is a level to duck to) without a room output."""
    if level_db is None:
        return None
    out = room_audio_output(session)
    if out is None or not _install_pause_drop() or not hasattr(out, "_audio_source"):
        log.warning("room audio output not found; a paused reply stops instead of ducking")
        return None
    if getattr(out, "_parley_duck", None) is None:
        duck = Duck(level_db, hold_s, reader)
        out._audio_source = _DuckedSource(out._audio_source, duck)
        out._parley_caller_speaking = lambda: getattr(session, "user_state", None) == "speaking"
        out._parley_duck = duck
    return out._parley_duck  # type: ignore[no-any-return]


def _install_speaking_rate() -> bool:
    try:
        from livekit.agents.voice.transcription import _speaking_rate
    except ImportError:
        log.warning("livekit speaking-rate module not found; transcript sync keeps LiveKit's own estimate")
        return False
    stream = getattr(_speaking_rate, "SpeakingRateStream", None)
    current = getattr(stream, "_spectral_flux", None)
    if stream is None or current is None:
        log.warning(
            "livekit SpeakingRateStream._spectral_flux not found; transcript sync keeps LiveKit's own"
        )
        return False
    if getattr(current, "parley_patch", False):
        return True
    replaced.setdefault("SpeakingRateStream._spectral_flux", current)
    stream._spectral_flux = _patched
    return True
