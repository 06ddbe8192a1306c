"""The agent file: one YAML document validated into one typed model (`AgentSpec`).

A bad file stops with ONE line, `agent file X: field.path: what is wrong`, never a traceback. Text fields may
use `{{variable}}` placeholders filled from `variables` (business name, hours, ...); an unknown placeholder is
an error, so a typo never reaches a caller. Header values of HTTP tools name environment variables only
(`${PARLEY_TOOL_BOOKING_TOKEN}`, only names with the PARLEY_TOOL_ prefix): a secret never lives in the
file and is read only when the call is made.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from caches.phrases import KINDS

from ..flows.spec import FlowSpec, check_flow

ORPHEUS_VOICES = ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")
_NAME = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_TOOL_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_ENV_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")
DEFAULT_TOOL_ENV_PREFIX = "PARLEY_TOOL_"  # what a tool header's ${VAR} must start with
_SENTINEL_GREETING = "\0builtin"  # greeting key absent: the language's built-in greeting


class AgentFileError(ValueError):
    """The agent file cannot be used; the message is the one line the operator sees."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _http_url(v: str) -> str:
    """The one URL rule of agent files: an LLM, a tool or a report receiver is reached over HTTP(S)."""
    if not v.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return v


class LLMSpec(_Strict):
    """Per-agent overrides of the PARLEY_LLM_* settings (unset = the setting's value)."""

    base_url: str | None = None
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=8, le=4096)
    max_sentences: int | None = Field(default=None, ge=1, le=20)
    max_words: int | None = Field(default=None, ge=5, le=1000)

    @field_validator("base_url")
    @classmethod
    def _http(cls, v: str | None) -> str | None:
        return _http_url(v).rstrip("/") if v is not None else v


class TurnSpec(_Strict):
    profile: Literal["auto", "web", "telephony"] | None = None
    patience: float | None = Field(default=None, ge=0.25, le=4.0)  # >1 waits longer before answering


class ReportSpec(_Strict):
    """Where this agent's end-of-call reports go (worker/call_report.py); the secret stays in
    PARLEY_CALL_REPORT_SECRET, never in the file."""

    url: str
    transcript: bool | None = None  # the words, the room's name and a caller's number

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        return _http_url(v)


class OutboundSpec(_Strict):
    """What the agent says when it places the call (worker/outbound.py)."""

    greeting: str | None = Field(default=None, max_length=1000)  # to the person who answers
    voicemail: str | None = Field(default=None, max_length=1000)  # after an answering machine's beep


class PhrasesSpec(_Strict):
    """Lines to pre-synthesise, per kind; a kind left out keeps Parley's defaults for the language."""

    acknowledgement: list[str] | None = None
    hold: list[str] | None = None
    apology: list[str] | None = None
    goodbye: list[str] | None = None
    reprompt: list[str] | None = None  # asked a caller who has gone quiet (worker/idle_caller.py)

    @field_validator("acknowledgement", "hold", "apology", "goodbye", "reprompt")
    @classmethod
    def _lines(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or any(not s.strip() for s in v)):
            raise ValueError("must be a non-empty list of non-empty lines")
        return v


class HttpToolSpec(_Strict):
    """A webhook the LLM may call: its JSON answer goes back to the LLM."""

    type: Literal["http"] = "http"
    name: str
    description: str = Field(min_length=1)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=5.0, gt=0, le=60)
    hold_after_ms: int = Field(
        default=250, ge=0, le=30_000
    )  # a call still running after this gets the hold line
    hold: str | None = None  # None = one of the agent's hold phrases
    failure: str = "Sorry, I couldn't get that information right now."
    max_response_bytes: int = Field(default=64 * 1024, ge=1024, le=16 * 1024 * 1024)  # larger = failure

    @field_validator("name")
    @classmethod
    def _tool_name(cls, v: str) -> str:
        if not re.match(_TOOL_NAME, v):
            raise ValueError(f"{v!r} is not a tool name: letters, digits and _ only, starting with a letter")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return _http_url(v)

    @field_validator("headers")
    @classmethod
    def _env_only(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not _ENV_REF.search(value) or _ENV_REF.sub("", value).strip() not in ("", "Bearer", "Basic"):
                raise ValueError(
                    f"{key}: header values come from environment variables only, "
                    "written ${VAR} (optionally 'Bearer ${VAR}')"
                )
        return v

    @field_validator("parameters")
    @classmethod
    def _schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        if v.get("type") != "object" or not isinstance(v.get("properties", {}), dict):
            raise ValueError("must be a JSON schema with type: object and a properties mapping")
        missing = [r for r in v.get("required", []) if r not in v.get("properties", {})]
        if missing:
            raise ValueError(f"required names unknown properties: {', '.join(map(str, missing))}")
        return v

    @model_validator(mode="after")
    def _fixed_query(self) -> HttpToolSpec:
        # the LLM's GET arguments must not override the query the operator wrote into the URL
        fixed = set(parse_qs(urlsplit(self.url).query, keep_blank_values=True))
        clash = sorted(fixed & set(self.parameters.get("properties", {})))
        if clash and self.method in ("GET", "DELETE"):
            raise ValueError(f"parameter {clash[0]!r} is also fixed in the url's query")
        return self

    def env_names(self) -> list[str]:
        return sorted({m for value in self.headers.values() for m in _ENV_REF.findall(value)})


class EndCallToolSpec(_Strict):
    type: Literal["end_call"]
    goodbye: str | None = None  # None = the agent's first goodbye phrase


class TransferToolSpec(_Strict):
    type: Literal["transfer"]
    targets: dict[str, str] = Field(min_length=1)  # spoken name -> tel:/sip: URI
    message: str = "One moment, I'm transferring your call now."
    failure: str = "Sorry, I couldn't transfer the call. Is there anything else I can help with?"

    @field_validator("targets")
    @classmethod
    def _uris(cls, v: dict[str, str]) -> dict[str, str]:
        for name, uri in v.items():
            if not uri.startswith(("tel:", "sip:")):
                raise ValueError(f"{name}: target must start with tel: or sip: (got {uri!r})")
        return v


class DtmfToolSpec(_Strict):
    type: Literal["dtmf"]


ToolSpec = Annotated[
    HttpToolSpec | EndCallToolSpec | TransferToolSpec | DtmfToolSpec, Field(discriminator="type")
]


class AgentSpec(_Strict):
    """One agent: who it is, what it says, how it thinks and which tools it may call."""

    name: str  # the LiveKit dispatch name
    language: Literal["en", "ko"] = "en"
    voice: str | None = None  # Orpheus voice (the tts_voice option, tara, when unset)
    cpu_voice: str | None = None  # hibari voice or espeak-<lang> (the cpu_voice option when unset)
    entry: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
    )  # module:factory -> Agent
    variables: dict[str, str | int | float] = Field(default_factory=dict)
    instructions: str | None = None  # None = Parley's built-in speech instructions
    greeting: str | None = _SENTINEL_GREETING  # null = say nothing first
    phrases: PhrasesSpec = PhrasesSpec()
    llm: LLMSpec = LLMSpec()
    turn: TurnSpec = TurnSpec()
    report: ReportSpec | None = None  # the end-of-call report (PARLEY_CALL_REPORT_URL when unset)
    outbound: OutboundSpec = OutboundSpec()
    vocabulary: list[str] = Field(default_factory=list)  # names, brands, streets the recogniser should spell
    pronunciations: dict[str, str] = Field(default_factory=dict)  # how the voice says them: {Nguyen: win}
    tools: list[ToolSpec] = Field(default_factory=list)
    timezone: str = "UTC"  # the clinic's: today's date in every LLM request and a flow's "tomorrow"
    flow: FlowSpec | None = None  # tasks the agent finishes step by step (worker/flows); None = free talk
    source: Path | None = Field(default=None, exclude=True)  # the file it came from (set by the loader)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.match(_NAME, v):
            raise ValueError(f"{v!r} is not a dispatch name: lower-case letters, digits, - and _ only")
        return v

    @field_validator("voice")
    @classmethod
    def _voice(cls, v: str | None) -> str | None:
        if v is not None and v not in ORPHEUS_VOICES:
            raise ValueError(f"unknown Orpheus voice {v!r}; one of {', '.join(ORPHEUS_VOICES)}")
        return v

    @field_validator("vocabulary")
    @classmethod
    def _vocabulary(cls, v: list[str]) -> list[str]:
        from plugins.whisper.vocabulary import check_vocabulary

        return list(check_vocabulary(v))

    @field_validator("pronunciations")
    @classmethod
    def _pronunciations(cls, v: dict[str, str]) -> dict[str, str]:
        from plugins.pronunciation import check_pronunciations

        return dict(check_pronunciations(v).entries)

    @field_validator("cpu_voice")
    @classmethod
    def _cpu_voice(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from plugins.cpu_voice.voice import check_voice_name

        check_voice_name(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> AgentSpec:
        names = [t.name if isinstance(t, HttpToolSpec) else t.type for t in self.tools]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tools: duplicate tool {dup[0]!r}")
        if self.flow is not None:
            check_flow(self.flow, {t.name for t in self.http_tools})
        return self

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (an IANA name such as Europe/London)") from None
        return v

    # --- what the rest of Parley reads --------------------------------------------------------------
    @property
    def greeting_text(self) -> str | None:
        """The greeting to say, "" for none, None for the language's built-in greeting."""
        if self.greeting == _SENTINEL_GREETING:
            return None
        return self.greeting or ""

    @property
    def http_tools(self) -> list[HttpToolSpec]:
        return [t for t in self.tools if isinstance(t, HttpToolSpec)]

    def builtin(self, kind: str) -> Any:
        return next((t for t in self.tools if t.type == kind), None)

    def phrase_lines(self, defaults: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
        """Every line worth caching for this agent, per kind: the greeting, each kind (the file's or the
        language's defaults), tool hold and failure lines, and the built-in tools' fixed lines."""
        out: dict[str, list[str]] = {k: [] for k in KINDS}
        if self.greeting_text:
            out["greeting"].append(self.greeting_text)
        out["greeting"].extend(line for line in (self.outbound.greeting, self.outbound.voicemail) if line)
        for kind in ("acknowledgement", "hold", "apology", "goodbye", "reprompt"):
            mine = getattr(self.phrases, kind)
            out[kind].extend(mine if mine is not None else defaults.get(kind, ()))
        for tool in self.http_tools:
            if tool.hold:
                out["hold"].append(tool.hold)
            out["apology"].append(tool.failure)
        end = self.builtin("end_call")
        if end is not None and end.goodbye:
            out["goodbye"].append(end.goodbye)
        transfer = self.builtin("transfer")
        if transfer is not None:
            out["hold"].append(transfer.message)
            out["apology"].append(transfer.failure)
        return {k: list(dict.fromkeys(" ".join(s.split()) for s in v)) for k, v in out.items()}


# --- loading --------------------------------------------------------------------------------------------


def _substitute(value: Any, variables: dict[str, str], where: str) -> Any:
    """Fill {{name}} in every string of value (tool parameter schemas included)."""
    if isinstance(value, str):

        def one(m: re.Match[str]) -> str:
            if m.group(1) not in variables:
                known = ", ".join(sorted(variables)) or "none defined"
                raise AgentFileError(f"{where}: unknown variable {{{{{m.group(1)}}}}} (variables: {known})")
            return variables[m.group(1)]

        return _VAR.sub(one, value)
    if isinstance(value, list):
        return [_substitute(v, variables, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {  # keys too: a pronunciation list names the words it respells
            (_substitute(k, variables, where) if isinstance(k, str) else k): _substitute(
                v, variables, f"{where}.{k}" if where else str(k)
            )
            for k, v in value.items()
        }
    return value


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif i > 0 and loc[i - 1] != "tools" and part in ("http", "end_call", "transfer", "dtmf"):
            continue  # the discriminator tag pydantic puts in the path
        else:
            out += f".{part}" if out else str(part)
    return out or "file"


def _first_error(err: ValidationError) -> str:
    e = err.errors()[0]
    msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
    loc = tuple(e.get("loc", ()))
    if e.get("type") == "extra_forbidden":
        msg = "unknown field"
    elif e.get("type") == "union_tag_invalid":
        msg = "type must be one of http, end_call, transfer, dtmf"
    elif e.get("type") == "union_tag_not_found":
        msg = "each tool needs a type: http, end_call, transfer or dtmf"
    if msg.startswith(("tools: ", "flow.")):  # a model-level check naming its own field
        return msg
    return f"{_loc(loc)}: {msg}"


def parse_agent(raw: Any, source: Path | None = None) -> AgentSpec:
    """Validate one parsed YAML document (variables substituted first). Raises AgentFileError."""
    label = str(source) if source is not None else "<agent>"
    try:
        if not isinstance(raw, dict):
            raise AgentFileError("file: expected a mapping of fields (name, instructions, tools, ...)")
        variables = raw.get("variables") or {}
        if not isinstance(variables, dict) or not all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in variables.values()
        ):
            raise AgentFileError("variables: must be a mapping of names to text or numbers")
        values = {str(k): str(v) for k, v in variables.items()}
        body = {k: (_substitute(v, values, k) if k != "variables" else v) for k, v in raw.items()}
        return AgentSpec.model_validate({**body, "source": source})
    except ValidationError as e:
        raise AgentFileError(f"agent file {label}: {_first_error(e)}") from None
    except AgentFileError as e:
        raise AgentFileError(f"agent file {label}: {e}") from None


def load_agent_file(path: Path | str) -> AgentSpec:
    """Read and validate an agent file; raises AgentFileError with one line."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise AgentFileError(f"agent file {path}: cannot read it ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise AgentFileError(f"agent file {path}: {where}not valid YAML ({problem})") from None
    return parse_agent(raw, path)
