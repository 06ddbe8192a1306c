"""Speech gate on synthetic audio with a scripted speech probability (energy above a level = speech)."""

from __future__ import annotations

import numpy as np

from plugins.whisper.speech_gate import SAMPLE_RATE, WINDOW, GateEvent, GateOptions, SpeechGate


def loud_is_speech(w: np.ndarray) -> float:
    return 1.0 if float(np.sqrt(np.mean(w * w))) > 0.05 else 0.0


def tone(seconds: float, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (amp * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)


def push_in_frames(gate: SpeechGate, pcm: np.ndarray, frame: int = 320) -> list[GateEvent]:
    events: list[GateEvent] = []
    for i in range(0, len(pcm), frame):
        events += gate.push(pcm[i : i + frame])
    return events


def test_silence_never_opens_the_gate() -> None:
    calls: list[int] = []

    def prob(w: np.ndarray) -> float:
        calls.append(1)
        return 1.0

    gate = SpeechGate(prob)
    assert push_in_frames(gate, silence(2.0)) == []
    assert not gate.active
    assert calls == []  # below the energy floor the model is not even asked


def test_utterance_events_in_order() -> None:
    gate = SpeechGate(loud_is_speech, GateOptions(pause_s=0.16, end_s=1.0))
    audio = np.concatenate([silence(0.5), tone(1.0), silence(0.3), tone(0.5), silence(1.2)])
    events = push_in_frames(gate, audio)
    assert events == [
        GateEvent.STARTED,
        GateEvent.PAUSED,
        GateEvent.RESUMED,
        GateEvent.PAUSED,
        GateEvent.ENDED,
    ]


def test_preroll_and_tail_crop() -> None:
    opts = GateOptions(preroll_s=0.3, tail_s=0.2)
    gate = SpeechGate(loud_is_speech, opts)
    push_in_frames(gate, np.concatenate([silence(1.0), tone(1.0), silence(0.8)]))
    audio = gate.audio()
    # pre-roll (~0.3 s) + speech (1 s) + tail (0.2 s), window-quantised
    assert abs(len(audio) / SAMPLE_RATE - 1.5) < 0.07
    assert gate.length / SAMPLE_RATE > 2.0  # the trailing silence is kept, just not decoded
    assert abs(gate.speech_s - 1.0) < 0.07
    assert abs(gate.start_sample / SAMPLE_RATE - 0.7) < 0.07
    # where the voice began, and how long it lasted: what the backchannel rule reads
    assert abs(gate.voice_start / SAMPLE_RATE - 1.0) < 0.04
    voiced = (gate.start_sample + gate.speech_end - gate.voice_start) / SAMPLE_RATE
    assert abs(voiced - 1.0) < 0.07
    gate.trim(round(0.5 * SAMPLE_RATE))  # committed words past the onset move it with them
    assert gate.voice_start == gate.start_sample


def test_short_click_does_not_start_an_utterance() -> None:
    gate = SpeechGate(loud_is_speech, GateOptions(min_speech_s=0.09))
    events = push_in_frames(gate, np.concatenate([silence(0.3), tone(WINDOW / SAMPLE_RATE), silence(0.5)]))
    assert events == []
    assert not gate.active


def test_revision_tracks_new_speech_and_trim() -> None:
    gate = SpeechGate(loud_is_speech)
    push_in_frames(gate, tone(16 * WINDOW / SAMPLE_RATE))  # whole windows: none half tone, half silence
    r1 = gate.revision
    push_in_frames(gate, silence(0.3))
    assert gate.revision == r1
    push_in_frames(gate, tone(0.2))
    assert gate.revision > r1
    r2 = gate.revision
    before = gate.length
    gate.trim(SAMPLE_RATE // 4)
    assert gate.length == before - SAMPLE_RATE // 4
    assert gate.revision > r2


def test_finish_resets_but_keeps_revision_monotonic() -> None:
    gate = SpeechGate(loud_is_speech)
    push_in_frames(gate, tone(0.5))
    r = gate.revision
    gate.finish()
    assert not gate.active and gate.length == 0 and len(gate.audio()) == 0
    push_in_frames(gate, tone(0.5))
    assert gate.active and gate.revision > r
