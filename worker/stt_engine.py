"""Which Whisper a job process talks to: the host speech engine's client, or (no engine) its own model."""

from __future__ import annotations

import logging
from typing import Any

from .settings import Settings

log = logging.getLogger("parley.stt")


def engine_transcriber(settings: Settings) -> Any:
    """A client of the host speech engine when one is configured (the worker sets its address for its job
    processes), else None: the STT then loads the process's own model (plugins/whisper/model.py)."""
    if settings.stt_engine != "host" or not settings.stt_engine_address:
        return None
    from plugins.whisper.engine_client import SpeechClientOptions, SpeechEngineClient, SpeechEngineUnavailable

    client = SpeechEngineClient(
        SpeechClientOptions(
            settings.stt_engine_address,
            secret=settings.stt_engine_secret.get_secret_value(),
            wait_s=settings.stt_engine_wait_s,
            model_name=settings.effective_stt_model,
        )
    )
    try:
        client.probe()  # the model's name and languages, now rather than on the first call
    except SpeechEngineUnavailable as e:
        log.warning("speech engine not reachable yet; calls will wait for it", extra={"error": str(e)[:200]})
    return client


def start_host_engine(settings: Settings) -> tuple[Any, str]:
    """Start the host speech engine for this worker's job processes: (the engine, its address), or (None, "")
    when not wanted. The address goes into the settings the job processes are handed."""
    from .settings import SettingsError
    from .speech_engine import HostSpeechEngine, HostSpeechEngineOptions, SpeechEngineStartError

    if settings.stt_engine != "host" or settings.stt_engine_address:
        return None, ""
    engine = HostSpeechEngine(
        HostSpeechEngineOptions(
            model=settings.effective_stt_model,
            device=settings.stt_device,
            backend=settings.stt_backend,
            compute_type=settings.stt_compute_type,
            cpu_threads=settings.stt_cpu_threads,
            workers=settings.stt_num_workers,
            max_batch=settings.stt_engine_max_batch,
            secret=settings.stt_engine_secret.get_secret_value(),
            log_path=settings.stt_engine_log,
        )
    )
    try:
        address = engine.start()
    except SpeechEngineStartError as e:
        raise SettingsError(f"speech engine: {e}") from None
    return engine, address
