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
