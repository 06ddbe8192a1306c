"""Build Parley's hear → think → speak pipeline from settings.

The same builder serves the LiveKit worker and the offline call harness, so what the benchmarks measure is
what callers get. Heavy models load once per process (`load_components`, called from prewarm) and are shared
by every session that process runs.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
from livekit.agents import NOT_GIVEN, APIConnectOptions, llm, stt, tts, vad
from livekit.agents.voice import AgentSession, SpeechHandle
from livekit.agents.voice.agent_session import SessionConnectOptions

from caches import FillerController, FillerControllerOptions, FillerOptions, FillerPolicy, PhraseCache
from caches import load_phrases as load_phrase_set
from turn_detection import Profile, TurnOptions, build_turn_handling, load_vad, params_for
from turn_detection.audio_eot import load_model as load_eot_model
from turn_detection.lm_eot import LmEotOptions, LmEotScorer

from . import livekit_patches
from .agent import AgentOptions, ParleyAgent
from .context import ContextOptions
from .flows.clock import with_date
from .forkserver_shared import shared_vad, shared_voice
from .idle_caller import IdleCallerWatch, IdleOptions, end_room_call
from .llm_slots import SlotPool
from .prompt_warm import PromptWarmer
from .repeat_request import attach_repeat_request
from .settings import Settings
from .stt_hold import attach_stt_hold

log = logging.getLogger("parley.pipeline")


@dataclass
class Components:
    """Per-process models, shared by all sessions in the process."""

    vads: dict[Profile, vad.VAD]  # Silero tuned per profile (web 16 kHz, telephony 8 kHz)
    eot_model: Any  # LiveKit's bundled v1-mini audio end-of-turn model (None where it cannot load)
    stt: stt.STT
    tts: tts.TTS
    llm: llm.LLM
    voice: str = ""  # the voice the phrase cache is keyed by
    phrases: PhraseCache | None = None
    live: dict[str, str] = field(default_factory=dict)  # what is live, for the one startup line
    llm_base_url: str = ""
    llm_client: Any = None  # shared by the per-call LLMs
    llm_slots: SlotPool | None = None  # embedded LLM only: one KV-cache slot per call
    eot_lm: LmEotScorer | None = None  # the language-model end-of-turn scorer, shared by every call


WHOLE_TURN_GAP_S = 3.0
"""A caller's words this soon after their last FINAL continue the turn: decoded again with the turn's earlier
audio as one, the whole turn replaces the earlier FINALs (benchmarks/stt.py compares it with 0 = alone)."""


def load_stt(settings: Settings) -> stt.STT:
    from plugins.whisper import ModelOptions, StreamingOptions, WhisperSTT, WhisperSTTOptions

    from .stt_engine import engine_transcriber

    return WhisperSTT(
        WhisperSTTOptions(
            model=ModelOptions(
                model=settings.effective_stt_model,
                device=settings.stt_device,
                compute_type=settings.stt_compute_type or "default",
                cpu_threads=settings.stt_cpu_threads,
                num_workers=settings.stt_num_workers,
            ),
            language=settings.effective_stt_language,
            streaming=StreamingOptions(
                style_prompt=settings.effective_stt_prompt,
                vocabulary=settings.stt_vocabulary_terms,
                context_gap_s=WHOLE_TURN_GAP_S,
                whole_turn=True,
            ),
        ),
        transcriber=engine_transcriber(settings),
    )


def load_tts(settings: Settings) -> tuple[tts.TTS, str]:
    from plugins.cpu_voice import CpuVoiceTTS

    cpu = CpuVoiceTTS(
        voice=settings.effective_cpu_voice,
        engine=shared_voice(settings.effective_cpu_voice),
        pronunciations=settings.tts_pronunciation_list,
    )
    if settings.tts_backend == "cpu" or not settings.engine_address:
        return cpu, f"cpu-voice:{settings.effective_cpu_voice}"
    try:
        from plugins.orpheus.tts import OrpheusTTS  # type: ignore[import-not-found]
    except ImportError:
        log.warning("orpheus plugin not available; using the CPU voice")
        return cpu, f"cpu-voice:{settings.effective_cpu_voice}"
    return OrpheusTTS.from_settings(settings, fallback=cpu), f"orpheus:{settings.tts_voice}"


def configure_orpheus_fill(settings: Settings) -> None:
    """Point the Orpheus plugin's fill probe (the worker's load report) at the engine, from explicit values:
    the plugin never reads the worker's settings itself."""
    from plugins.orpheus.capacity import configure_engine_fill  # type: ignore[import-not-found]

    if not settings.engine_address or settings.tts_backend == "cpu":
        configure_engine_fill("")
        return
    configure_engine_fill(
        settings.engine_address,
        settings.engine_secret.get_secret_value(),
        settings.engine_connect_timeout_s,
    )


def load_llm(
    settings: Settings,
    base_url: str,
    client: Any = None,
    slot: int | None = None,
    max_tokens: int | None = None,
) -> llm.LLM:
    """The OpenAI-compatible LLM. `client` shares one connection pool between calls; `slot` pins the
    requests to one llama.cpp slot of the embedded LLM (worker/llm_slots.py)."""
    from livekit.plugins import openai

    from .llm_server import MODEL_ALIAS

    # llama.cpp's own repetition penalty keeps the small embedded model from looping; other servers get
    # nothing they might reject
    extra: dict[str, Any] = {"repeat_penalty": 1.15} if settings.llm_model == MODEL_ALIAS else {}
    if slot is not None:
        extra["id_slot"] = slot
    return openai.LLM(
        extra_body=extra or NOT_GIVEN,
        model=settings.llm_model,
        base_url=base_url,
        client=client,
        api_key=settings.llm_api_key.get_secret_value() or "not-needed",
        temperature=settings.llm_temperature,
        max_completion_tokens=max_tokens or settings.llm_max_tokens,
        timeout=httpx.Timeout(settings.llm_timeout_s, connect=2.0),
        max_retries=0,
    )


LLM_STREAM_MODULES = (
    "openai.lib.streaming.chat",
    "openai.pagination",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "jiter",
)
"""What the OpenAI client imports on its first streamed request. Left to that request they are imported on the
call's event loop while the caller waits for the first reply: ~0.1 s idle, 0.3-0.5 s on a loaded host (the
loop monitor saw 123-198 ms blocks per module with four calls starting)."""


def import_llm_stream_modules() -> None:
    for name in LLM_STREAM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # another openai/anyio version lays them out differently: nothing to warm
            continue


def llm_client(settings: Settings, base_url: str) -> Any:
    """One HTTP client for every call's LLM in this process (per-call LLMs differ only in their slot)."""
    import openai

    import_llm_stream_modules()
    client = openai.AsyncClient(
        api_key=settings.llm_api_key.get_secret_value() or "not-needed",
        base_url=base_url,
        max_retries=0,
        http_client=httpx.AsyncClient(
            timeout=httpx.Timeout(settings.llm_timeout_s, connect=2.0),
            limits=httpx.Limits(max_connections=50, max_keepalive_connections=50, keepalive_expiry=120),
        ),
    )
    client.chat.completions  # noqa: B018 (its resources load on first use; see LLM_STREAM_MODULES)
    return client


def llm_slot_pool(settings: Settings, base_url: str, slots: int | None) -> SlotPool | None:
    """Slots to pin calls to, only for the embedded llama.cpp server (`id_slot` is its own extension)."""
    from .llm_server import MODEL_ALIAS

    if settings.llm_model != MODEL_ALIAS or not base_url:
        return None
    return SlotPool(base_url, slots or settings.max_calls)


def conversation_prefix(settings: Settings) -> list[dict[str, str]]:
    """What every call's LLM requests begin with (the agent's instructions, then its greeting), for
    warming the embedded LLM's slots before the first call."""
    opts = agent_options(settings)
    return [
        {"role": "system", "content": opts.spoken_instructions},
        {"role": "assistant", "content": opts.spoken_greeting},
    ]


def _vad(profile: Profile, settings: Settings) -> vad.VAD:
    """This profile's Silero VAD: the forkserver's (shared, worker/forkserver_models.py), else a new one."""
    params = params_for(profile, turn_options(settings))
    return shared_vad(str(profile), params) or load_vad(params)


def _prewarm_once(model: stt.STT | tts.TTS, warm: bool = False) -> None:
    """Warm a model now, in the process's prewarm. AgentSession calls `prewarm()` again at every session
    start, on the event loop; a second warm-up decode there delayed each call's greeting by ~1 s."""
    if not warm:
        model.prewarm()
    model.prewarm = lambda: None  # type: ignore[method-assign]


def load_phrases(settings: Settings, voice: str) -> PhraseCache | None:
    """The phrase cache for this voice (the served agent's own, with an agent file); None (synthesise
    everything) when it was never built. For an agent, one line says what is missing or stale."""
    from .agent_file import agent_cache_dir, agent_phrases, cache_report, served_spec

    spec = served_spec(settings)
    root = agent_cache_dir(settings.phrase_cache_dir, spec) if spec else settings.phrase_cache_dir
    try:
        cache: PhraseCache | None = PhraseCache.load(
            root, voice=voice, language=settings.language, pronunciations=settings.tts_pronunciation_list
        )
    except Exception as e:
        log.warning(
            "phrase cache not loaded; greetings and fillers will be synthesised",
            extra={"reason": str(e)[:200]},
        )
        cache = None
    if spec is not None:
        missing, stale = cache_report(cache, agent_phrases(spec), voice)
        if missing or stale:
            log.warning(
                f"phrase cache for agent {spec.name} ({voice}): {len(missing)} phrases missing, "
                f"{len(stale)} stale; they are synthesised when said. Build it with "
                f"`python -m worker.agent_file phrases {spec.source or spec.name}`"
            )
    return cache if cache is not None and len(cache) else None


def load_components(settings: Settings, llm_base_url: str, llm_slots: int | None = None) -> Components:
    """`llm_slots`: how many parallel slots the embedded LLM serves (default `max_calls`)."""
    settings = _served(settings)
    livekit_patches.install()
    vads = {p: _vad(p, settings) for p in Profile}
    stt_model = load_stt(settings)
    tts_model, tts_live = load_tts(settings)
    shared = shared_voice(settings.effective_cpu_voice)
    for model in (stt_model, tts_model):
        # a CPU voice from the forkserver is warm already (worker/forkserver_models.py)
        _prewarm_once(model, warm=shared is not None and getattr(model, "_engine", None) is shared)
    voice = settings.tts_voice if tts_live.startswith("orpheus") else settings.effective_cpu_voice
    phrases = load_phrases(settings, voice)
    client = llm_client(settings, llm_base_url)
    if phrases is not None and hasattr(tts_model, "phrase_cache"):
        tts_model.phrase_cache = phrases  # whole-utterance hits skip the engine round trip
    return Components(
        vads=vads,
        eot_model=load_eot_model() if settings.turn_use_audio_model else None,
        stt=stt_model,
        tts=tts_model,
        llm=load_llm(settings, llm_base_url, client=client),
        llm_base_url=llm_base_url,
        llm_client=client,
        llm_slots=llm_slot_pool(settings, llm_base_url, llm_slots),
        eot_lm=load_eot_lm(settings, llm_base_url, slot=llm_slots or settings.max_calls),
        voice=voice,
        phrases=phrases,
        live={
            "llm": f"{settings.llm_model} @ {llm_base_url}",
            "stt": f"faster-whisper:{settings.effective_stt_model}/{settings.stt_device}",
            "tts": tts_live,
            "language": settings.language,
        },
    )


def load_eot_lm(settings: Settings, llm_base_url: str, slot: int) -> LmEotScorer | None:
    """The end-of-turn scorer: the `eot_lm_url` option, else the embedded SmolLM2 server when it is the LLM.

    On the embedded server the scorer gets a slot of its own, `slot` = the one after the calls' slots
    (whoever starts the server serves one more), so its short prompts never evict a call's conversation."""
    from .llm_server import MODEL_ALIAS

    if not settings.turn_use_lm or settings.language != "en":
        return None  # its weight was calibrated on English turns only; other languages go without it
    url, extra_body = settings.eot_lm_url, {}
    if not url:
        if settings.llm_model != MODEL_ALIAS or not llm_base_url:
            return None  # an external reply LLM and no scorer URL: no server to ask
        url, extra_body = llm_base_url, {"id_slot": slot}
    opts = LmEotOptions(
        url=url,
        extra_body=extra_body,
    )
    return LmEotScorer(opts)


def turn_options(settings: Settings) -> TurnOptions:
    return TurnOptions(
        language=settings.language,
        use_audio_model=settings.turn_use_audio_model,
        ignore_backchannels=settings.turn_ignore_backchannels,
        delay_scale=settings.turn_patience,
    )


def resolve_profile(settings: Settings, detected: str) -> Profile:
    return Profile(settings.turn_profile if settings.turn_profile != "auto" else detected)


def connect_options(settings: Settings) -> SessionConnectOptions:
    """Fail fast on the hot path: one quick retry, then the agent apologises instead of going silent."""
    return SessionConnectOptions(
        llm_conn_options=APIConnectOptions(max_retry=1, retry_interval=0.3, timeout=settings.llm_timeout_s),
        tts_conn_options=APIConnectOptions(max_retry=1, retry_interval=0.2, timeout=5.0),
        stt_conn_options=APIConnectOptions(max_retry=2, retry_interval=0.2, timeout=10.0),
        max_unrecoverable_errors=20,
    )


def preemptive_tts(settings: Settings, comp: Components) -> bool:
    """Voice a preemptive reply before its turn is committed? Set, or on only when the CPU voice speaks."""
    if settings.preemptive_tts is not None:
        return settings.preemptive_tts
    return comp.live.get("tts", "").startswith("cpu-voice")


def _log_transcripts(session: AgentSession) -> None:
    """Only with PARLEY_LOG_TRANSCRIPTS=true: what each side said, one structured line per message."""
    tlog = logging.getLogger("parley.transcripts")

    @session.on("conversation_item_added")
    def _on_item(ev: Any) -> None:
        item = ev.item
        if getattr(item, "type", "") == "message" and item.text_content:
            tlog.info("transcript", extra={"role": item.role, "text": item.text_content})


def build_call(
    settings: Settings,
    comp: Components,
    profile: str = "web",
    tools: Sequence[llm.Tool] | None = None,
    on_call_end: Callable[[str], None] | None = None,
) -> tuple[AgentSession, ParleyAgent]:
    """One call's session and agent: local turn handling for the caller's profile, fillers, tools.
    `on_call_end` is told why when Parley itself ends the call (a silent line, the time limit).

    Turn detection and interruption mode are always set explicitly (turn_detection/setup.py): left unset,
    livekit-agents uses LiveKit Cloud inference in `dev` mode.
    """
    settings = _served(settings)
    prof = resolve_profile(settings, profile)
    turns = build_turn_handling(
        turn_options(settings), prof, vad=comp.vads[prof], audio_model=comp.eot_model, lm_scorer=comp.eot_lm
    )
    handling = dict(turns.session_kwargs["turn_handling"])
    handling["preemptive_generation"] = {"enabled": True, "preemptive_tts": preemptive_tts(settings, comp)}
    on_close: list[Callable[[Any], None]] = []
    slot: list[int] = []
    session: AgentSession = AgentSession(
        vad=turns.session_kwargs["vad"],
        stt=comp.stt,
        llm=call_llm(settings, comp, on_close, slot),
        tts=comp.tts,
        turn_handling=handling,  # type: ignore[arg-type]
        aec_warmup_duration=turns.session_kwargs.get("aec_warmup_duration"),
        conn_options=connect_options(settings),
        user_away_timeout=idle_options(settings).user_away_timeout,
    )
    for hook in on_close:
        session.on("close", hook)
    turns.attach(session)
    attach_stt_hold(session, comp.stt, settings.language)
    attach_repeat_request(session, comp.stt, settings.language)
    if settings.log_transcripts:
        _log_transcripts(session)
    agent = build_agent(settings, tools)
    agent.turns = turns
    attach_flow_extractor(settings, comp, agent)
    attach_fillers(settings, comp, session, agent)
    attach_idle_watch(settings, comp, session, agent, on_call_end)
    if slot and agent.plain_llm_replies:  # a developer's llm_node or a flow may send something else
        attach_prompt_warmer(settings, comp, session, agent, slot[0])
    return session, agent


def attach_prompt_warmer(
    settings: Settings, comp: Components, session: AgentSession, agent: ParleyAgent, slot: int
) -> PromptWarmer:
    """The caller's interim words read into this call's slot of the embedded LLM (worker/prompt_warm.py),
    through an LLM object of its own so its one-token requests never count as the agent's."""
    model = load_llm(settings, comp.llm_base_url, client=comp.llm_client, slot=slot, max_tokens=1)

    def reply_context(text: str) -> llm.ChatContext:
        ctx = agent.chat_ctx.copy()
        ctx.add_message(role="user", content=text)
        return agent.reply_context(ctx)

    warmer = PromptWarmer(model, reply_context, lambda: list(agent.tools))
    assert agent.turns is not None
    warmer.attach(session, agent.turns.hooks)
    return warmer


def call_llm(
    settings: Settings,
    comp: Components,
    close_hooks: list[Callable[[Any], None]],
    slot: list[int] | None = None,
) -> llm.LLM:
    """This call's LLM: pinned to a free slot of the embedded LLM when there is one (released when the
    session closes, or by the kernel if the process dies; its number is appended to `slot`), else the
    shared one."""
    lease = comp.llm_slots.lease() if comp.llm_slots is not None else None
    if lease is None:
        return comp.llm
    close_hooks.append(lambda _ev: lease.release())
    if slot is not None:
        slot.append(lease.id)
    return load_llm(settings, comp.llm_base_url, client=comp.llm_client, slot=lease.id)


def attach_flow_extractor(settings: Settings, comp: Components, agent: ParleyAgent) -> None:
    """A flow agent reads a slot its parsers missed through the call's LLM, under a JSON schema. Not with
    the embedded SmolLM2-135M: under the schema it answered today's date for "the day after Christmas" and
    for "my wife" (2026-12-07), a wrong value where asking again is right."""
    from .flows.extract import llm_extractor
    from .llm_server import MODEL_ALIAS

    if settings.llm_model == MODEL_ALIAS:
        return
    if agent.flow is not None and comp.llm_client is not None:
        agent.flow.extract = llm_extractor(comp.llm_client, settings.llm_model, agent.options.timezone)


def attach_fillers(settings: Settings, comp: Components, session: AgentSession, agent: ParleyAgent) -> None:
    """Cached greeting, late-reply fillers and tool-wait hold lines for one call (needs the phrase cache)."""
    cache = comp.phrases
    if cache is None:
        return
    agent.greeting_audio = lambda text: cache.frames_for(text, comp.voice, settings.language)
    policy = FillerPolicy(
        FillerOptions(
            late_threshold_ms=settings.filler_threshold_ms,
            no_repeat_turns=settings.filler_no_repeat_turns,
            hold_gap_ms=settings.filler_hold_gap_ms,
        )
    )
    # the agent itself apologises through the TTS when the LLM fails (works with or without a cache)
    opts = FillerControllerOptions(
        voice=comp.voice, language=settings.language, fillers=settings.fillers_enabled, apologies=False
    )
    agent.fillers = FillerController(session, cache, policy, opts)
    agent.fillers.attach()


def idle_options(settings: Settings) -> IdleOptions:
    return IdleOptions(
        reprompt_after_s=settings.idle_reprompt_s,
        reprompts=settings.idle_reprompts,
        max_call_s=settings.max_call_s,
    )


def phrase_lines(cache: PhraseCache | None, voice: str, language: str, kind: str) -> list[str]:
    """The lines of one kind this call can say from cache (the agent's own when it has a file), else the
    language's defaults (synthesised when said)."""
    if cache is not None:
        cached = sorted(p.text for p in cache.phrases(kind, voice, language))
        if cached:
            return cached
    defaults = load_phrase_set().defaults
    return list(defaults.get(language, defaults["en"]).get(kind, ()))  # type: ignore[call-overload]


def attach_idle_watch(
    settings: Settings,
    comp: Components,
    session: AgentSession,
    agent: ParleyAgent,
    on_end: Callable[[str], None] | None = None,
) -> IdleCallerWatch | None:
    """Ask a silent caller if they are still there, then end the call; end calls at their time limit."""
    opts = idle_options(settings)
    if opts.reprompt_after_s <= 0 and opts.max_call_s <= 0:
        return None

    def say(text: str, *, allow_interruptions: bool) -> SpeechHandle:
        fillers = getattr(agent, "fillers", None)
        cached = fillers.say_cached(text, allow_interruptions=allow_interruptions) if fillers else None
        return cached or session.say(text, allow_interruptions=allow_interruptions)

    watch = IdleCallerWatch(
        session,
        opts,
        say=say,
        reprompt_lines=phrase_lines(comp.phrases, comp.voice, settings.language, "reprompt"),
        goodbye_lines=phrase_lines(comp.phrases, comp.voice, settings.language, "goodbye"),
        end_call=end_room_call,
        on_end=on_end,
    )
    watch.attach()
    return watch


def _served(settings: Settings) -> Settings:
    """The settings with the served agent's file applied (PARLEY_AGENT; worker/agent_file)."""
    from .agent_file import effective_settings

    return effective_settings(settings)


def agent_options(settings: Settings) -> AgentOptions:
    from .agent_file import served_spec

    settings = _served(settings)
    spec = served_spec(settings)
    return AgentOptions(
        instructions=with_date(
            (spec.instructions if spec else None)
            or AgentOptions(language=settings.language).spoken_instructions,
            spec.timezone if spec else "UTC",
        ),
        greeting=spec.greeting_text if spec else None,
        timezone=spec.timezone if spec else "UTC",
        language=settings.language,
        max_sentences=settings.llm_max_sentences,
        max_words=settings.llm_max_words,
        context=ContextOptions(
            recent_turns=settings.context_recent_turns,
            max_chars=settings.context_max_chars,
            drop_step=max(1, settings.context_recent_turns // 2),
        ),
    )


def build_agent(settings: Settings, tools: Sequence[llm.Tool] | None = None) -> ParleyAgent:
    """Parley's agent, around the developer's own when PARLEY_AGENT names a Python entry point."""
    from .agent_file import make_agent

    return make_agent(_served(settings), agent_options(settings), list(tools or []))
