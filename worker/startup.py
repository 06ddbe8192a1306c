"""What the worker checks and starts before it registers: the configured models load, the LLM answers (or the
embedded one starts and reads the conversation prefix), a console has audio devices.
"""

from __future__ import annotations

import logging
from typing import Any

from .call_report import CallReportOptions
from .settings import Settings, SettingsError

log = logging.getLogger("parley.worker")


def start_embedded_llm(settings: Settings) -> tuple[Any, str]:
    """The embedded LLM server and its URL (the job processes' LLM base URL)."""
    from .llm_server import EmbeddedLLM, EmbeddedLLMError, EmbeddedLLMOptions
    from .pipeline import conversation_prefix

    llm = EmbeddedLLM(
        EmbeddedLLMOptions(
            port=settings.llm_embedded_port,
            threads=settings.llm_embedded_threads,
            batch_threads=settings.llm_embedded_batch_threads,
            # one slot per call (worker/llm_slots.py), one more for the end-of-turn scorer
            n_parallel=settings.max_calls + (1 if settings.turn_use_lm and not settings.eot_lm_url else 0),
            log_path=settings.llm_embedded_log,
        )
    )
    try:
        url = llm.start()
    except EmbeddedLLMError as e:
        raise SettingsError(f"embedded LLM: {e}") from None
    llm.warm(conversation_prefix(settings))
    return llm, url


def live_line(settings: Settings) -> str:
    tts = (
        f"orpheus:{settings.tts_voice} via {settings.engine_address} (fallback {settings.cpu_voice})"
        if settings.engine_address and settings.tts_backend != "cpu"
        else f"cpu-voice:{settings.cpu_voice}"
    )
    engine = f", host engine {settings.stt_engine_address}" if settings.stt_engine_address else ""
    return (
        f"parley live: llm={settings.llm_model} @ {settings.llm_base_url or 'embedded'}; "
        f"stt=faster-whisper:{settings.effective_stt_model} ({settings.stt_device}{engine}); tts={tts}; "
        f"language={settings.language}; agent={settings.agent_name}; livekit={settings.livekit_url}"
    )


def check_llm_reachable(base_url: str, api_key: str, timeout_s: float = 3.0) -> None:
    """GET {base}/models: any HTTP answer means something is listening; no answer is a startup error."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"{base_url}/models", headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s):
            return
    except urllib.error.HTTPError:
        return  # it answered (401/404 are the server's business, not reachability)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        reason = getattr(e, "reason", e)
        raise SettingsError(f"PARLEY_LLM_BASE_URL: no LLM answers at {base_url} ({reason})") from None


def check_stt_loads(settings: Settings) -> None:
    """Load the STT model once, here, with the job processes' own options, then let it go: a model folder
    that is present but cannot load (a corrupt model.bin, an unsupported compute type) stops start-up in
    one line instead of failing in every call's job process."""
    from plugins.whisper import ModelOptions, WhisperModelError, WhisperModelRunner

    runner = WhisperModelRunner(
        ModelOptions(
            model=settings.effective_stt_model,
            device=settings.stt_device,
            compute_type=settings.stt_compute_type or "default",
            cpu_threads=1,
            num_workers=1,
        )
    )
    try:
        runner.load()
    except WhisperModelError as e:
        raise SettingsError(f"PARLEY_STT_MODEL: {e}") from None
    finally:
        runner.close()


def preflight(settings: Settings) -> None:
    """Fail before registering with LiveKit, in one line, when a configured model cannot work."""
    lang = settings.effective_stt_language
    if settings.effective_stt_model.endswith(".en") and lang != "en":
        raise SettingsError(
            f"PARLEY_STT_MODEL: {settings.effective_stt_model} is English-only but the language is {lang!r}; "
            "leave it unset (the multilingual base is the default) or set PARLEY_LANGUAGE=en"
        )
    check_stt_loads(settings)
    check_call_report(settings)
    if settings.llm_base_url:
        check_llm_reachable(settings.llm_base_url, settings.llm_api_key.get_secret_value())


def check_call_report(settings: Settings) -> None:
    """Refuse a report setting that would send transcripts unsigned or in clear; warn when unsigned."""
    if not settings.call_report_url:
        return
    secret = settings.call_report_secret.get_secret_value()
    try:
        CallReportOptions(settings.call_report_url, secret, settings.call_report_transcript)
    except ValueError as e:
        raise SettingsError(f"PARLEY_CALL_REPORT_URL: {e}") from None
    if not secret:
        log.warning("call reports are unsigned: set PARLEY_CALL_REPORT_SECRET so the receiver can check them")


def check_audio_devices() -> None:
    """`console` talks through this machine's microphone and speaker; say so plainly when there are none."""
    try:
        import sounddevice as sd

        sd.query_devices(kind="input")
        sd.query_devices(kind="output")
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SettingsError(f"console needs a microphone and a speaker on this machine ({first})") from None
