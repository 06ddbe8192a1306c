"""Barge-in benchmark: a caller talks over the agent; does the agent keep going or stop, and how fast?

    python -m benchmarks.bargein --data out/corpus/test/bargein [--limit N] [--json F]

DIR holds WAVs + labels.json (scripts/make_turn_corpus.py): case "backchannel" files ("mm-hmm", "okay")
must not stop the agent; case "interruption" files ("wait", "no, ...", a new question) must. Each file is one
trial through a real AgentSession in real time: Parley's turn handling (Silero VAD, the detector, VAD
interruption with the backchannel filter), Parley's streaming Whisper STT, no LLM. The agent says an 8 s line
(a quiet tone: the caller's microphone does not hear it, as with echo cancellation) and the caller's
utterance starts 1.5 s into it.
Six noise-only sounds (hum, clicks, white/pink/brown noise, syllable-rate "babble"; benchmarks.turns) are
played over the line too: they must neither cut nor pause it.
JSON: `backchannel_ignored_rate` (backchannels after which the agent played its line to the end, paused or
not), `backchannel_paused_rate` and `backchannel_gap_ms` {p50, p95} (how long the line stood silent, over
every backchannel it went on after), `backchannel_ducked_ms` (how long it went on ducked),
`interrupt_stop_rate` (interruptions that cut the agent's line), `interrupt_stop_ms` {p50, p95} (caller's
first voiced sample -> the agent's audio silenced or cut), `interrupt_duck_ms` (-> ducked; the profile's
`duck_db`; `--no-duck` stops it dead instead), `noise_ignored_rate`, `noise_paused_rate`,
`false_interruption_resumes` (pauses the session took back), `trials` [...]. The pause rules are the
profile's. `--profile telephony` plays every sound through a phone line (300-3400 Hz, 8 kHz G.711 mu-law)
to the telephony profile, as a SIP caller is heard.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from livekit import rtc

from benchmarks.cli import emit, percentiles
from benchmarks.turns import (
    RATE,
    BenchError,
    _rate,
    load_noise_cases,
    load_turn_cases,
    make_noise_files,
    phone_line,
)
from simulator.session_audio import PacedSpeaker, RealTimeMic
from worker.duck import Duck
from worker.settings import ENGLISH_STYLE_PROMPT

AGENT_RATE = 24000
AGENT_LINE_S = 8.0
CALLER_AT_S = 1.5


@dataclass
class Trial:
    file: str
    case: str
    stopped: bool
    """The agent's line was cut (interrupted)."""
    paused: int
    resumed: int
    stop_ms: float | None
    """Caller's first voiced sample -> first pause or cut of the agent's audio."""
    paused_ms: float
    """How long the agent's audio stood paused in all (a resumed pause is a gap in its line)."""
    duck_ms: float | None
    """Caller's first voiced sample -> the agent's audio ducked."""
    ducked_ms: float
    """How long the agent's audio went on ducked in all."""
    heard: list[str]
    """Transcripts that reached the session (what passed the backchannel filter), finals marked '(final)'."""


async def _agent_line() -> Any:
    n = AGENT_RATE // 50
    t = np.arange(int(AGENT_LINE_S * AGENT_RATE)) / AGENT_RATE
    pcm = (0.1 * np.sin(2 * np.pi * 220 * t) * 32767).astype(np.int16)
    for i in range(0, len(pcm), n):
        yield rtc.AudioFrame(pcm[i : i + n].tobytes(), AGENT_RATE, 1, len(pcm[i : i + n]))


async def run_trial(
    audio: np.ndarray, first_voiced_s: float, stt: Any, params: Any, profile: Any = None
) -> tuple[bool, PacedSpeaker, list[str]]:
    """One caller sound over the agent's line; returns (line cut, the speaker with its pauses and resumes,
    the transcripts the session was given)."""
    from livekit.agents import Agent, AgentSession, StopResponse

    from turn_detection import Profile, TurnOptions, build_turn_handling

    profile = profile or Profile.WEB
    setup = build_turn_handling(TurnOptions(overrides={profile: params}), profile)
    track = np.concatenate([np.zeros(int(CALLER_AT_S * RATE), np.float32), audio])
    track = np.concatenate([track, np.zeros(int((AGENT_LINE_S + 2.0) * RATE) - len(track), np.float32)])
    mic = RealTimeMic(track)
    duck = None if params.duck_db is None else Duck(params.duck_db, params.duck_hold_s, setup.hooks)
    sessions: list[Any] = []
    speaker = PacedSpeaker(
        AGENT_RATE,
        clock=mic.clock,
        duck=duck,
        caller_speaking=lambda: bool(sessions) and sessions[0].user_state == "speaking",
    )

    class BenchAgent(Agent):
        async def stt_node(self, audio, model_settings):  # type: ignore[no-untyped-def]
            async for ev in setup.hooks.stt_node(self, audio, model_settings):
                yield ev

        async def on_user_turn_completed(self, turn_ctx, new_message) -> None:  # type: ignore[no-untyped-def]
            raise StopResponse()

    session = AgentSession(stt=stt, **setup.session_kwargs)
    sessions.append(session)
    setup.attach(session)
    heard: list[str] = []
    session.on(
        "user_input_transcribed",
        lambda ev: heard.append(ev.transcript + (" (final)" if ev.is_final else "")),
    )
    session.input.audio = mic
    session.output.audio = speaker
    await session.start(BenchAgent(instructions="barge-in benchmark"))
    try:
        handle = session.say("agent line", audio=_agent_line(), add_to_chat_ctx=False)
        try:
            await asyncio.wait_for(handle.wait_for_playout(), timeout=AGENT_LINE_S + 10)
        except TimeoutError:  # the line stood paused for good: a failure, not a crash of the run
            heard.append(UNFINISHED)
        await asyncio.sleep(0.5)
        cut = handle.interrupted
    finally:
        await session.aclose()
        await speaker.aclose()
    if speaker.first_stop is not None:
        speaker.first_stop -= CALLER_AT_S + first_voiced_s
    if speaker.first_duck is not None:
        speaker.first_duck -= CALLER_AT_S + first_voiced_s
    return cut, speaker, heard


UNFINISHED = "(the agent's line never finished)"
"""Noted in a trial's transcripts when the line stood paused past its length + 10 s: not ignored."""

NOISE_S = 3.0


def _noise_trials() -> list[tuple[str, np.ndarray]]:
    """benchmarks.turns' noise-only sounds (hum, clicks, babble-like pink noise...), 3 s each."""
    with tempfile.TemporaryDirectory(prefix="parley-bargein-noise-") as tmp:
        make_noise_files(Path(tmp), seconds=NOISE_S)
        return [(c.file, c.audio) for c in load_noise_cases(Path(tmp)) if "silence" not in c.file]


async def run_benchmark(
    data: Path,
    limit: int | None,
    *,
    duck: bool = True,
    profile: str = "web",
) -> dict[str, Any]:
    from plugins.whisper import StreamingOptions, WhisperSTT, WhisperSTTOptions
    from turn_detection import Profile, TurnOptions, params_for

    prof = Profile(profile)
    params = params_for(prof, TurnOptions())
    if not duck:
        params = replace(params, duck_db=None)
    cases = [c for c in load_turn_cases(data) if c.case in ("backchannel", "interruption")]
    if not cases:
        raise BenchError(f"no backchannel/interruption files in {data} (scripts/make_turn_corpus.py)")
    cases = cases[:limit] if limit else cases
    stt = WhisperSTT(WhisperSTTOptions(streaming=StreamingOptions(style_prompt=ENGLISH_STYLE_PROMPT)))
    stt.prewarm()
    sounds = [
        (c.file, c.case, c.audio[: int((c.segments[-1][1] + 0.3) * RATE)], c.segments[0][0]) for c in cases
    ]
    sounds += [(name, "noise", audio, 0.0) for name, audio in _noise_trials()]
    if prof is Profile.TELEPHONY:
        sounds = [(name, case, phone_line(audio), start) for name, case, audio, start in sounds]
    trials: list[Trial] = []
    for name, case, audio, start in sounds:
        cut, sp, heard = await run_trial(audio, start, stt, params, prof)
        stop = None if sp.first_stop is None else round(sp.first_stop * 1000, 1)
        paused_ms = round(sp.paused_s * 1000, 1)
        duck_at = None if sp.first_duck is None else round(sp.first_duck * 1000, 1)
        ducked_ms = round(sp.ducked_s * 1000, 1)
        trials.append(
            Trial(name, case, cut, sp.pauses, sp.resumes, stop, paused_ms, duck_at, ducked_ms, heard)
        )
    back = [t for t in trials if t.case == "backchannel"]
    inter = [t for t in trials if t.case == "interruption"]
    noise = [t for t in trials if t.case == "noise"]

    return {
        "backchannel_ignored_rate": _rate([not t.stopped and UNFINISHED not in t.heard for t in back]),
        "interrupt_stop_rate": _rate([t.stopped for t in inter]),
        "interrupt_stop_ms": percentiles([t.stop_ms for t in inter if t.stopped and t.stop_ms is not None]),
        "backchannel_paused_rate": _rate([t.paused > 0 for t in back]),
        "backchannel_gap_ms": percentiles([t.paused_ms for t in back if not t.stopped]),
        "backchannel_ducked_ms": percentiles(
            [t.ducked_ms for t in back if not t.stopped and t.ducked_ms > 0]
        ),
        "interrupt_duck_ms": percentiles([t.duck_ms for t in inter if t.duck_ms is not None]),
        "noise_ignored_rate": _rate([not t.stopped and UNFINISHED not in t.heard for t in noise]),
        "noise_paused_rate": _rate([t.paused > 0 for t in noise]),
        "false_interruption_resumes": sum(t.resumed for t in trials),
        "interrupt_min_words": params.interrupt_min_words,
        "interrupt_min_speech_s": params.interrupt_min_speech_s,
        "duck_db": params.duck_db,
        "profile": prof.value,
        "trials": [asdict(t) for t in trials],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bargein", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data", required=True, type=Path, help="folder with WAVs + labels.json (bargein corpus)"
    )
    ap.add_argument("--limit", type=int, help="first N files only")
    ap.add_argument(
        "--profile",
        choices=("web", "telephony"),
        default="web",
        help="the turn profile; telephony plays each sound through a phone line first",
    )
    ap.add_argument(
        "--no-duck",
        action="store_true",
        help="a pause stops the agent dead instead of ducking it (LiveKit's own)",
    )
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        result = asyncio.run(
            run_benchmark(args.data, args.limit, duck=not args.no_duck, profile=args.profile)
        )
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s, g, d = result["interrupt_stop_ms"], result["backchannel_gap_ms"], result["interrupt_duck_ms"]
    print(
        f"pause after {result['interrupt_min_speech_s']} s of speech with >= {result['interrupt_min_words']} "
        f"words\nbackchannels ignored {result['backchannel_ignored_rate']} (paused then resumed: "
        f"{result['backchannel_paused_rate']}, gap p50 {g['p50']} ms)  interruptions stopped the agent "
        f"{result['interrupt_stop_rate']}  stop delay p50 {s['p50']} ms p95 {s['p95']} ms\n"
        f"noise ignored {result['noise_ignored_rate']} (paused: {result['noise_paused_rate']})  "
        f"resumes {result['false_interruption_resumes']}\n"
        f"ducked to {result['duck_db']} dB: interruptions ducked p50 {d['p50']} ms p95 {d['p95']} ms, "
        f"backchannels went on ducked p50 {result['backchannel_ducked_ms']['p50']} ms"
    )
    for t in result["trials"]:
        print(
            f"  {t['file']:<24}{t['case']:<14}{'CUT' if t['stopped'] else 'kept':<6}"
            f"stop {t['stop_ms']}  duck {t['duck_ms']}  paused {t['paused_ms']} ms  "
            f"ducked {t['ducked_ms']} ms  {' | '.join(t['heard'])}"
        )
    return emit(result, lambda _r: None, args.json)  # the table is printed above


if __name__ == "__main__":
    sys.exit(main())
