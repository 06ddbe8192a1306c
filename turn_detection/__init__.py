"""Turn taking for Parley: when the caller's turn ends, and what counts as an interruption. All local."""

from .detector import ParleyTurnDetector
from .endpoint_policy import EndpointDecision, EndpointOptions, decide
from .interruption_policy import OverlapVerdict, classify_overlap
from .options import Profile, ProfileParams, TurnOptions, params_for, profile_for_participant
from .session_hooks import TurnHooks
from .setup import TurnHandling, build_turn_handling, load_vad
from .text_cues import TextCue, text_cue

__all__ = [
    "EndpointDecision",
    "EndpointOptions",
    "OverlapVerdict",
    "ParleyTurnDetector",
    "Profile",
    "ProfileParams",
    "TextCue",
    "TurnHandling",
    "TurnHooks",
    "TurnOptions",
    "build_turn_handling",
    "classify_overlap",
    "decide",
    "load_vad",
    "params_for",
    "profile_for_participant",
    "text_cue",
]
