"""Parley's configuration: a few deployment variables from the environment, every other setting an option.

The environment (and `.env`) carries only `DEPLOYMENT_VARIABLES` (LiveKit, LLM, engines, limits, privacy,
observability, paths; README "Configuration"); an unknown `PARLEY_*` variable stops start-up with one line
naming it. Everything else is a field of `Settings` with its default: an agent file sets the ones a user sets
per agent (worker/agent_file), code and `worker.py --set NAME=VALUE` the rest. A bad value stops start-up
with one line naming the variable or option (see `load_settings`).
"""

from __future__ import annotations

import difflib
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from plugins.pronunciation import Pronunciations

Language = Literal["en", "ko"]
TtsBackend = Literal["auto", "orpheus", "cpu"]

ORPHEUS_VOICES = ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")
# Whisper writes what it hears in its prompt's style: with fillers and backchannels in front, it keeps "um",
# "uh" and "mm-hmm" instead of dropping or mishearing them ("Mm-hmm" read as "Mama"), and the end-of-turn
# policy sees a hesitation as one (benchmarks/RESULTS.md, "End of turn": test split, with and without)
ENGLISH_STYLE_PROMPT = "Um, uh, mm-hmm, uh-huh."
DEV_API_SECRET = "secret"  # livekit-server --dev's secret: fine on this machine, never beyond it


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SettingsError(SystemExit):
    """Raised (as a clean exit) when settings are invalid; the message is one line for the operator."""


# --- deployment: the only settings read from the environment (README, "Configuration") ------------------

DEPLOYMENT_VARIABLES: dict[str, str] = {
    "LIVEKIT_URL": "livekit_url",
    "LIVEKIT_API_KEY": "livekit_api_key",
    "LIVEKIT_API_SECRET": "livekit_api_secret",
    "PARLEY_AGENT": "agent",
    "PARLEY_AGENT_NAME": "agent_name",
    "PARLEY_LANGUAGE": "language",
    "PARLEY_LLM_BASE_URL": "llm_base_url",
    "PARLEY_LLM_API_KEY": "llm_api_key",
    "PARLEY_LLM_MODEL": "llm_model",
    "PARLEY_ENGINE_ADDRESS": "engine_address",
    "PARLEY_ENGINE_SECRET": "engine_secret",
    "PARLEY_STT_ENGINE_ADDRESS": "stt_engine_address",
    "PARLEY_STT_ENGINE_SECRET": "stt_engine_secret",
    "PARLEY_STT_MODEL": "stt_model",
    "PARLEY_STT_DEVICE": "stt_device",
    "PARLEY_STT_BACKEND": "stt_backend",
    "PARLEY_TTS_BACKEND": "tts_backend",
    "PARLEY_MAX_CALLS": "max_calls",
    "PARLEY_LOAD_THRESHOLD": "load_threshold",
    "PARLEY_DRAIN_TIMEOUT_S": "drain_timeout_s",
    "PARLEY_SIP_OUTBOUND_TRUNK": "sip_outbound_trunk",
    "PARLEY_LOG_LEVEL": "log_level",
    "PARLEY_LOG_TRANSCRIPTS": "log_transcripts",
    "PARLEY_LOG_ROOM_NAMES": "log_room_names",
    "PARLEY_RECORD_AUDIO": "record_audio",
    "PARLEY_CALL_REPORT_URL": "call_report_url",
    "PARLEY_CALL_REPORT_SECRET": "call_report_secret",
    "PARLEY_HTTP_PORT": "http_port",
    "PARLEY_PROMETHEUS_PORT": "prometheus_port",
    "PARLEY_MODEL_CACHE_DIR": "model_cache_dir",
}
"""Every variable the worker reads, and its field. LiveKit's three also answer to `PARLEY_LIVEKIT_*`."""

ENGINE_VARIABLES = (
    "PARLEY_ORPHEUS_BACKEND",
    "PARLEY_ORPHEUS_DEVICE",
    "PARLEY_ENGINE_MAX_STREAMS",
    "PARLEY_ENGINE_HTTP_PORT",
    "PARLEY_ENGINE_KEY",
)
"""Read by the TTS engine image (plugins/orpheus/settings.py, deploy/engine-entrypoint.sh), beside the shared
PARLEY_ENGINE_ADDRESS, PARLEY_ENGINE_SECRET, PARLEY_MODEL_CACHE_DIR and PARLEY_LANGUAGE."""

OTHER_VARIABLES = ("PARLEY_WEB_KEY", "PARLEY_ENGINE_SECRET_FILE", "PARLEY_ENGINE_BUILD_COMMAND")
"""Read by the demo web page (web/server.py) and the engine image's health check and build step."""

TOOLING_VARIABLES = (
    "PARLEY_TEST_AUDIO",
    "PARLEY_TEST_LOAD_FILE",
    "PARLEY_E2E_FIGURES",
    "PARLEY_DEV_LIVEKIT_PORT",
    "PARLEY_DEV_WEB_PORT",
    "PARLEY_SMART_TURN_ONNX",
)
"""Read by tests, benchmarks and scripts/dev.sh, never by the worker: known, so a shell that sets them for a
test still starts a worker."""

TOOL_ENV_PREFIX = "PARLEY_TOOL_"
"""An agent file's HTTP tool headers may read environment variables with this prefix (and no others)."""

_LIVEKIT_ALIASES = {f"PARLEY_{n}": n for n in ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")}
KNOWN_VARIABLES = frozenset(
    [*DEPLOYMENT_VARIABLES, *_LIVEKIT_ALIASES, *ENGINE_VARIABLES, *OTHER_VARIABLES, *TOOLING_VARIABLES]
)

# what became of a variable the worker no longer reads (release notes, 2026-12-07, issue 62)
_AGENT_FILE_FIELDS = {
    "tts_voice": "voice",
    "cpu_voice": "cpu_voice",
    "llm_temperature": "llm.temperature",
    "llm_max_tokens": "llm.max_tokens",
    "llm_max_sentences": "llm.max_sentences",
    "llm_max_words": "llm.max_words",
    "turn_profile": "turn.profile",
    "turn_delay_scale": "turn.patience",
    "call_report_transcript": "report.transcript",
    "outbound_greeting": "outbound.greeting",
    "voicemail_message": "outbound.voicemail",
    "stt_vocabulary": "vocabulary",
    "tts_pronunciations": "pronunciations",
    "sip_goodbye": "tools: end_call goodbye",
    "sip_transfer_targets": "tools: transfer targets",
}
_RENAMED = {
    "PARLEY_ORPHEUS_MAX_STREAMS": "PARLEY_ENGINE_MAX_STREAMS",
    "PARLEY_ORPHEUS_HTTP_PORT": "PARLEY_ENGINE_HTTP_PORT",
    "PARLEY_ENGINE_SOCKET": "PARLEY_ENGINE_ADDRESS (unix:///path.sock)",
    "PARLEY_MODEL_CACHE": "PARLEY_MODEL_CACHE_DIR",
}


def _unknown_line(name: str) -> str:
    if name in _RENAMED:
        return f"unknown variable {name}: renamed {_RENAMED[name]}"
    field = name.removeprefix("PARLEY_").lower()
    if field in _AGENT_FILE_FIELDS:
        return f"unknown variable {name}: set `{_AGENT_FILE_FIELDS[field]}` in the agent file instead"
    if field in Settings.model_fields:
        return f"unknown variable {name}: not a deployment variable; the option `{field}` (--set {field}=…)"
    close = difflib.get_close_matches(name, sorted(KNOWN_VARIABLES), n=1, cutoff=0.75)
    return f"unknown variable {name}" + (f" (did you mean {close[0]}?)" if close else "")


def check_environment(environ: Mapping[str, str] | None = None, env_file: str | Path | None = ".env") -> None:
    """Stop with one line naming the first `PARLEY_*` variable (environment or `.env`) nobody reads: a
    misspelt or retired name must not pass silently."""
    names = {n for n in (os.environ if environ is None else environ) if n.startswith("PARLEY_")}
    if env_file is not None and Path(env_file).is_file():
        from dotenv import dotenv_values

        names |= {n for n in dotenv_values(env_file) if n.startswith("PARLEY_")}
    unknown = sorted(n for n in names if n not in KNOWN_VARIABLES and not n.startswith(TOOL_ENV_PREFIX))
    if unknown:
        raise SettingsError(_unknown_line(unknown[0]))


class Deployment(BaseSettings):
    """The deployment variables, read from the environment and `.env`, and nothing else."""

    model_config = SettingsConfigDict(
        env_prefix="PARLEY_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    livekit_url: str = Field(
        "ws://127.0.0.1:7880", validation_alias=AliasChoices("PARLEY_LIVEKIT_URL", "LIVEKIT_URL")
    )
    livekit_api_key: str = Field(
        "devkey", validation_alias=AliasChoices("PARLEY_LIVEKIT_API_KEY", "LIVEKIT_API_KEY")
    )
    livekit_api_secret: SecretStr = Field(
        SecretStr(DEV_API_SECRET),
        validation_alias=AliasChoices("PARLEY_LIVEKIT_API_SECRET", "LIVEKIT_API_SECRET"),
    )
    agent: str = ""
    agent_name: str = "parley"
    language: Language = "en"
    llm_base_url: str = ""
    llm_api_key: SecretStr = SecretStr("not-needed")
    llm_model: str = "smollm2-135m"
    engine_address: str = ""
    engine_secret: SecretStr = SecretStr("")
    stt_engine_address: str = ""
    stt_engine_secret: SecretStr = SecretStr("")
    stt_model: str | None = None
    stt_device: Literal["cpu", "cuda", "auto"] = "cpu"
    stt_backend: Literal["ctranslate2", "torch", "auto"] = "ctranslate2"
    tts_backend: TtsBackend = "auto"
    max_calls: int = 4
    load_threshold: float = 0.8
    drain_timeout_s: int = 900
    sip_outbound_trunk: str = ""
    log_level: str = "INFO"
    log_transcripts: bool = False
    log_room_names: bool = False
    record_audio: bool = False
    call_report_url: str = ""
    call_report_secret: SecretStr = SecretStr("")
    http_port: int = 0
    prometheus_port: int = 0
    model_cache_dir: str = ""


class Settings(BaseModel):
    """What the worker runs with: the deployment variables, the agent file's choices on top, and every other
    setting an option with its default (set in code, by `worker.py --set NAME=VALUE`, never the environment).
    Built once by the composition root (`load_settings`, then worker/agent_file `effective_settings`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # LiveKit (deployment)
    livekit_url: str = "ws://127.0.0.1:7880"
    livekit_api_key: str = "devkey"
    livekit_api_secret: SecretStr = SecretStr(DEV_API_SECRET)
    agent_name: str = "parley"
    agent: str = ""  # the agent to serve: an agent file (YAML) or package.module:callable; empty = built-in
    # HTTP tool headers may read only environment variables with this prefix (never LIVEKIT_API_SECRET)
    tool_env_prefix: str = Field(TOOL_ENV_PREFIX, pattern=r"^PARLEY_TOOL_[A-Z0-9_]*$")
    language: Language = "en"

    # LLM (any OpenAI-compatible chat endpoint). Empty base URL = embedded SmolLM2 server.
    llm_base_url: str = ""
    llm_model: str = "smollm2-135m"
    llm_api_key: SecretStr = SecretStr("not-needed")
    llm_temperature: float = Field(0.6, ge=0.0, le=2.0)
    llm_max_tokens: int = Field(96, ge=8, le=4096)
    llm_max_sentences: int = Field(3, ge=1, le=20)
    llm_max_words: int = Field(45, ge=5, le=1000)  # a spoken reply ends here even without a full stop
    llm_timeout_s: float = Field(8.0, gt=0)
    llm_embedded_port: int = Field(0, ge=0, le=65535)  # 0 = pick a free port
    llm_embedded_threads: int = Field(0, ge=0)  # 0 = auto (worker/llm_server.py: auto_threads)
    llm_embedded_batch_threads: int = Field(0, ge=0)  # prompt reading; 0 = auto (auto_batch_threads)
    llm_embedded_log: str = ""  # a file for llama.cpp's own log (per-request prompt/eval timings)
    context_recent_turns: int = Field(24, ge=1)
    context_max_chars: int = Field(8000, ge=500)

    # STT (faster-whisper)
    # tiny.en (English only) or base (multilingual), both offline from Python packages; a local CTranslate2
    # dir; or a name fetched by download-files. None = the language's default (`effective_stt_model`)
    stt_model: str | None = None
    stt_device: Literal["cpu", "cuda", "auto"] = "cpu"
    stt_compute_type: str = "default"  # default = int8 on CPU, float16 on CUDA
    stt_backend: Literal["ctranslate2", "torch", "auto"] = "ctranslate2"
    """The host speech engine's runtime: torch for a CUDA 13 GPU host (CTranslate2's wheel needs CUDA 12)."""
    stt_cpu_threads: int = Field(0, ge=0)  # threads per decode; 0 = auto (plugins/whisper/model.py)
    stt_num_workers: int = Field(2, ge=1)  # decodes that may run at once (different calls)
    # style prompt in front of every decode: None = the language's default (English: the fillers and
    # backchannels Whisper should write out, `ENGLISH_STYLE_PROMPT`; others: none); "" = none
    stt_prompt: str | None = Field(None, max_length=200)
    # the business's own words, comma-separated ("Okonkwo, Invisalign, Harrowgate"): after the style prompt
    # in every decode's prompt, so Whisper spells them as listed (plugins/whisper/vocabulary.py); an agent
    # file's `vocabulary` list sets them
    stt_vocabulary: str = ""
    # how the voices say the business's own words, 'Nguyen=win; Okonkwo=oh-konk-woh' (plugins/pronunciation):
    # each listed word is read as its respelling; transcripts keep the written word. An agent file's
    # `pronunciations` set them
    tts_pronunciations: str = ""
    stt_language: Literal["en", "ko", "auto"] | None = None  # None = follow `language`
    # host = one speech engine per host serves every job process (worker/speech_engine.py); process = each
    # job process loads its own Whisper (the offline harness and tests without a worker)
    stt_engine: Literal["host", "process"] = "host"
    stt_engine_address: str = ""  # unix:///path.sock of a running engine; empty = the worker starts one
    stt_engine_secret: SecretStr = SecretStr("")
    stt_engine_max_batch: int = Field(16, ge=1)  # decodes in one batched encode + generate
    stt_engine_wait_s: float = Field(8.0, gt=0)  # a final decode waits this long for a restarting engine
    stt_engine_log: str = ""  # a file for the engine's own log; empty = the worker's stderr

    # TTS
    tts_backend: TtsBackend = "auto"  # auto = Orpheus engine when reachable, else the CPU voice
    tts_voice: str = "tara"
    cpu_voice: str = "heart"
    # voice the preemptive reply's first words before the turn is committed, so its audio is ready when the
    # end of turn comes (thrown away with the reply when the caller goes on). None = on for the CPU voice
    # (its synthesis is ~2 % of real time); off with the GPU engine, where a thrown-away start holds a stream
    preemptive_tts: bool | None = None
    engine_address: str = ""  # unix:///path.sock or ws://127.0.0.1:PORT; empty = no engine
    engine_secret: SecretStr = SecretStr("")
    engine_connect_timeout_s: float = Field(1.0, gt=0)

    # Orpheus weights for `download-files` (the engine's own flags live in plugins/orpheus/settings.py: the
    # engine image carries no worker code)
    orpheus_repo: str = "canopylabs/orpheus-3b-0.1-ft"  # gated: accept the licence and set HF_TOKEN
    snac_repo: str = "hubertsiuzdak/snac_24khz"
    orpheus_revision: str = ""
    model_cache_dir: str = ""  # empty = huggingface_hub's cache

    # Phrase cache
    phrase_cache_dir: Path = Path("out/phrase-cache")
    filler_threshold_ms: int = Field(600, ge=0)
    fillers_enabled: bool = True  # a short cached acknowledgement when the reply is late
    filler_no_repeat_turns: int = Field(4, ge=0)
    filler_hold_gap_ms: int = Field(2500, ge=0)  # silence before a tool-wait hold line

    # Turn taking
    turn_profile: Literal["auto", "web", "telephony"] = "auto"
    turn_patience: float = Field(1.0, ge=0.25, le=4.0)  # >1 waits longer before answering, <1 snappier
    turn_ignore_backchannels: bool = True  # "mm-hmm", "yeah", "okay" over the agent do not interrupt it
    turn_use_audio_model: bool = True  # blend in LiveKit's bundled v1-mini audio end-of-turn model
    turn_use_lm: bool = True  # blend in the language model's end-of-sentence score (turn_detection/lm_eot.py)
    eot_lm_url: str = ""  # llama.cpp-compatible server for that score; empty = the embedded LLM when it runs

    # Silent callers and long calls (worker/idle_caller.py): a line left open must not hold a call slot
    idle_reprompt_s: float = Field(15.0, ge=0)  # both sides silent this long: "are you still there?"; 0 = off
    idle_reprompts: int = Field(2, ge=0)  # asked this many times with no answer, then goodbye and hang-up
    max_call_s: float = Field(3600.0, ge=0)  # the call ends after the agent's current line; 0 = no limit

    # The end-of-call report (worker/call_report.py): one JSON document per call, POSTed when it ends
    call_report_url: str = ""  # empty = no report
    call_report_secret: SecretStr = SecretStr("")  # signs each report (X-Parley-Signature); empty = unsigned
    call_report_transcript: bool = False  # the report carries the words, the room's name, a caller's number

    # Telephony (LiveKit SIP)
    sip_goodbye: str = "Thank you for calling. Goodbye!"
    sip_transfer_targets: dict[str, str] = Field(default_factory=dict)  # spoken name -> tel:/sip: URI
    sip_transfer_dialtone: bool = False
    dtmf_timeout_s: float = Field(3.0, gt=0)
    dtmf_max_digits: int = Field(16, ge=1)
    # Outbound calls (worker/outbound.py): the job metadata names the number
    sip_outbound_trunk: str = ""  # the outbound trunk's id when the request names none
    outbound_greeting: str = ""  # said to a person who answers; empty = the language's built-in one
    voicemail_message: str = ""  # left on an answering machine after its beep; empty = hang up, say nothing

    # Worker
    # prewarmed job processes kept waiting; None = max_calls, so a burst of calls never starts one cold while
    # others speak (one costs ~17 MB of its own memory and 0.05 CPU-s)
    num_idle_processes: int | None = Field(None, ge=0)
    # TTS engine fill (or host CPU, with load_signal calls+cpu) at which the host is full
    load_threshold: float = Field(0.8, gt=0.0, le=1.0)
    max_calls: int = Field(4, ge=1)  # calls per host at which the worker reports itself full
    # livekit-server's `agents.target_load`: it dispatches no job to a worker reporting this load or more
    livekit_target_load: float = Field(0.7, gt=0.0, le=1.0)
    load_signal: Literal["calls", "calls+cpu"] = "calls"  # add host CPU to the load LiveKit sees
    delete_room_on_hangup: bool = True  # a call's room (and job slot) ends when its caller hangs up
    room_metrics: bool = True  # publish per-turn latency to the room (the web page shows it)
    http_port: int = Field(0, ge=0, le=65535)
    drain_timeout_s: int = Field(900, ge=0)  # SIGTERM lets running calls finish this long (k8s grace + 60)
    prometheus_port: int = Field(0, ge=0, le=65535)  # 0 = off; exports lk_agents_worker_load for autoscaling
    # the wiring the worker serves: Parley's, or the same models wired as LiveKit Agents' defaults (stock)
    # or as an informed user would tune them (stock-tuned); the benchmarks compare them in the same room
    pipeline: Literal["parley", "stock", "stock-tuned"] = "parley"

    # Logging and privacy
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_transcripts: bool = False
    log_room_names: bool = False  # room names/identities carry SIP callers' numbers: hashed unless true
    record_audio: bool = False

    @field_validator("livekit_url")
    @classmethod
    def _ws_url(cls, v: str) -> str:
        if not v.startswith(("ws://", "wss://", "http://", "https://")):
            raise ValueError(f"must start with ws://, wss://, http:// or https:// (got {v!r})")
        return v

    @field_validator("llm_base_url", "eot_lm_url", "call_report_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"must be empty or start with http:// or https:// (got {v!r})")
        return v.rstrip("/")

    @field_validator("engine_address")
    @classmethod
    def _engine_addr(cls, v: str) -> str:
        if v and not v.startswith(("unix://", "ws://", "wss://")):
            raise ValueError(f"must be empty, unix:///path.sock or ws://host:port (got {v!r})")
        return v

    @field_validator("stt_vocabulary")
    @classmethod
    def _vocabulary(cls, v: str) -> str:
        from plugins.whisper.vocabulary import parse_vocabulary

        return ", ".join(parse_vocabulary(v))

    @field_validator("tts_pronunciations")
    @classmethod
    def _pronunciations(cls, v: str) -> str:
        from plugins.pronunciation import format_pronunciations, parse_pronunciations

        return format_pronunciations(parse_pronunciations(v))

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        host = urlsplit(self.livekit_url).hostname or ""
        if self.livekit_api_secret.get_secret_value() == DEV_API_SECRET and not is_loopback(host):
            raise ValueError(
                "PARLEY_LIVEKIT_API_SECRET: the built-in development secret only works with a loopback "
                f"LIVEKIT_URL (got host {host!r}); set LIVEKIT_API_KEY and LIVEKIT_API_SECRET"
            )
        if self.tts_backend == "orpheus" and not self.engine_address:
            raise ValueError("PARLEY_ENGINE_ADDRESS: required when PARLEY_TTS_BACKEND=orpheus")
        if self.tts_voice not in ORPHEUS_VOICES and self.language == "en":
            raise ValueError(f"voice: unknown voice {self.tts_voice!r}; one of {', '.join(ORPHEUS_VOICES)}")
        return self

    @property
    def effective_stt_language(self) -> str:
        return self.stt_language or self.language

    @property
    def effective_stt_model(self) -> str:
        """The model set, else tiny.en for English and the multilingual base for any other language: an
        agent whose file says `language: ko` must not get an English-only model by default."""
        from plugins.whisper.weights import default_model

        return self.stt_model or default_model(self.effective_stt_language)

    @property
    def effective_cpu_voice(self) -> str:
        """hibari speaks English only: an agent in another language gets espeak-ng's voice for it unless an
        espeak voice is set (a hibari name there would read Hangul as silence)."""
        from plugins.cpu_voice.espeak import is_espeak_voice

        if self.language == "en" or is_espeak_voice(self.cpu_voice):
            return self.cpu_voice
        return f"espeak-{self.language}"

    @property
    def effective_stt_prompt(self) -> str:
        if self.stt_prompt is not None:
            return self.stt_prompt
        return ENGLISH_STYLE_PROMPT if self.effective_stt_language == "en" else ""

    @property
    def stt_vocabulary_terms(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.stt_vocabulary.split(",") if t.strip())

    @property
    def tts_pronunciation_list(self) -> Pronunciations:
        from plugins.pronunciation import parse_pronunciations

        return parse_pronunciations(self.tts_pronunciations)

    @property
    def idle_processes(self) -> int:
        return self.max_calls if self.num_idle_processes is None else self.num_idle_processes


_ENV_NAME = {field: name for name, field in DEPLOYMENT_VARIABLES.items()}


def _env_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else ""
    if not field:
        return "settings"
    return _ENV_NAME.get(field, f"option {field}")


def format_error(err: ValidationError) -> str:
    """One line per problem, naming the environment variable (or option) the operator must fix."""
    parts = []
    for e in err.errors():
        msg = str(e.get("msg", "invalid"))
        msg = msg.removeprefix("Value error, ")
        if e.get("type") == "extra_forbidden":
            field = str(e["loc"][0]) if e.get("loc") else ""
            close = difflib.get_close_matches(field, list(Settings.model_fields), n=1, cutoff=0.75)
            parts.append(f"unknown option {field}" + (f" (did you mean {close[0]}?)" if close else ""))
        elif msg.startswith("PARLEY_"):
            parts.append(msg)
        else:
            parts.append(f"{_env_name(tuple(e.get('loc', ())))}: {msg}")
    return "invalid setting: " + "; ".join(parts)


def load_settings(**options: object) -> Settings:
    """The deployment variables from the environment (an unknown `PARLEY_*` one refused), with `options` on
    top; exits with one clear line (never a traceback)."""
    check_environment()
    try:
        deployed = Deployment().model_dump(exclude_unset=True)  # type: ignore[call-arg]  # from the env
        return Settings(**{**deployed, **options})
    except ValidationError as err:
        raise SettingsError(format_error(err)) from None


_current: Settings | None = None


def use_settings(settings: Settings | None) -> None:
    """Make `settings` this process's own (the worker's composition root, and each job process from the
    settings its entrypoint was handed); None = read them again on the next `get_settings`."""
    global _current
    _current = settings


def get_settings() -> Settings:
    """This process's settings: the ones `use_settings` set, else the environment's with the defaults."""
    global _current
    if _current is None:
        _current = load_settings()
    return _current
