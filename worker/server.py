"""The LiveKit AgentServer: prewarm loads the models once per job process, each call gets an AgentSession.

One host process runs the embedded LLM (when no LLM URL is configured) and LiveKit's job processes; every
job process inherits the LLM URL through the environment. The load reported to LiveKit is the larger of the
CPU load and the TTS engine's fill, so LiveKit stops sending calls to a host whose engine is full.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from livekit.agents import AgentServer, JobContext, JobProcess, cli
from livekit.plugins import openai as _openai_plugin  # noqa: F401  (registers for download-files)
from livekit.plugins import silero as _silero_plugin  # noqa: F401

from .agent_file import call_tools, effective_settings, pop_agent_flag
from .call_report import CallEndMetrics, CallIdentity, CallReporter, CallReportOptions
from .headroom import HeadroomOptions, HostHeadroom, JobSignals, admits_new_call
from .memory import release_free_memory, tune_allocator
from .outbound import (
    OutboundCall,
    OutboundError,
    add_call_context,
    answer_handling,
    callee_audio,
    dial,
    handle_answer,
    outbound_request,
    prefetch,
    prepare_lines,
)
from .settings import Settings, SettingsError, get_settings
from .sip import (
    ATTR_PHONE_NUMBER,
    DtmfHandler,
    DtmfOptions,
    SipCall,
    dtmf_as_user_input,
    hang_up,
    input_sample_rate,
    is_sip_participant,
    pick_turn_profile,
)
from .stt_engine import start_host_engine
from .turn_marks import RoomDataSender, RoomMetricsPublisher, StageHistograms, TurnMarks

if TYPE_CHECKING:
    from turn_detection.lm_eot import LmEotScorer

log = logging.getLogger("parley.worker")

_RUN_COMMANDS = {"dev", "start", "console", "connect"}

FORKSERVER_PRELOAD = ["worker.forkserver_signals", "worker.forkserver_models"]
"""Imported once in LiveKit's forkserver: it ignores a process-group SIGTERM (so job processes report exit 0,
not 255, at shutdown), and builds the per-process models every job then inherits warm (no prewarm cost)."""


def prewarm(proc: JobProcess) -> None:
    """Runs once per job process before any call: VAD, STT, TTS (and its engine connection), phrase cache."""
    from .forkserver_signals import exit_cleanly_until_started, started
    from .pipeline import load_components

    exit_cleanly_until_started()  # a worker shutting down now kills this process: it held no call
    try:
        tune_allocator()  # before the models load: their buffers then go back to the kernel when freed
        settings = get_settings()
        logging.getLogger("parley").setLevel(settings.log_level)  # LiveKit's CLI sets only the root level
        if settings.pipeline != "parley":  # a baseline for the benchmarks (worker/stock_pipeline.py)
            from .stock_pipeline import load_stock_components, stock_options

            opts = stock_options(settings.pipeline)
            proc.userdata["stock"] = load_stock_components(settings, settings.llm_base_url, opts)
            return
        comp = load_components(settings, settings.llm_base_url)
        proc.userdata["components"] = comp
    finally:
        started()


async def entrypoint(ctx: JobContext) -> None:
    from .pipeline import build_call, load_components

    settings = get_settings()
    if settings.pipeline != "parley":
        await stock_entrypoint(ctx, settings)
        return
    comp = ctx.proc.userdata.get("components") or load_components(settings, settings.llm_base_url)
    await ctx.connect()
    warm_up = getattr(comp.tts, "warm_up", None)
    if warm_up is not None:  # open the engine connection on this loop now, not on the first reply
        await warm_up()
    served = effective_settings(settings)  # with the agent file's choices
    go_on, call = await outbound_dial(ctx, served)
    if not go_on:
        return
    verdict = admits_new_call()
    if call is None and not verdict.admits:  # dispatched before the worker's full load reached LiveKit
        await refuse_call(ctx, settings, comp, verdict)
        return
    signals = JobSignals(comp.tts)
    signals.start()
    ctx.add_shutdown_callback(signals.aclose)
    participant = await ctx.wait_for_participant(identity=call.identity if call else None)
    profile = pick_turn_profile(settings.turn_profile, participant)
    phone = is_sip_participant(participant)
    rate = input_sample_rate(profile)
    answer: AsyncIterable[Any] | None = None
    if call is not None:  # the callee's audio, read from the answer on
        answer = prefetch(callee_audio(participant, rate))
    reporter = call_reporter(ctx, served, participant, profile, outbound=call is not None)
    on_end = reporter.log.note_ended_by if reporter else None
    transferred = reporter.log.note_transferred if reporter else None
    tools = call_tools(served, phone, on_transferred=transferred)  # the agent file's, else the phone defaults
    session, agent = build_call(settings, comp, profile, tools, on_call_end=on_end)
    metrics = RoomMetricsPublisher(ctx.room, enabled=settings.room_metrics)
    metrics.attach(session)
    if reporter is not None:
        reporter.attach(session)
        ctx.add_shutdown_callback(_report_sender(reporter, metrics))
    ctx.add_shutdown_callback(metrics.aclose)
    ctx.add_shutdown_callback(_hand_back_memory)
    ctx.add_shutdown_callback(lambda: audit_open_streams(session, comp))
    if comp.eot_lm is not None:
        scorer = comp.eot_lm
        ctx.add_shutdown_callback(lambda: _log_scorer_use(scorer))
    if phone:
        dtmf = DtmfHandler(
            ctx.room,
            dtmf_as_user_input(session),
            DtmfOptions(max_digits=settings.dtmf_max_digits, inter_digit_timeout_s=settings.dtmf_timeout_s),
        )
        dtmf.attach(participant.identity)
        ctx.add_shutdown_callback(dtmf.aclose)
    marks = turn_marks(ctx, settings, session, agent, comp.tts)
    log.info("call started", extra={"room": ctx.room.name, "profile": profile, "phone": phone})
    if call is not None:
        agent.greet_on_enter = False  # who answered decides what is said first
        if call.context:
            await add_call_context(agent, call.context)
    await session.start(
        agent,
        room=ctx.room,
        record=settings.record_audio,
        room_options=_room_options(settings, call.identity if call else None),
    )
    marks.attach_output(session)
    if call is not None and answer is not None:
        listening = asyncio.create_task(
            answer_outbound(ctx, served, call, session, agent, answer, rate, reporter)
        )
        ctx.add_shutdown_callback(lambda: _cancel(listening))


async def refuse_call(ctx: JobContext, settings: Settings, comp: Any, verdict: Any) -> None:
    """The host is full: the caller hears one short line and the call ends, instead of joining calls that
    would all degrade together (worker/headroom.py)."""
    from .pipeline import build_call

    log.warning("host full: call refused", extra={"why": verdict.why, "pressure": verdict.pressure})
    participant = await ctx.wait_for_participant()
    session, agent = build_call(settings, comp, pick_turn_profile(settings.turn_profile, participant), [])
    agent.greet_on_enter = False
    await session.start(agent, room=ctx.room, room_options=_room_options(settings))
    await session.say(HeadroomOptions().full_line, allow_interruptions=False, add_to_chat_ctx=False)
    await hang_up(ctx.api, ctx.room.name)


async def _log_scorer_use(scorer: LmEotScorer) -> None:
    """What the end-of-turn scorer cost this job process and how often a decision had its score."""
    log.info("end-of-turn scorer use", extra=scorer.usage())


async def outbound_dial(ctx: JobContext, settings: Settings) -> tuple[bool, OutboundCall | None]:
    """(whether the job goes on, its outbound call dialled and answered or None for an inbound job). The
    job is over after a malformed request or when nobody answered: both logged in one line, the latter
    also in the call report."""
    try:
        call = outbound_request(ctx.job.metadata)
    except OutboundError as e:
        log.error("%s", e)
        ctx.shutdown(str(e))
        return False, None
    if call is None or not call.dials:
        return True, call
    trunk = call.trunk or settings.sip_outbound_trunk
    if not trunk:
        log.error("outbound call: no SIP trunk: set PARLEY_SIP_OUTBOUND_TRUNK or outbound.trunk")
        ctx.shutdown("outbound call without a trunk")
        return False, None
    result = await dial(ctx.api, ctx.room.name, call, trunk)
    if result.answered:
        return True, call
    log.info("outbound call not answered", extra={"outcome": result.outcome, "sip_status": result.sip_status})
    reporter = call_reporter(ctx, settings, None, "telephony", outbound=True)
    if reporter is not None:
        reporter.log.note_ended_by(result.outcome)
        await reporter.finish([])
    ctx.shutdown(f"outbound call: {result.outcome}")
    return False, None


async def answer_outbound(
    ctx: JobContext,
    settings: Settings,
    call: OutboundCall,
    session: Any,
    agent: Any,
    audio: AsyncIterable[Any],
    rate: int,
    reporter: CallReporter | None,
) -> None:
    """Greet whoever answered, or leave the voicemail message after the beep and end the call (or end it at
    once on a not-in-service tone)."""
    from .agent import OUTBOUND_GREETING

    built_in = OUTBOUND_GREETING.get(settings.language, OUTBOUND_GREETING["en"])
    greeting = call.greeting or settings.outbound_greeting or built_in
    message = call.voicemail if call.voicemail is not None else settings.voicemail_message

    async def end_call(why: str) -> None:  # voicemail, not_in_service
        if reporter is not None:
            reporter.log.note_ended_by(why)
        await hang_up(ctx.api, ctx.room.name)

    cached = agent.greeting_audio if getattr(agent, "greeting_audio", None) else lambda _text: None
    lines = [t for t in (greeting, message) if t and cached(t) is None]
    prepared: dict[str, Any] = {}
    preparing = asyncio.create_task(prepare_lines(session.tts, lines, prepared)) if lines else None
    try:
        await handle_answer(
            audio,
            rate,
            answer_handling(session, agent, greeting, message, end_call, prepared, settings.language),
        )
    finally:
        if preparing is not None:
            preparing.cancel()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()


def _report_sender(
    reporter: CallReporter, metrics: RoomMetricsPublisher
) -> Callable[[], Coroutine[None, None, None]]:
    async def send() -> None:  # at the job's shutdown, when every reply's figures are in
        await reporter.finish(metrics.replies)

    return send


def call_reporter(
    ctx: JobContext, settings: Settings, participant: Any, profile: str, outbound: bool = False
) -> CallReporter | None:
    """How this call ends, reported (worker/call_report.py): to PARLEY_CALL_REPORT_URL and, with a
    Prometheus port, counted; None when neither is set. `participant` is None for an outbound call nobody
    answered."""
    if not settings.call_report_url and not settings.prometheus_port:
        return None
    sip = SipCall.from_participant(participant) if participant is not None else None
    opts = None
    if settings.call_report_url:
        try:
            opts = CallReportOptions(
                url=settings.call_report_url,
                secret=settings.call_report_secret.get_secret_value(),
                include_transcript=settings.call_report_transcript,
            )
        except ValueError as e:  # refused at start (check_call_report); an agent file may set it later
            log.error("call report not sent: %s", e)
    identity = CallIdentity(
        job_id=ctx.job.id,
        room=ctx.room.name,
        agent=settings.agent_name,  # the agent file's name unless PARLEY_AGENT_NAME says otherwise
        profile=profile,
        phone=sip is not None or (outbound and participant is None),
        direction="outbound" if outbound else "inbound",
        sip_call_id=sip.call_id if sip else "",
        caller_number=participant.attributes.get(ATTR_PHONE_NUMBER, "") if sip else "",
    )
    return CallReporter(identity, opts, CallEndMetrics() if settings.prometheus_port else None)


def _room_options(settings: Settings, identity: str | None = None) -> Any:
    """The caller's audio at the rate Parley's VAD and Whisper use, in short frames: LiveKit's default
    (24 kHz, 50 ms frames) holds each piece of speech up to 50 ms before the VAD sees it.

    When the session closes because the caller hung up, the room is deleted: otherwise the job (and its
    slot in PARLEY_MAX_CALLS) lives on until livekit-server closes the room, `departure_timeout` later (20 s
    by default), and a host at capacity refuses calls it could take."""
    from livekit.agents.voice import room_io

    extra: dict[str, Any] = {"participant_identity": identity} if identity else {}
    return room_io.RoomOptions(
        audio_input=room_io.AudioInputOptions(sample_rate=16_000, frame_size_ms=settings.input_frame_ms),
        delete_room_on_close=settings.delete_room_on_hangup,
        **extra,
    )


def turn_marks(ctx: JobContext, settings: Settings, session: Any, agent: Any, tts_model: Any) -> TurnMarks:
    """Per-turn marks to the room (`parley.marks`) and, with a Prometheus port, to histograms."""
    sender = RoomDataSender(ctx.room)
    ctx.add_shutdown_callback(sender.aclose)
    hist = StageHistograms(settings.pipeline) if settings.prometheus_port else None
    send = sender if settings.room_metrics else (lambda _m: None)
    marks = TurnMarks(send, hist)
    marks.attach(session, agent, tts_model)
    return marks


async def stock_entrypoint(ctx: JobContext, settings: Settings) -> None:
    """A baseline call (PARLEY_PIPELINE=stock|stock-tuned): the same models, LiveKit's own wiring."""
    from .stock_pipeline import build_stock_call, load_stock_components, stock_options

    opts = stock_options(settings.pipeline)
    comp = ctx.proc.userdata.get("stock") or load_stock_components(settings, settings.llm_base_url, opts)
    await ctx.connect()
    await ctx.wait_for_participant()
    session, agent = build_stock_call(settings, comp)
    marks = turn_marks(ctx, settings, session, agent, comp.tts)
    log.info("call started", extra={"room": ctx.room.name, "pipeline": settings.pipeline})
    await session.start(agent, room=ctx.room, record=settings.record_audio)
    marks.attach_output(session)


def open_streams(comp: Any) -> dict[str, int]:
    """Speech streams of the process's shared STT and TTS that are still open."""
    return {
        "open_stt_streams": int(getattr(comp.stt, "open_streams", 0)),
        "open_tts_streams": int(getattr(comp.tts, "active_streams", 0)),
    }


async def audit_open_streams(session: Any, comp: Any) -> None:
    """When a call ends, every STT and TTS stream it opened must be closed: a job process may serve many
    calls, so one left open would accumulate. The line is read by `benchmarks.load --livekit`
    (`leaked_streams`); a leak is a warning."""
    try:
        await session.aclose()  # idempotent: the framework may have closed it already
    except Exception as e:  # the audit must never fail a shutdown
        log.debug("session close before the stream audit failed: %s", e)
    counts = open_streams(comp)
    level = logging.WARNING if any(counts.values()) else logging.INFO
    log.log(level, "call ended", extra=counts)


async def _hand_back_memory() -> None:
    """When a call ends, give the allocator's free pages back (a job process may serve many calls)."""
    await asyncio.to_thread(release_free_memory)


_engine_fill_configured = False


def engine_load() -> float:
    """The TTS engine's fill (0..1), or 0 when there is no engine."""
    global _engine_fill_configured
    try:
        from plugins.orpheus.tts import engine_fill  # type: ignore[import-not-found]
    except ImportError:
        return 0.0
    if not _engine_fill_configured:
        from .pipeline import configure_orpheus_fill

        configure_orpheus_fill(get_settings())
        _engine_fill_configured = True
    try:
        return float(engine_fill())
    except Exception:
        return 1.0  # an engine we cannot ask is treated as full


def host_pressure(server: AgentServer) -> float:
    """How full this host is: 1.0 = full. Its call slots count against PARLEY_MAX_CALLS, the TTS engine's
    fill (and host CPU, if asked) against PARLEY_LOAD_THRESHOLD.

    Host CPU alone is a poor signal on a shared or bursty machine (one busy neighbour marks the worker full
    and calls are refused), so by default the worker counts its own calls."""
    settings = get_settings()
    pressure = max(len(server.active_jobs) / settings.max_calls, engine_load() / settings.load_threshold)
    if settings.load_signal == "calls+cpu":
        from livekit.agents.worker import _DefaultLoadCalc

        pressure = max(pressure, _DefaultLoadCalc.get_load(server) / settings.load_threshold)
    return pressure


HEADROOM: HostHeadroom | None = None  # the worker process's (main() makes it); job processes read its verdict


def measured_pressure(active_calls: int) -> float:
    """Measured headroom (worker/headroom.py) as pressure; the verdict is left for job processes."""
    if HEADROOM is None:
        return 0.0
    HEADROOM.collect()
    verdict = HEADROOM.verdict(active_calls)
    HEADROOM.publish(verdict)
    return verdict.pressure if active_calls else 0.0  # an idle host takes a call whatever its neighbours do


def compute_load(server: AgentServer) -> float:
    """The load LiveKit sees: the host's pressure scaled so that full = the server's dispatch limit.

    livekit-server sends no job to a worker that reports a load at or above its `agents.target_load`
    (0.7 unless its config says otherwise; measured on 1.13.5: 0.699 dispatched, 0.70 not), whatever
    threshold the worker itself uses. Reporting calls / max_calls as is made a 4-call host refuse its 4th
    call at 0.75. Scaled, a host takes calls until it is full, on any server left at its defaults."""
    pressure = max(host_pressure(server), measured_pressure(len(server.active_jobs)))
    return min(1.0, pressure * get_settings().livekit_target_load)


def build_server(settings: Settings) -> AgentServer:
    server = AgentServer(
        setup_fnc=prewarm,
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
    server.rtc_session(entrypoint, agent_name=settings.agent_name)
    return server


def _prometheus_dir() -> str:
    import tempfile

    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(prefix="parley-prometheus-")


def _start_embedded_llm(settings: Settings) -> Any:
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
    os.environ["PARLEY_LLM_BASE_URL"] = url  # inherited by LiveKit's job processes
    get_settings.cache_clear()
    return llm


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


LOOP_MONITOR_WARN_MS = "250"
"""livekit-agents' event-loop watchdog in every process (job processes idle in the pool too): at its default
100 ms threshold it ticks every 20 ms, two wake-ups a tick, and samples the loop's stack from 80 ms of lag,
which a loaded 2-core host reaches often. At 250 ms it ticks every 50 ms: an idle job process measured 0.55 %
of a core instead of 1.05 %, and stalls that long are still reported."""


def quiet_loop_monitor() -> None:
    """Set the watchdog's threshold before any job process starts, unless the operator set one
    (`LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS`; 0 turns it off)."""
    os.environ.setdefault("LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS", LOOP_MONITOR_WARN_MS)


def main(argv: list[str] | None = None) -> None:
    argv = pop_agent_flag(list(sys.argv if argv is None else argv))  # --agent FILE = PARLEY_AGENT
    quiet_loop_monitor()
    command = argv[1] if len(argv) > 1 else ""
    try:
        settings = effective_settings(get_settings())
        logging.getLogger("parley").setLevel(settings.log_level)
        if not settings.log_room_names:
            from .log_privacy import install_with_livekit_logging

            install_with_livekit_logging()  # callers' numbers in room names stay out of the logs
        llm = speech = None
        if command == "console":
            check_audio_devices()
        if command in _RUN_COMMANDS:
            preflight(settings)
        if command in _RUN_COMMANDS and not settings.llm_base_url:
            if effective_settings(settings).language != "en":
                log.warning(  # the call still runs: turn-taking, recognition and voice are the language's
                    "the embedded LLM (SmolLM2-135M) writes English only; "
                    "set PARLEY_LLM_BASE_URL to an LLM that writes this agent's language"
                )
            llm = _start_embedded_llm(settings)
            settings = effective_settings(get_settings())
        if command in _RUN_COMMANDS:
            speech = start_host_engine(
                settings
            )  # one Whisper for every job process (worker/speech_engine.py)
            settings = effective_settings(get_settings())
            global HEADROOM
            HEADROOM = HostHeadroom(HeadroomOptions(), speech_engine=speech)
        if command == "download-files":
            from .downloads import register

            register()
        if command in _RUN_COMMANDS:
            print(live_line(settings), flush=True)
        server = build_server(settings)
    except SettingsError as e:
        print(str(e), file=sys.stderr)
        sys.exit(2)
    try:
        sys.argv = argv
        cli.run_app(server)
    finally:
        if HEADROOM is not None:
            HEADROOM.close()
        if speech is not None:
            speech.close()
        if llm is not None:
            llm.close()
