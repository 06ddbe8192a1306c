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
