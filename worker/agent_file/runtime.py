"""What the worker serves: PARLEY_AGENT (an agent file or a `module:callable`) applied to the settings, the
agent built per call, its tools, and its own phrase cache."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livekit.agents import llm

from caches.keys import phrase_key as normalise_text
from caches.phrase_cache import PhraseCache
from caches.phrases import Phrase, PhraseKind, load_phrases
from plugins.pronunciation import (
    PronunciationError,
    check_pronunciations,
    format_pronunciations,
    merge_pronunciations,
)
from plugins.whisper.options import WhisperConfigError
from plugins.whisper.vocabulary import check_vocabulary

from ..agent import AgentOptions, ParleyAgent
from ..flows.agent import make_flow_agent
from ..settings import Settings, SettingsError
from ..sip import TelephonyToolOptions, end_call_tool, send_dtmf_tool, telephony_tools, transfer_call_tool
from .entry import AgentEntryError, is_entry, load_factory, make_user_agent
from .http_tools import HttpToolRuntime, http_tools
from .spec import AgentFileError, AgentSpec, load_agent_file

log = logging.getLogger("parley.agents")


@dataclass(frozen=True)
class ServedAgent:
    """The agent this worker serves: an agent file, a Python entry point, or both (the file's `entry`)."""

    spec: AgentSpec | None = None
    entry: str | None = None

    @property
    def name(self) -> str | None:
        return self.spec.name if self.spec is not None else None


def load_served_agent(value: str) -> ServedAgent | None:
    """Resolve PARLEY_AGENT; raises AgentFileError / AgentEntryError with one line."""
    if not value:
        return None
    if is_entry(value) and not Path(value).exists():
        load_factory(value)  # import now: a bad entry point stops startup, not the first call
        return ServedAgent(entry=value)
    spec = load_agent_file(value)
    if spec.entry:
        load_factory(spec.entry)
    return ServedAgent(spec=spec, entry=spec.entry)


@functools.lru_cache(maxsize=8)
def served_agent_for(value: str) -> ServedAgent | None:
    try:
        return load_served_agent(value)
    except (AgentFileError, AgentEntryError) as e:
        raise SettingsError(f"PARLEY_AGENT: {e}") from None


def apply_agent(settings: Settings, spec: AgentSpec | None) -> Settings:
    """The settings with the agent file's choices on top (anything the file leaves out keeps its setting).
    The dispatch name is the file's `name` unless PARLEY_AGENT_NAME is set explicitly."""
    if spec is None:
        return settings
    upd: dict[str, Any] = {"language": spec.language}
    if "agent_name" not in settings.model_fields_set:  # an explicit PARLEY_AGENT_NAME still wins
        upd["agent_name"] = spec.name
    pairs = {
        "tts_voice": spec.voice,
        "cpu_voice": spec.cpu_voice,
        "llm_base_url": spec.llm.base_url,
        "llm_model": spec.llm.model,
        "llm_temperature": spec.llm.temperature,
        "llm_max_tokens": spec.llm.max_tokens,
        "llm_max_sentences": spec.llm.max_sentences,
        "llm_max_words": spec.llm.max_words,
        "turn_profile": spec.turn.profile,
        "turn_patience": spec.turn.patience,
        "call_report_url": spec.report.url if spec.report else None,
        "call_report_transcript": spec.report.transcript if spec.report else None,
        "outbound_greeting": spec.outbound.greeting,
        "voicemail_message": spec.outbound.voicemail,
    }
    upd.update({k: v for k, v in pairs.items() if v is not None})
    if spec.vocabulary:  # the file's terms after the setting's (one list, checked again as a whole)
        try:
            terms = check_vocabulary([*settings.stt_vocabulary_terms, *spec.vocabulary])
        except WhisperConfigError as e:
            raise SettingsError(
                f"PARLEY_AGENT: {e} (the stt_vocabulary option and the file's list together)"
            ) from None
        upd["stt_vocabulary"] = ", ".join(terms)
    if spec.pronunciations:  # the file's entries replace the setting's for the same word
        try:
            said = merge_pronunciations(
                settings.tts_pronunciation_list, check_pronunciations(spec.pronunciations)
            )
        except PronunciationError as e:
            raise SettingsError(
                f"PARLEY_AGENT: {e} (the tts_pronunciations option and the file's list together)"
            ) from None
        upd["tts_pronunciations"] = format_pronunciations(said)
    end = spec.builtin("end_call")
    goodbyes = spec.phrase_lines({}).get("goodbye") or []
    if end is not None and (end.goodbye or goodbyes):
        upd["sip_goodbye"] = end.goodbye or goodbyes[0]
    transfer = spec.builtin("transfer")
    if transfer is not None:
        upd["sip_transfer_targets"] = dict(transfer.targets)
    return settings.model_copy(update=upd)


def effective_settings(settings: Settings) -> Settings:
    """Settings for the agent PARLEY_AGENT names (unchanged without one). Idempotent."""
    served = served_agent_for(settings.agent)
    if served is not None and served.spec is not None:
        check_tool_env(served.spec, settings.tool_env_prefix)
    return apply_agent(settings, served.spec if served else None)


def check_tool_env(spec: AgentSpec, prefix: str) -> None:
    """Stop start-up (one line) when a tool header reads a variable outside the tools' prefix."""
    for tool in spec.http_tools:
        outside = [n for n in tool.env_names() if not n.startswith(prefix)]
        if outside:
            raise SettingsError(
                f"PARLEY_AGENT: tool {tool.name}: header variable {outside[0]} must start with {prefix} "
                "(PARLEY_TOOL_ENV_PREFIX)"
            )


def served_spec(settings: Settings) -> AgentSpec | None:
    served = served_agent_for(settings.agent)
    return served.spec if served else None


def pop_worker_flags(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """`worker.py dev|start|console --agent FILE --set NAME=VALUE ...`: Parley's own flags, removed before
    LiveKit's CLI parses the rest, as settings options (`--agent` is the `agent` option, PARLEY_AGENT)."""
    out: list[str] = []
    options: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        flag, eq, inline = arg.partition("=")
        if flag not in ("--agent", "--set"):
            out.append(arg)
            continue
        value = inline if eq else next(it, None)
        if value is None:
            raise SettingsError(
                f"{flag} needs a value"
                + (": an agent file or package.module:callable" if flag == "--agent" else ": NAME=VALUE")
            )
        if flag == "--agent":
            options["agent"] = value
            continue
        name, eq, option = value.partition("=")
        if not eq or not name:
            raise SettingsError(f"--set {value}: expected NAME=VALUE (an option of worker/settings.py)")
        options[name.strip().lower().replace("-", "_")] = option
    return out, options


# --- per call -------------------------------------------------------------------------------------------

_HTTP = HttpToolRuntime()  # one connection pool per process for every call's HTTP tools


def call_tools(
    settings: Settings,
    phone: bool,
    runtime: HttpToolRuntime | None = None,
    on_transferred: Callable[[], None] | None = None,
) -> list[llm.Tool]:
    """One call's tools. With an agent file: its HTTP tools always, and for SIP callers exactly the phone
    built-ins it lists. Without one: the phone defaults (end_call, transfer when targets are set).
    `on_transferred` is told when a transfer went through."""
    spec = served_spec(settings)
    transfer = spec.builtin("transfer") if spec is not None else None
    opts = TelephonyToolOptions(
        goodbye=settings.sip_goodbye,
        transfer_targets=settings.sip_transfer_targets,
        play_dialtone=settings.sip_transfer_dialtone,
        on_transferred=on_transferred,
        **({"transfer_message": transfer.message, "transfer_failed": transfer.failure} if transfer else {}),
    )
    if spec is None:
        return list(telephony_tools(opts)) if phone else []
    rt = runtime or _HTTP
    rt.env_prefix = settings.tool_env_prefix
    tools: list[llm.Tool] = list(http_tools(spec.http_tools, rt))
    if not phone:
        return tools
    if spec.builtin("end_call") is not None:
        tools.append(end_call_tool(opts))
    if transfer is not None and (tool := transfer_call_tool(opts)) is not None:
        tools.append(tool)
    if spec.builtin("dtmf") is not None:
        tools.append(send_dtmf_tool())
    return tools


def make_agent(settings: Settings, options: AgentOptions, tools: Sequence[llm.Tool]) -> ParleyAgent:
    """One call's agent: Parley's, around the developer's own when PARLEY_AGENT (or the file's `entry`)
    names one. A flow (the file's, or one the developer's agent declares) calls the file's HTTP tools
    through a pool of this call's own, closed with it."""
    served = served_agent_for(settings.agent)
    spec = served.spec if served is not None else None
    try:
        own = make_user_agent(served.entry) if served is not None and served.entry else None
        if spec is None or (spec.flow is None and getattr(own, "flow", None) is None):
            return ParleyAgent(options, own, tools=tools)
        runtime = HttpToolRuntime(env_prefix=settings.tool_env_prefix)
        return make_flow_agent(spec.flow, spec.timezone, spec.http_tools, runtime, options, tools, own)
    except ValueError as e:  # AgentEntryError, or an agent Parley cannot serve
        raise SettingsError(f"PARLEY_AGENT: {e}") from None


# --- phrase cache ---------------------------------------------------------------------------------------


def agent_phrases(spec: AgentSpec) -> list[Phrase]:
    """Every phrase this agent says often enough to pre-synthesise (see AgentSpec.phrase_lines)."""
    phrase_set = load_phrases()
    defaults: dict[str, tuple[str, ...]] = {}
    if spec.language in phrase_set.defaults:
        defaults = {str(k): v for k, v in phrase_set.defaults[spec.language].items()}
    out: list[Phrase] = []
    for kind, lines in spec.phrase_lines(defaults).items():
        kind_: PhraseKind = kind  # type: ignore[assignment]
        out.extend(Phrase(text=t, kind=kind_, language=spec.language) for t in lines)
    return out


def agent_cache_dir(root: Path, spec: AgentSpec) -> Path:
    """Each agent's phrases live apart: a build prunes what its own agent no longer says, nothing else."""
    return Path(root) / "agents" / spec.name


def cache_report(
    cache: PhraseCache | None, phrases: Sequence[Phrase], voice: str
) -> tuple[list[str], list[str]]:
    """(missing, stale): the agent's phrases the cache lacks, and cached lines the agent no longer says."""
    if cache is None:
        return [p.text for p in phrases], []
    missing = [p.text for p in phrases if not cache.contains(p.text, voice, p.language)]
    wanted = {normalise_text(p.text) for p in phrases}
    languages = {p.language for p in phrases}
    stale = [t for lang in languages for t in cache.texts(voice, lang) if normalise_text(t) not in wanted]
    return missing, stale
