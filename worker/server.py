"""The worker's composition root: settings composed once (`compose`), start-up checks and the host's
shared servers (embedded LLM, speech engine), then LiveKit's AgentServer with the call job
(`worker/call.py`) and the load report (`worker/load.py`).

Every job process is handed the composed settings by its entrypoint, never through the environment.
"""

from __future__ import annotations

import functools
import logging
import os
import sys

from livekit.agents import AgentServer, cli
from livekit.plugins import openai as _openai_plugin  # noqa: F401  (registers for download-files)
from livekit.plugins import silero as _silero_plugin  # noqa: F401

from . import load
from .agent_file import effective_settings, pop_worker_flags
from .call import entrypoint, prewarm
from .headroom import CallCost, HeadroomOptions, HostHeadroom
from .load import compute_load
from .settings import Settings, SettingsError, load_settings, use_settings
from .startup import check_audio_devices, live_line, preflight, start_embedded_llm
from .stt_engine import start_host_engine

log = logging.getLogger("parley.worker")

_RUN_COMMANDS = {"dev", "start", "console", "connect"}

FORKSERVER_PRELOAD = ["worker.forkserver_signals", "worker.forkserver_models"]
"""Imported once in LiveKit's forkserver: it ignores a process-group SIGTERM (so job processes report exit 0,
not 255, at shutdown), and builds the per-process models every job then inherits warm (no prewarm cost)."""


def build_server(settings: Settings) -> AgentServer:
    server = AgentServer(
        setup_fnc=functools.partial(prewarm, settings),
        load_fnc=compute_load,
        load_threshold=settings.livekit_target_load,  # compute_load reports full as exactly this
        num_idle_processes=settings.idle_processes,
        preload_modules=FORKSERVER_PRELOAD,
        ws_url=settings.livekit_url,
        api_key=settings.livekit_api_key,
        api_secret=settings.livekit_api_secret.get_secret_value(),
        port=settings.http_port,
        drain_timeout=settings.drain_timeout_s,
        prometheus_port=settings.prometheus_port or None,
        # job processes write their turn-stage histograms here so the worker's /metrics serves them
        prometheus_multiproc_dir=_prometheus_dir() if settings.prometheus_port else None,
    )
    server.rtc_session(functools.partial(entrypoint, settings), agent_name=settings.agent_name)
    return server


def _prometheus_dir() -> str:
    import tempfile

    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(prefix="parley-prometheus-")


LOOP_MONITOR_WARN_MS = "250"
"""livekit-agents' event-loop watchdog in every process (job processes idle in the pool too): at its default
100 ms threshold it ticks every 20 ms, two wake-ups a tick, and samples the loop's stack from 80 ms of lag,
which a loaded 2-core host reaches often. At 250 ms it ticks every 50 ms: an idle job process measured 0.55 %
of a core instead of 1.05 %, and stalls that long are still reported."""


def quiet_loop_monitor() -> None:
    """Set the watchdog's threshold before any job process starts, unless the operator set one
    (`LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS`; 0 turns it off)."""
    os.environ.setdefault("LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS", LOOP_MONITOR_WARN_MS)


def compose(argv: list[str]) -> tuple[list[str], Settings]:
    """The composition root: deployment variables, `--agent` / `--set` flags, then the agent file on top.
    Returns LiveKit's own arguments and the settings every process of this worker runs with."""
    argv, options = pop_worker_flags(argv)
    return argv, effective_settings(load_settings(**options))


def main(argv: list[str] | None = None) -> None:
    quiet_loop_monitor()
    llm = speech = None
    try:
        argv, settings = compose(list(sys.argv if argv is None else argv))
        command = argv[1] if len(argv) > 1 else ""
        logging.getLogger("parley").setLevel(settings.log_level)
        if not settings.log_room_names:
            from .log_privacy import install_with_livekit_logging

            install_with_livekit_logging()  # callers' numbers in room names stay out of the logs
        if command == "console":
            check_audio_devices()
        if command in _RUN_COMMANDS:
            preflight(settings)
        if command in _RUN_COMMANDS and not settings.llm_base_url:
            if settings.language != "en":
                log.warning(  # the call still runs: turn-taking, recognition and voice are the language's
                    "the embedded LLM (SmolLM2-135M) writes English only; "
                    "set PARLEY_LLM_BASE_URL to an LLM that writes this agent's language"
                )
            llm, url = start_embedded_llm(settings)
            settings = settings.model_copy(update={"llm_base_url": url})
        if command in _RUN_COMMANDS:
            speech, address = start_host_engine(settings)  # one Whisper for every job process
            if address:
                settings = settings.model_copy(update={"stt_engine_address": address})
            headroom = HeadroomOptions()
            load.HEADROOM = HostHeadroom(headroom, speech_engine=speech, cost=CallCost(headroom))
        if command == "download-files":
            from .downloads import register

            register()
        if command in _RUN_COMMANDS:
            print(live_line(settings), flush=True)
        use_settings(settings)
        server = build_server(settings)
    except SettingsError as e:
        print(str(e), file=sys.stderr)
        sys.exit(2)
    try:
        sys.argv = argv
        cli.run_app(server)
    finally:
        if load.HEADROOM is not None:
            load.HEADROOM.close()
        if speech is not None:
            speech.close()
        if llm is not None:
            llm.close()
