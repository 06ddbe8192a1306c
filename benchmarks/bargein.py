"""Barge-in benchmark: a caller talks over the agent; does the agent keep going or stop, and how fast?

    python -m benchmarks.bargein --data out/corpus/test/bargein [--limit N] [--json F]

DIR holds WAVs + labels.json (scripts/make_turn_corpus.py): case "backchannel" files ("mm-hmm", "okay")
must not stop the agent; case "interruption" files ("wait", "no, ...", a new question) must. Each file is one
trial through a real AgentSession in real time: Parley's turn handling (Silero VAD, the detector, VAD
interruption with the backchannel filter), Parley's streaming Whisper STT, no LLM. The agent says an 8 s line
(a quiet tone: the caller's microphone does not hear it, as with echo cancellation) and the caller's
utterance starts 1.5 s into it.
JSON: `backchannel_ignored_rate` (backchannels after which the agent played its line to the end, paused or
not), `interrupt_stop_rate` (interruptions that cut the agent's line), `interrupt_stop_ms` {p50, p95}
(caller's first voiced sample -> the agent's audio paused or cut), `false_interruption_resumes` (pauses the
session took back), `trials` [...].
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents.voice import io

from benchmarks.turns import RATE, BenchError, _pct, _RealTimeMic, load_turn_cases

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


class _Speaker(io.AudioOutput):
    """A pausable real-time loudspeaker that notes when the agent's audio was paused or cut."""

    def __init__(self, clock: Any) -> None:
        super().__init__(
            label="bargein-speaker",
            capabilities=io.AudioOutputCapabilities(pause=True),
            sample_rate=AGENT_RATE,
        )
        self._clock = clock
        self._queue: deque[rtc.AudioFrame | None] = deque()
        self._wake = asyncio.Event()
        self._playing = asyncio.Event()
        self._playing.set()
        self._active = False
        self._position = 0.0
        self.first_stop: float | None = None
        self.pauses = 0
        self.resumes = 0
        self._task = asyncio.create_task(self._run())

    def _stopped(self) -> None:
        if self.first_stop is None:
            self.first_stop = self._clock()

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self._queue.append(frame)
        self._wake.set()

    def flush(self) -> None:
        super().flush()
        self._queue.append(None)
        self._wake.set()

    def clear_buffer(self) -> None:
        self._queue.clear()
        if self._active:
            self._stopped()
            self._finish(interrupted=True)

    def pause(self) -> None:
        self.pauses += 1
        self._stopped()
        self._playing.clear()

    def resume(self) -> None:
        if not self._playing.is_set():
            self.resumes += 1
        self._playing.set()

    def _finish(self, *, interrupted: bool) -> None:
        self._active = False
        position, self._position = self._position, 0.0
        self.on_playback_finished(playback_position=position, interrupted=interrupted)

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._playing.wait()
            if not self._queue:
                continue
            item = self._queue.popleft()
            if item is None:
                if self._active:
                    self._finish(interrupted=False)
                continue
            if not self._active:
                self._active = True
                self.on_playback_started(created_at=time.time())
            await asyncio.sleep(item.duration)
            self._position += item.duration

    async def aclose(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _agent_line() -> Any:
    n = AGENT_RATE // 50
    t = np.arange(int(AGENT_LINE_S * AGENT_RATE)) / AGENT_RATE
    pcm = (0.1 * np.sin(2 * np.pi * 220 * t) * 32767).astype(np.int16)
    for i in range(0, len(pcm), n):
        yield rtc.AudioFrame(pcm[i : i + n].tobytes(), AGENT_RATE, 1, len(pcm[i : i + n]))


async def run_trial(
    audio: np.ndarray, first_voiced_s: float, stt: Any
) -> tuple[bool, int, int, float | None]:
    """One caller utterance over the agent's line; returns (cut, pauses, resumes, stop time on the clock)."""
    from livekit.agents import Agent, AgentSession, StopResponse

    from turn_detection import Profile, TurnOptions, build_turn_handling

    setup = build_turn_handling(TurnOptions(), Profile.WEB)
    track = np.concatenate([np.zeros(int(CALLER_AT_S * RATE), np.float32), audio])
    track = np.concatenate([track, np.zeros(int((AGENT_LINE_S + 2.0) * RATE) - len(track), np.float32)])
    mic = _RealTimeMic(track)
    speaker = _Speaker(mic.clock)

    class BenchAgent(Agent):
        async def stt_node(self, audio, model_settings):  # type: ignore[no-untyped-def]
            async for ev in setup.hooks.stt_node(self, audio, model_settings):
                yield ev

        async def on_user_turn_completed(self, turn_ctx, new_message) -> None:  # type: ignore[no-untyped-def]
            raise StopResponse()

    session = AgentSession(stt=stt, **setup.session_kwargs)
    setup.attach(session)
    session.input.audio = mic
    session.output.audio = speaker
    await session.start(BenchAgent(instructions="barge-in benchmark"))
    try:
        handle = session.say("agent line", audio=_agent_line(), add_to_chat_ctx=False)
        await asyncio.wait_for(handle.wait_for_playout(), timeout=AGENT_LINE_S + 10)
        await asyncio.sleep(0.5)
        cut = handle.interrupted
    finally:
        await session.aclose()
        await speaker.aclose()
    stop = None if speaker.first_stop is None else speaker.first_stop - (CALLER_AT_S + first_voiced_s)
    return cut, speaker.pauses, speaker.resumes, stop


async def run_benchmark(data: Path, limit: int | None) -> dict[str, Any]:
    from plugins.whisper import WhisperSTT

    cases = [c for c in load_turn_cases(data) if c.case in ("backchannel", "interruption")]
    if not cases:
        raise BenchError(f"no backchannel/interruption files in {data} (scripts/make_turn_corpus.py)")
    cases = cases[:limit] if limit else cases
    stt = WhisperSTT()
    stt.prewarm()
    trials: list[Trial] = []
    for case in cases:
        start, end = case.segments[0][0], case.segments[-1][1]
        audio = case.audio[: int((end + 0.3) * RATE)]
        cut, pauses, resumes, stop = await run_trial(audio, start, stt)
        trials.append(
            Trial(case.file, case.case, cut, pauses, resumes, None if stop is None else round(stop * 1000, 1))
        )
    back = [t for t in trials if t.case == "backchannel"]
    inter = [t for t in trials if t.case == "interruption"]
    return {
        "backchannel_ignored_rate": round(sum(not t.stopped for t in back) / len(back), 4) if back else None,
        "interrupt_stop_rate": round(sum(t.stopped for t in inter) / len(inter), 4) if inter else None,
        "interrupt_stop_ms": _pct([t.stop_ms for t in inter if t.stopped and t.stop_ms is not None]),
        "backchannel_paused_rate": round(sum(t.paused > 0 for t in back) / len(back), 4) if back else None,
        "false_interruption_resumes": sum(t.resumed for t in trials),
        "trials": [asdict(t) for t in trials],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bargein", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data", required=True, type=Path, help="folder with WAVs + labels.json (bargein corpus)"
    )
    ap.add_argument("--limit", type=int, help="first N files only")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        result = asyncio.run(run_benchmark(args.data, args.limit))
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = result["interrupt_stop_ms"]
    print(
        f"backchannels ignored {result['backchannel_ignored_rate']}  (paused then resumed: "
        f"{result['backchannel_paused_rate']})  interruptions stopped the agent "
        f"{result['interrupt_stop_rate']}  stop delay p50 {s['p50']} ms p95 {s['p95']} ms  "
        f"resumes {result['false_interruption_resumes']}"
    )
    for t in result["trials"]:
        print(f"  {t['file']:<24}{t['case']:<14}{'CUT' if t['stopped'] else 'kept':<6}{t['stop_ms']}")
    if args.json:
        try:
            args.json.write_text(json.dumps(result, indent=2))
        except OSError as e:
            print(f"error: cannot write {args.json}: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
