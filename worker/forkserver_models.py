"""Per-process models made once in LiveKit's forkserver and inherited, warm and copy-on-write, by every job.

Measured on 2 cores (2026-11, a job process forked from a forkserver: its own memory and prewarm CPU-s): with
Whisper moved to the host speech engine, what a job process still loaded in its prewarm was the CPU voice
(0.54 CPU-s, 132 MB of its own memory, most of it the warm-up synthesis), the two Silero VADs (0.13 CPU-s, 33
MB), the Silero gate of the STT and the modules the pipeline imports. None of them has to be per call: the
voice is serialised per process anyway, a VAD hands each session its own stream state, the gate makes its
state per stream. So the worker lists this module in AgentServer `preload_modules`; in the forkserver it
builds them from the worker's settings into forkserver_shared.py, and a job's `load_components` takes them
from there instead of loading its own.

Fork safety: the ONNX Runtime sessions here run with one intra-op and one inter-op thread (hibari's and
LiveKit's Silero settings), so no thread pool exists to be lost in the fork; the forkserver runs nothing
else. Anything that fails here is logged and left to the job to load as before.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from . import forkserver_shared as shared
from .forkserver_signals import in_forkserver

log = logging.getLogger("parley.preload")


def preload(settings: Any) -> dict[str, float]:
    """Build the shareable models for these settings; returns seconds per part (for the log)."""
    from plugins.cpu_voice.voice import open_voice
    from plugins.whisper.stt import silero_speech_prob
    from turn_detection import Profile, load_vad, params_for

    from . import pipeline

    settings = pipeline._served(settings)
    took: dict[str, float] = {}

    def step(name: str, fn: Any) -> None:
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:  # the job loads it itself, as before
            log.warning("preload skipped", extra={"part": name, "error": str(e)[:200]})
            return
        took[name] = round(time.perf_counter() - t, 3)

    def voice() -> None:
        v = open_voice(settings.effective_cpu_voice)
        v.synthesize("Hi.")  # the warm-up every job paid: its buffers are now shared
        shared.voices[settings.effective_cpu_voice] = v

    def vads() -> None:
        for p in Profile:
            params = params_for(p, pipeline.turn_options(settings))
            shared.vads[str(p)] = (params, load_vad(params))

    step("cpu_voice", voice)
    step("vads", vads)
    step("stt_gate", silero_speech_prob)  # the gate's ONNX session (an lru_cache in plugins/whisper/stt.py)
    step("llm_modules", pipeline.import_llm_stream_modules)
    return took


if in_forkserver():
    from .settings import get_settings

    try:
        log.info("preloaded into the forkserver", extra={"took_s": preload(get_settings())})
    except Exception as e:  # never take the forkserver down: jobs load their own
        log.warning("forkserver preload failed", extra={"error": str(e)[:200]})
