"""Turn-taking options: the two call profiles (web, telephony) and the settings the worker exposes.

Web callers come in wideband through a browser with its own echo cancellation; phone callers come through
livekit-sip at 8 kHz, noisier, with codec artefacts, so the VAD is stricter and the waits longer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .endpoint_policy import EndpointOptions

SIP_PARTICIPANT_KIND = 3
"""livekit rtc ParticipantKind.PARTICIPANT_KIND_SIP (kept as a number so this module needs no livekit)."""


class Profile(enum.Enum):
    WEB = "web"
    TELEPHONY = "telephony"


@dataclass(frozen=True)
class VadParams:
    """Silero VAD settings (livekit-plugins-silero `VAD.load` arguments)."""

    activation_threshold: float
    min_speech_duration: float
    min_silence_duration: float
    prefix_padding_duration: float
    sample_rate: Literal[8000, 16000]


@dataclass(frozen=True)
class ProfileParams:
    vad: VadParams
    endpoint: EndpointOptions
    interrupt_min_speech_s: float
    """VAD speech before the agent pauses for a barge-in."""
    interrupt_min_words: int
    """Words (after the backchannel filter) needed before that pause; 0 = the voice alone pauses the agent
    and words decide afterwards (a final with real words cuts it, none resumes it). On the dev barge-in
    split 0 paused 77 ms sooner (p50 349 vs 426 ms) but left a 1.5 s gap in the agent's line after every
    "mm-hmm" (1 paused on 3 of 16); 1 it is."""
    false_interruption_timeout_s: float
    """Silence after a pause with no real words before the agent resumes where it stopped (counted from the
    end of the caller's voice, applied once the recogniser's FINAL says there were none)."""
    aec_warmup_s: float
    """Start of each agent turn during which caller audio cannot interrupt (echo canceller settling)."""
    resume_ceiling_s: float = 3.0
    """How long a paused reply waits for the recogniser's verdict on the caller's sound before resuming
    anyway (an STT that died or fell behind). On a slow or busy host the FINAL of a 3 s interruption came
    after `false_interruption_timeout_s`, the agent resumed over the caller and their words were lost."""
    duck_db: float | None = -18.0
    """Level of the agent's reply while the caller's voice holds it paused: it goes on this much quieter
    (worker/duck.py) instead of stopping, so a backchannel leaves no hole in it; None stops it dead as LiveKit
    does. -18 dB is far enough below the caller's own voice to read as the agent yielding (a common speech
    ducking depth), near enough to follow the words it goes on with."""
    duck_hold_s: float = 1.2
    """A caller still talking this long after the duck is taking the floor, not listening: the reply is then
    silenced until their words decide. From the barge-in corpus's dev splits: a backchannel's voice lasted at
    most ~1.1 s, and the VAD reads it as speech `min_silence_duration` longer, from
    `interrupt_min_speech_s` after its onset (web: 1.1 + 0.2 - 0.1)."""


WEB = ProfileParams(
    vad=VadParams(
        activation_threshold=0.5,
        min_speech_duration=0.05,
        min_silence_duration=0.2,
        prefix_padding_duration=0.3,
        sample_rate=16000,
    ),
    # Tuned on out/corpus/dev/web (scripts/make_turn_corpus.py) and its held-out-voice twin, by everything a
    # caller counts as a failure (cut off at any pause, answered > 1.5 s late, missed) with finished-turn
    # p50 <= 450 ms; max_delay covers thinking pauses, and the max and sequence holds stay 2.5 s (longer
    # pushed spelled names past the 3 s miss window). The language-model term (lm_eot.py) reads the
    # caller's words after the agent's last line. The recogniser's doubt about the last word
    # (plugins/whisper/words.py) is one more term; confident_p stays 0.7 so that term only ever holds a
    # turn longer, never takes one sooner. The figures: turn_detection/README.md.
    endpoint=EndpointOptions(
        min_delay=0.2,
        hesitation_delay=1.3,
        max_delay=2.5,
        audio_weight=0.5,
        sequence_delay=2.5,
        confident_p=0.7,
        unlikely_p=0.5,
        lm_weight=1.0,
        lm_center=0.2,
        confidence_weight=0.5,
        confidence_center=0.8,
        # A turn only the models read as unfinished is held to max_delay (a probability under unlikely_p
        # means max_delay to LiveKit too). Chosen on both dev splits by every failure a caller counts: 1.3 s
        # 140 failures, 2.0 s 121, 2.5 s 118.
        model_hold=2.5,
    ),
    # barge-in within 300 ms: the caller's voice pauses (ducks) the agent after 0.1 s of speech; a
    # backchannel's FINAL resumes it at once (TurnHooks.resume_paused_reply), noise after the timeout.
    # On out/corpus/dev/bargein: stop p50 / p95 153 / 264 ms, backchannels ignored 87.5 %, noise ignored
    # 100 % and never paused. Through a room the caller hears ~180 ms more (benchmarks/RESULTS.md).
    interrupt_min_speech_s=0.1,
    interrupt_min_words=0,
    false_interruption_timeout_s=1.0,
    aec_warmup_s=0.5,
)

TELEPHONY = ProfileParams(
    vad=VadParams(
        activation_threshold=0.6,
        min_speech_duration=0.1,
        min_silence_duration=0.3,
        prefix_padding_duration=0.3,
        sample_rate=8000,
    ),
    # Tuned on out/corpus/dev/telephony: v1-mini scores 8 kHz pauses and finished turns alike, so it counts
    # less. The language-model term and its band were chosen on both dev/telephony splits (the main corpus
    # and the held-out voice) by every failure a caller counts within a 500 ms finished-turn p50; of the
    # candidates with the fewest failures this one keeps min_delay and holds the fewest finished turns.
    endpoint=EndpointOptions(
        min_delay=0.3,
        hesitation_delay=1.15,
        max_delay=2.5,
        audio_weight=0.25,
        sequence_delay=2.5,
        confident_p=0.6,
        unlikely_p=0.5,
        lm_weight=0.5,
        lm_center=0.4,
        # as the web profile's (both telephony dev splits): 1.15 s 158 failures, 2.5 s 152
        model_hold=2.5,
    ),
    # phone callers barge in as web callers do: the voice pauses the agent, words decide. On dev through a
    # phone line (`benchmarks.bargein --profile telephony`): stop p50 / p95 293 / 552 ms, backchannels
    # ignored 87.5 %, interruptions 93.8 %, noise never paused; every backchannel pauses the line (gap p50
    # 1.1 s).
    interrupt_min_speech_s=0.1,
    interrupt_min_words=0,
    false_interruption_timeout_s=1.5,
    aec_warmup_s=0.5,
    duck_hold_s=1.3,  # 1.1 + 0.3 - 0.1, as the web profile's
)

PROFILES: dict[Profile, ProfileParams] = {Profile.WEB: WEB, Profile.TELEPHONY: TELEPHONY}


@dataclass(frozen=True)
class TurnOptions:
    """What the worker can set (from worker/settings.py); everything else lives in the profile tables."""

    language: Literal["en", "ko"] = "en"
    """Language assumed for text cues when the transcript does not show it (Hangul means Korean)."""
    use_audio_model: bool = True
    """Blend in LiveKit's local audio end-of-turn model (v1-mini, bundled in livekit-agents)."""
    ignore_backchannels: bool = True
    """Keep talking over "mm-hmm", "yeah", "okay", "네", "응"; False makes any words a barge-in."""
    delay_scale: float = 1.0
    """Multiplies every endpoint delay: >1 is more patient, <1 snappier."""
    overrides: dict[Profile, ProfileParams] = field(default_factory=dict)
    """Replace a profile's whole table (tests, experiments)."""

    def __post_init__(self) -> None:
        if self.language not in ("en", "ko"):
            raise ValueError(f"turn language must be 'en' or 'ko', got {self.language!r}")
        if not 0.25 <= self.delay_scale <= 4.0:
            raise ValueError(f"turn delay_scale must be within [0.25, 4], got {self.delay_scale}")


def params_for(profile: Profile, options: TurnOptions) -> ProfileParams:
    """The profile's table with the options applied."""
    params = options.overrides.get(profile, PROFILES[profile])
    if options.delay_scale == 1.0:
        return params
    ep = params.endpoint
    s = options.delay_scale
    return replace(
        params,
        endpoint=replace(
            ep,
            min_delay=ep.min_delay * s,
            hesitation_delay=ep.hesitation_delay * s,
            max_delay=ep.max_delay * s,
            sequence_delay=ep.sequence_delay * s,
            model_hold=None if ep.model_hold is None else ep.model_hold * s,
        ),
    )


def profile_for_participant(participant_or_kind: Any) -> Profile:
    """TELEPHONY for a SIP participant (livekit-sip caller), WEB for anything else.

    Accepts an `rtc.RemoteParticipant` (its `.kind`), a ParticipantKind value, or None (no caller yet).
    """
    kind = getattr(participant_or_kind, "kind", participant_or_kind)
    try:
        return Profile.TELEPHONY if kind is not None and int(kind) == SIP_PARTICIPANT_KIND else Profile.WEB
    except (TypeError, ValueError):
        return Profile.WEB
