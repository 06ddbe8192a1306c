"""Every Parley setting, in one typed model read from the environment and `.env`.

Variables are prefixed `PARLEY_`; the three LiveKit ones also accept LiveKit's own names
(`LIVEKIT_URL`, `LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET`) so existing deployments work unchanged.
A bad value stops startup with one line naming the variable (see `load_settings`).
"""

from __future__ import annotations

import functools
import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
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


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SettingsError(SystemExit):
    """Raised (as a clean exit) when settings are invalid; the message is one line for the operator."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PARLEY_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    # LiveKit
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
    agent_name: str = "parley"
    agent: str = ""  # the agent to serve: an agent file (YAML) or package.module:callable; empty = built-in
    # HTTP tool headers may read only environment variables with this prefix (never LIVEKIT_API_SECRET)
    tool_env_prefix: str = Field("PARLEY_TOOL_", pattern=r"^[A-Z_][A-Z0-9_]{2,}$")
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
    llm_embedded_ctx: int = Field(4096, ge=512)
    llm_embedded_threads: int = Field(0, ge=0)  # 0 = auto (worker/llm_server.py: auto_threads)
    llm_embedded_batch_threads: int = Field(0, ge=0)  # prompt reading; 0 = auto (auto_batch_threads)
    llm_prompt_warm: bool = True  # embedded LLM: read the caller's interim words into its cache early
    llm_embedded_log: str = ""  # a file for llama.cpp's own log (per-request prompt/eval timings)
    context_recent_turns: int = Field(24, ge=1)
    context_max_chars: int = Field(8000, ge=500)
    # a reply the caller cut short within this many words was a cut-in at a pause: the LLM gets the caller's
    # words before and after it as one turn (worker/context.py join_cut_in); 0 = as livekit-agents keeps them
    context_join_cut_in_words: int = Field(3, ge=0, le=40)

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
    stt_partial_interval_s: float = Field(0.3, gt=0)  # new audio between partials until one has words
    input_frame_ms: int = Field(20, ge=10, le=100)  # room audio handed to VAD/STT in frames this long
    stt_final_beam_size: int = Field(1, ge=1)  # beam for the settle/final decode
    stt_settle_s: float = Field(0.064, gt=0)  # gate silence that starts the whole-utterance decode
    # a caller's words this soon after their last FINAL continue the turn: decoded again with the turn's
    # earlier audio as one, the whole turn replaces the earlier FINALs (0 = every fragment decoded alone)
    stt_whole_turn_gap_s: float = Field(3.0, ge=0, le=10)
    # style prompt in front of every decode: None = the language's default (English: the fillers and
    # backchannels Whisper should write out, `ENGLISH_STYLE_PROMPT`; others: none); "" = none
    stt_prompt: str | None = Field(None, max_length=200)
    # the business's own words, comma-separated ("Okonkwo, Invisalign, Harrowgate"): after the style prompt
    # in every decode's prompt, so Whisper spells them as listed (plugins/whisper/vocabulary.py); an agent
    # file's `vocabulary` list is added to these
    stt_vocabulary: str = ""
    # how the voices say the business's own words, 'Nguyen=win; Okonkwo=oh-konk-woh' (plugins/pronunciation):
    # each listed word is read as its respelling; transcripts keep the written word. An agent file's
    # `pronunciations` are added to these (the file's wins for a word in both)
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
    # a frozen engine mid-reply: pinged after this much silence, given up on (rest of the reply in the CPU
    # voice) when the ping goes unanswered, or when owed audio does not come (plugins/orpheus/tts.py)
    engine_silence_timeout_s: float = Field(0.5, gt=0)
    engine_ping_timeout_s: float = Field(0.4, gt=0)
    engine_audio_timeout_s: float = Field(3.0, gt=0)
    engine_connect_timeout_s: float = Field(1.0, gt=0)
    engine_pool_size: int = Field(1, ge=1)  # pooled engine connections per job process
    engine_unreachable_load: float = Field(
        1.0, ge=0.0, le=1.0
    )  # load reported when the engine cannot be asked
    tts_fallback_probe_s: float = Field(0.5, gt=0)  # how often a fallen-back chain checks the engine again

    # Orpheus weights for `download-files` (the engine's own PARLEY_ORPHEUS_* flags live in
    # plugins/orpheus/settings.py: the engine image carries no worker code)
    orpheus_repo: str = "canopylabs/orpheus-3b-0.1-ft"  # gated: accept the licence and set HF_TOKEN
    snac_repo: str = "hubertsiuzdak/snac_24khz"
    orpheus_revision: str = ""
    model_cache_dir: str = ""  # empty = huggingface_hub's cache

    # Phrase cache
    phrase_cache_dir: Path = Path("out/phrase-cache")
    filler_threshold_ms: int = Field(600, ge=0)
    fillers_enabled: bool = True  # a short cached acknowledgement when the reply is late
    filler_predict: bool = True  # play at once when recent replies were late
    filler_no_repeat_turns: int = Field(4, ge=0)
    filler_min_turn_gap: int = Field(1, ge=0)  # 1 = never fillers in consecutive turns
    filler_hold_gap_ms: int = Field(2500, ge=0)  # silence before a tool-wait hold line

    # Turn taking
    turn_profile: Literal["auto", "web", "telephony"] = "auto"
    turn_delay_scale: float = Field(1.0, ge=0.25, le=4.0)  # >1 waits longer before answering, <1 snappier
    turn_ignore_backchannels: bool = True  # "mm-hmm", "yeah", "okay" over the agent do not interrupt it
    turn_use_audio_model: bool = True  # blend in LiveKit's bundled v1-mini audio end-of-turn model
    turn_use_lm: bool = True  # blend in the language model's end-of-sentence score (turn_detection/lm_eot.py)
    eot_lm_url: str = ""  # llama.cpp-compatible server for that score; empty = the embedded LLM when it runs
    turn_lm_agent_line: bool = True  # the score reads the caller's words after the agent's last line
    turn_lm_read_interims: bool = True  # score interim transcripts too, not only preflight and final ones

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
    sip_transfer_targets: dict[str, str] = Field(default_factory=dict)  # JSON: spoken name -> tel:/sip: URI
    sip_transfer_dialtone: bool = False
    dtmf_timeout_s: float = Field(3.0, gt=0)
    dtmf_max_digits: int = Field(16, ge=1)
    # Outbound calls (worker/outbound.py): the job metadata names the number
    sip_outbound_trunk: str = ""  # the outbound trunk's id when the request names none
    outbound_greeting: str = ""  # said to a person who answers; empty = the language's built-in one
    voicemail_message: str = ""  # left on an answering machine after its beep; empty = hang up, say nothing

    # Worker
    # prewarmed job processes kept waiting; None = max_calls, so a burst of calls never starts one cold while
    # others speak (one costs ~17 MB of its own memory and 0.05 CPU-s: benchmarks/job_footprint.py)
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
    drain_timeout_s: int = Field(
        900, ge=0
    )  # SIGTERM lets running calls finish this long (k8s grace = this + 60)
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
        if self.livekit_api_secret.get_secret_value() == DEV_API_SECRET and not _is_loopback(host):
            raise ValueError(
                "PARLEY_LIVEKIT_API_SECRET: the built-in development secret only works with a loopback "
                f"LIVEKIT_URL (got host {host!r}); set LIVEKIT_API_KEY and LIVEKIT_API_SECRET"
            )
        if self.tts_backend == "orpheus" and not self.engine_address:
            raise ValueError("PARLEY_ENGINE_ADDRESS: required when PARLEY_TTS_BACKEND=orpheus")
        if self.tts_voice not in ORPHEUS_VOICES and self.language == "en":
            raise ValueError(
                f"PARLEY_TTS_VOICE: unknown voice {self.tts_voice!r}; one of {', '.join(ORPHEUS_VOICES)}"
            )
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


def _env_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else ""
    return f"PARLEY_{field.upper()}" if field else "settings"


def format_error(err: ValidationError) -> str:
    """One line per problem, naming the environment variable the operator must fix."""
    parts = []
    for e in err.errors():
        msg = str(e.get("msg", "invalid"))
        msg = msg.removeprefix("Value error, ")
        if msg.startswith("PARLEY_"):
            parts.append(msg)
        else:
            parts.append(f"{_env_name(tuple(e.get('loc', ())))}: {msg}")
    return "invalid setting: " + "; ".join(parts)


def load_settings(**overrides: object) -> Settings:
    """Build settings or exit with one clear line (never a traceback)."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as err:
        raise SettingsError(format_error(err)) from None


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
