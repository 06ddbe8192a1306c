"""The one entry point the worker calls: AgentSession kwargs for turn handling, pinned to local models.

DANGER this guards against: with `turn_detection` or `interruption.mode` left unset, livekit-agents 1.8.9
picks LiveKit Cloud inference in `dev` mode (audio leaves the host) and local models in `start`. Everything
here is set explicitly, so every mode (console/dev/start/connect) runs the same local models:
  - VAD: Silero from livekit-plugins-silero (ONNX in the wheel), not the session's `inference.VAD` default;
  - turn detection: `ParleyTurnDetector` (text cues + the bundled v1-mini audio model, in-process);
  - interruption: `mode="vad"` (the adaptive mode is a cloud model), plus Parley's backchannel filter.

Wiring (worker):

    setup = build_turn_handling(turn_options, profile_for_participant(participant))
    session = AgentSession(stt=..., llm=..., tts=..., **setup.session_kwargs)
    setup.attach(session)                      # before session.start()

    class ParleyAgent(Agent):
        async def stt_node(self, audio, model_settings):
            async for ev in setup.hooks.stt_node(self, audio, model_settings):
                yield ev

The greeting should be said with `allow_interruptions=True`: noise cannot cut it (no words, no barge-in) and
what the caller says over it is kept (`discard_audio_if_uninterruptible` is off as well).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .audio_eot import load_model
from .detector import ParleyTurnDetector
from .eot_text import EotTextModel
from .lm_eot import LmEotScorer
from .options import Profile, ProfileParams, TurnOptions, params_for
from .session_hooks import TurnHooks


@dataclass
class TurnHandling:
    profile: Profile
    params: ProfileParams
    hooks: TurnHooks
    detector: ParleyTurnDetector
    session_kwargs: dict[str, Any]
    """`vad`, `turn_handling` and `aec_warmup_duration` for `AgentSession(**session_kwargs, ...)`."""

    def attach(self, session: Any) -> None:
        """Let the detector follow the session's caller/agent states. Call before `session.start()`."""
        self.hooks.attach(session)


def load_vad(params: ProfileParams) -> Any:
    """Silero VAD with the profile's settings (loads the ONNX bundled in livekit-plugins-silero)."""
    from livekit.plugins import silero

    v = params.vad
    return silero.VAD.load(
        activation_threshold=v.activation_threshold,
        min_speech_duration=v.min_speech_duration,
        min_silence_duration=v.min_silence_duration,
        prefix_padding_duration=v.prefix_padding_duration,
        sample_rate=v.sample_rate,
    )


def turn_handling_dict(params: ProfileParams, detector: Any) -> dict[str, Any]:
    """The `turn_handling=` value (LiveKit TurnHandlingOptions as a plain dict)."""
    ep = params.endpoint
    return {
        "turn_detection": detector,
        "endpointing": {"mode": "fixed", "min_delay": ep.min_delay, "max_delay": ep.max_delay},
        "interruption": {
            "enabled": True,
            "mode": "vad",
            "min_duration": params.interrupt_min_speech_s,
            "min_words": params.interrupt_min_words,
            "resume_false_interruption": True,
            # LiveKit's own resume is the ceiling; the STT node resumes sooner once its FINAL has no words
            # (TurnHooks.resume_paused_reply), `false_interruption_timeout_s` after the caller's voice ended
            "false_interruption_timeout": max(params.resume_ceiling_s, params.false_interruption_timeout_s),
            "discard_audio_if_uninterruptible": False,
        },
    }


def build_turn_handling(
    options: TurnOptions,
    profile: Profile,
    *,
    vad: Any | None = None,
    audio_model: Any | None = None,
    lm_scorer: LmEotScorer | None = None,
    text_model: EotTextModel | None = None,
) -> TurnHandling:
    """Everything turn-taking for one call; `vad`/`audio_model`/`lm_scorer`/`text_model` let a prewarmed
    process share its models between calls (the scorer's cache and connection pool are per process)."""
    params = params_for(profile, options)
    hooks = TurnHooks(options, params)
    if audio_model is None and options.use_audio_model:
        audio_model = load_model()  # now, not on the caller's first turn (the first load takes ~0.3 s)
    detector = ParleyTurnDetector(hooks, audio_model=audio_model, lm_scorer=lm_scorer, text_model=text_model)
    session_kwargs: dict[str, Any] = {
        "vad": vad if vad is not None else load_vad(params),
        "turn_handling": turn_handling_dict(params, detector),
        "aec_warmup_duration": params.aec_warmup_s,
    }
    return TurnHandling(
        profile=profile, params=params, hooks=hooks, detector=detector, session_kwargs=session_kwargs
    )
