"""The batched speaking-rate estimate gives LiveKit's own number (transcript pacing must not change)."""

import numpy as np
import pytest
from livekit.agents.voice.transcription import _speaking_rate

from worker import livekit_patches


class _Stream:
    """Just enough of LiveKit's SpeakingRateStream to call its original method."""

    _stft = _speaking_rate.SpeakingRateStream._stft


@pytest.mark.parametrize("rate", [16_000, 24_000, 48_000])
def test_batched_flux_equals_livekits(rate: int) -> None:
    assert livekit_patches.install()
    original = livekit_patches.replaced["SpeakingRateStream._spectral_flux"]
    assert not getattr(original, "parley_patch", False)
    audio = (np.random.default_rng(rate).standard_normal(rate) * 0.1).astype(np.float32)
    assert livekit_patches.spectral_flux(audio, rate) == pytest.approx(
        original(_Stream(), audio, rate), rel=1e-9
    )
    assert livekit_patches.spectral_flux(audio[:100], rate) == 0.0  # shorter than one frame


def test_install_swaps_the_method_once() -> None:
    assert livekit_patches.install()
    assert livekit_patches.install()  # idempotent
    method = _speaking_rate.SpeakingRateStream._spectral_flux
    assert getattr(method, "parley_patch", False)
    assert method(None, np.zeros(24_000, dtype=np.float32), 24_000) == 0.0


async def test_pause_drops_the_queued_reply_at_once() -> None:
    """A paused room output holds no audio: what was queued is discarded (not played after the caller spoke)
    and a resumed reply goes on past it, as LiveKit's own forwarding loop leaves it."""
    from livekit import rtc
    from livekit.agents.voice.room_io._output import _ParticipantAudioOutput

    assert livekit_patches.install()
    out = _ParticipantAudioOutput(
        None,  # type: ignore[arg-type]  # the queue needs no room
        sample_rate=24_000,
        num_channels=1,
        track_publish_options=rtc.TrackPublishOptions(),
    )
    frame = rtc.AudioFrame(b"\x10\x00" * 1200, 24_000, 1, 1200)  # 50 ms
    for _ in range(3):
        await out._audio_source.capture_frame(frame)
        out._source_pushed_duration += frame.duration
    queued = out._audio_source.queued_duration
    assert queued > 0.1
    out.pause()
    assert out._audio_source.queued_duration == 0.0
    assert out._source_discarded_duration == pytest.approx(queued, abs=0.02)
    assert out._run_offset == pytest.approx(0.15)  # the next run starts past the dropped audio
    out.pause()  # nothing left to drop
    assert out._source_discarded_duration == pytest.approx(queued, abs=0.02)
    await out._audio_source.aclose()


def _room_output():  # type: ignore[no-untyped-def]
    from livekit import rtc
    from livekit.agents.voice.room_io._output import _ParticipantAudioOutput

    return _ParticipantAudioOutput(
        None,  # type: ignore[arg-type]  # the queue needs no room
        sample_rate=24_000,
        num_channels=1,
        track_publish_options=rtc.TrackPublishOptions(),
    )


async def test_a_ducked_room_output_goes_on_quieter_and_comes_back_up() -> None:
    """With ducking the caller's voice does not stop the reply: the queue is kept, the frames that follow are
    18 dB down, a resume or a clear brings the level back, and the next reply starts at full level."""
    from types import SimpleNamespace

    from livekit import rtc

    from worker.duck import gain_of

    out = _room_output()
    session = SimpleNamespace(output=SimpleNamespace(audio=out))
    duck = livekit_patches.duck_room_output(session, -18.0)
    assert duck is not None
    assert livekit_patches.duck_room_output(session, -18.0) is duck  # once per output
    got: list[float] = []
    source = out._audio_source._source

    async def record(frame: rtc.AudioFrame) -> None:
        got.append(float(abs(int(np.frombuffer(frame.data, np.int16)[-1]))))  # where each frame ends

    source.capture_frame = record  # what reaches the room, frame by frame
    frame = rtc.AudioFrame(b"\x00\x10" * 1200, 24_000, 1, 1200)  # 4096, 50 ms
    out._source_pushed_duration = 0.15
    await out._audio_source.capture_frame(frame)
    out.pause()
    assert out._playback_enabled.is_set()  # the reply goes on
    assert out._source_discarded_duration == 0.0  # nothing dropped
    await out._audio_source.capture_frame(frame)  # ramps down across this frame
    await out._audio_source.capture_frame(frame)
    out.resume()
    await out._audio_source.capture_frame(frame)  # ramps back up
    await out._audio_source.capture_frame(frame)
    out.pause()
    out.clear_buffer()  # an interruption: the next reply is at full level
    await out._audio_source.capture_frame(frame)
    full, ducked = 4096.0, 4096.0 * gain_of(-18.0)
    assert got[0] == full
    assert got[1] == pytest.approx(ducked, rel=0.02) and got[2] == pytest.approx(ducked, rel=0.02)
    assert got[3] == pytest.approx(full, rel=0.02) and got[4] == full
    assert got[5] == pytest.approx(full, rel=0.02)


async def test_ducking_needs_a_room_output_and_a_level() -> None:
    from types import SimpleNamespace

    no_room = SimpleNamespace(output=SimpleNamespace(audio=None))
    assert livekit_patches.duck_room_output(no_room, -18.0) is None
    no_level = SimpleNamespace(output=SimpleNamespace(audio=_room_output()))
    assert livekit_patches.duck_room_output(no_level, None) is None
