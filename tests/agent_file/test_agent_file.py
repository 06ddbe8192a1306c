"""The agent file: every documented bad-file case gives its one line; the examples pass `check`; the file's
choices reach the settings, the agent and the per-agent phrase cache."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from caches import PhraseCache
from worker.agent_file import (
    AgentFileError,
    agent_cache_dir,
    agent_phrases,
    apply_agent,
    cache_report,
    load_agent_file,
    pop_worker_flags,
)
from worker.agent_file.__main__ import check
from worker.settings import SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]
GOOD = """
name: shop
instructions: You answer for {{shop}}.
variables: {shop: Acme}
tools:
  - type: http
    name: lookup
    description: Look up an order.
    parameters: {type: object, properties: {order: {type: string}}, required: [order]}
    url: http://127.0.0.1:9/orders
    headers: {Authorization: "Bearer ${PARLEY_TOOL_SHOP_TOKEN}"}
"""

# (what is wrong, the file, the field path and words its one line must name)
BAD = [
    ("not YAML", "name: [unclosed", "not valid YAML"),
    ("not a mapping", "- just\n- a list", "file: expected a mapping"),
    ("no name", "instructions: hi", "name: Field required"),
    ("bad dispatch name", "name: My Agent", "name: 'My Agent' is not a dispatch name"),
    ("unknown field", "name: a\ngreting: hi", "greting: unknown field"),
    ("unknown language", "name: a\nlanguage: fr", "language: Input should be 'en' or 'ko'"),
    ("unknown Orpheus voice", "name: a\nvoice: bob", "voice: unknown Orpheus voice 'bob'"),
    ("unknown CPU voice", "name: a\ncpu_voice: bob", "cpu_voice: unknown CPU voice 'bob'"),
    ("unknown espeak voice", "name: a\ncpu_voice: espeak-zz", "cpu_voice: unknown espeak voice 'espeak-zz'"),
    ("unknown variable", "name: a\ngreeting: Hi from {{shop}}", "greeting: unknown variable {{shop}}"),
    ("variables not a mapping", "name: a\nvariables: [1]", "variables: must be a mapping"),
    ("temperature out of range", "name: a\nllm: {temperature: 5}", "llm.temperature: Input should be less"),
    ("llm url", "name: a\nllm: {base_url: ftp://x}", "llm.base_url: must start with http"),
    ("patience", "name: a\nturn: {patience: 9}", "turn.patience: Input should be less"),
    ("empty phrase kind", "name: a\nphrases: {hold: []}", "phrases.hold: must be a non-empty list"),
    ("unknown phrase kind", "name: a\nphrases: {filler: [x]}", "phrases.filler: unknown field"),
    ("unknown outbound line", "name: a\noutbound: {voicemal: hi}", "outbound.voicemal: unknown field"),
    ("tool without type", "name: a\ntools: [{name: x}]", "each tool needs a type"),
    ("unknown tool type", "name: a\ntools: [{type: ftp}]", "type must be one of http"),
    (
        "secret in a header",
        "name: a\ntools: [{type: http, name: x, description: d, url: 'http://h', headers: {K: abc123}}]",
        "tools[0].headers: K: header values come from environment variables only",
    ),
    (
        "tool url",
        "name: a\ntools: [{type: http, name: x, description: d, url: 'h.example/x'}]",
        "tools[0].url: must start with http",
    ),
    (
        "tool name",
        "name: a\ntools: [{type: http, name: 'look up', description: d, url: 'http://h'}]",
        "tools[0].name: 'look up' is not a tool name",
    ),
    (
        "parameters not an object schema",
        "name: a\ntools: [{type: http, name: x, description: d, url: 'http://h', "
        "parameters: {type: string}}]",
        "tools[0].parameters: must be a JSON schema with type: object",
    ),
    (
        "required names an unknown property",
        "name: a\ntools: [{type: http, name: x, description: d, url: 'http://h', "
        "parameters: {type: object, properties: {}, required: [q]}}]",
        "tools[0].parameters: required names unknown properties: q",
    ),
    (
        "timeout",
        "name: a\ntools: [{type: http, name: x, description: d, url: 'http://h', timeout_s: 0}]",
        "tools[0].timeout_s: Input should be greater than 0",
    ),
    (
        "duplicate tool",
        "name: a\ntools: [{type: end_call}, {type: end_call}]",
        "tools: duplicate tool 'end_call'",
    ),
    (
        "transfer target",
        "name: a\ntools: [{type: transfer, targets: {desk: '+1555'}}]",
        "tools[0].targets: desk: target must start with tel: or sip:",
    ),
    ("transfer without targets", "name: a\ntools: [{type: transfer}]", "tools[0].targets: Field required"),
    ("entry point", "name: a\nentry: not an entry", "entry: String should match pattern"),
    ("report url", "name: a\nreport: {url: 'ftp://h/r'}", "report.url: must start with http"),
    (
        "report secret in the file",
        "name: a\nreport: {url: 'http://h', secret: s}",
        "report.secret: unknown field",
    ),
]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(("case", "text", "expected"), BAD, ids=[b[0] for b in BAD])
def test_every_bad_file_gives_one_line_naming_the_field(
    tmp_path: Path, case: str, text: str, expected: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(AgentFileError) as err:
        load_agent_file(path)
    line = str(err.value)
    assert "\n" not in line, case
    assert line.startswith(f"agent file {path}: "), line
    assert expected in line, line


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    code, line = check(str(tmp_path / "nope.yaml"))
    assert code == 1 and line.startswith(f"agent file {tmp_path / 'nope.yaml'}: cannot read it")


@pytest.mark.parametrize("entry", ["examples/dental_clinic.yaml", "examples/korean_clinic.yaml"])
def test_example_agents_pass_check(entry: str) -> None:
    code, line = check(str(ROOT / entry))
    assert code == 0 and line.startswith("ok: "), line


@pytest.mark.slow
def test_check_cli_exit_codes(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "worker.agent_file", "check", "examples.python_agent:make_agent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and ok.stdout.strip() == "ok: examples.python_agent:make_agent"
    bad = subprocess.run(
        [sys.executable, "-m", "worker.agent_file", "check", str(write(tmp_path, "name: a\nvoice: bob"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_bad_entry_point_is_one_line() -> None:
    code, line = check("examples.python_agent:no_such_factory")
    assert code == 1 and "has no callable 'no_such_factory'" in line


def test_unset_header_variable_is_a_warning_not_an_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("PARLEY_TOOL_SHOP_TOKEN", raising=False)
    code, line = check(str(write(tmp_path, GOOD)))
    assert code == 0 and "PARLEY_TOOL_SHOP_TOKEN" in line and "warning" in line


def test_variables_are_filled_everywhere(tmp_path: Path) -> None:
    spec = load_agent_file(write(tmp_path, GOOD))
    assert spec.instructions == "You answer for Acme."
    assert spec.greeting_text is None  # no greeting key: the language's built-in greeting
    assert load_agent_file(write(tmp_path, "name: a\ngreeting: null")).greeting_text == ""


def test_agent_file_choices_reach_the_settings(tmp_path: Path) -> None:
    spec = load_agent_file(ROOT / "examples/dental_clinic.yaml")
    s = apply_agent(load_settings(), spec)
    assert (s.agent_name, s.language, s.cpu_voice, s.llm_max_sentences) == ("dental-clinic", "en", "heart", 2)
    assert s.turn_patience == pytest.approx(1.1)
    assert "front desk" in s.sip_transfer_targets
    assert s.sip_goodbye == "Thanks for calling Bright Smile Dental. See you soon!"
    assert s.outbound_greeting.startswith("Hi, this is Sam from Bright Smile Dental")
    assert s.voicemail_message.endswith("Please call us back. Thank you!")
    assert s.stt_vocabulary_terms == ("Bright Smile Dental", "Morgan", "Patel", "Invisalign", "Sensodyne")
    greetings = spec.phrase_lines({})["greeting"]  # all three said from the phrase cache
    assert s.outbound_greeting in greetings and s.voicemail_message in greetings and len(greetings) == 3


def test_an_agent_files_vocabulary_joins_the_settings_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_agent_file(
        write(tmp_path, "name: a\nvariables: {doc: Okonkwo}\nvocabulary: ['{{doc}}', Xarelto]")
    )
    assert spec.vocabulary == ["Okonkwo", "Xarelto"]
    assert apply_agent(load_settings(), spec).stt_vocabulary_terms == ("Okonkwo", "Xarelto")
    listed = load_settings(stt_vocabulary="Brightwater, Okonkwo")
    assert apply_agent(listed, spec).stt_vocabulary_terms == ("Brightwater", "Okonkwo", "Xarelto")
    long = ", ".join(f"Term{i:02d}" for i in range(55))
    many = load_agent_file(
        write(tmp_path, "name: a\nvocabulary: [" + ", ".join(f"Word{i}" for i in range(10)) + "]")
    )
    with pytest.raises(SettingsError) as err:  # each list fits alone, not both together
        apply_agent(load_settings(stt_vocabulary=long), many)
    assert "at most 60" in str(err.value) and "\n" not in str(err.value)


def test_an_agent_files_pronunciations_join_the_settings_list_and_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_agent_file(
        write(tmp_path, "name: a\nvariables: {doc: Nguyen}\npronunciations: {'{{doc}}': win, Szabo: sah-boh}")
    )
    assert spec.pronunciations == {"Nguyen": "win", "Szabo": "sah-boh"}  # variables fill the words too
    listed = load_settings(tts_pronunciations="Nguyen=noo-yen; Okonkwo=oh-konk-woh")
    said = apply_agent(listed, spec).tts_pronunciation_list
    assert said.speak("Okonkwo, Szabo") == "oh-konk-woh, sah-boh"
    code, line = check(
        str(write(tmp_path, "name: a\npronunciations: {Nguyen: win, periodontist: pair-ee-oh-DON-tist}"))
    )
    assert code == 0 and "heart already says" in line and "periodontist" in line and "Nguyen" not in line
    with pytest.raises(AgentFileError) as err:
        load_agent_file(write(tmp_path, "name: a\npronunciations: {Nguyen: '<laugh>'}"))
    assert "write plain words" in str(err.value) and "\n" not in str(err.value)


def test_an_agent_file_sends_its_reports_where_it_says(tmp_path: Path) -> None:
    spec = load_agent_file(
        write(tmp_path, "name: a\nreport: {url: 'https://crm.example/hooks/calls', transcript: true}")
    )
    s = apply_agent(load_settings(), spec)
    assert (s.call_report_url, s.call_report_transcript) == ("https://crm.example/hooks/calls", True)
    plain = apply_agent(load_settings(), load_agent_file(write(tmp_path, "name: a")))
    assert plain.call_report_url == "" and plain.call_report_transcript is False


def test_a_korean_agent_gets_a_multilingual_whisper_by_default() -> None:
    spec = load_agent_file(ROOT / "examples/korean_clinic.yaml")
    assert apply_agent(load_settings(), spec).effective_stt_model == "base"  # never tiny.en (English only)
    assert apply_agent(load_settings(stt_model="/models/small"), spec).effective_stt_model == "/models/small"
    # it speaks Korean without a GPU engine (hibari reads English only), and goes without the English-
    # calibrated language-model end-of-turn term
    settings = apply_agent(load_settings(), spec)
    assert settings.effective_cpu_voice == "espeak-ko"
    from worker.pipeline import load_eot_lm

    assert load_eot_lm(settings, "http://127.0.0.1:9/v1", slot=4) is None
    assert load_eot_lm(load_settings(), "http://127.0.0.1:9/v1", slot=4) is not None  # English: it has it


def test_agent_flag_becomes_the_setting() -> None:
    import os

    argv, options = pop_worker_flags(
        [
            "worker.py",
            "dev",
            "--agent",
            "examples/dental_clinic.yaml",
            "--set",
            "max_call_s=60",
            "--log-level",
            "x",
        ]
    )
    assert argv == ["worker.py", "dev", "--log-level", "x"]
    assert "PARLEY_AGENT" not in os.environ  # no state passed through the environment
    settings = load_settings(**options)
    assert settings.agent == "examples/dental_clinic.yaml"
    assert settings.max_call_s == 60


def test_phrase_cache_is_per_agent_and_reports_missing_and_stale(tmp_path: Path) -> None:
    import numpy as np

    from caches import CachedPhrase

    spec = load_agent_file(ROOT / "examples/dental_clinic.yaml")
    phrases = agent_phrases(spec)
    texts = [p.text for p in phrases]
    assert spec.greeting_text in texts and "Let me check the calendar." in texts
    assert any("can't reach our calendar" in t for t in texts)  # tool failure lines are cached too
    assert agent_cache_dir(tmp_path, spec) == tmp_path / "agents" / "dental-clinic"

    pcm = np.zeros(2400, np.int16)
    clips = [CachedPhrase(t, "hold", "heart", "en", "fp", 24_000, pcm) for t in [*texts[:3], "An old line."]]
    missing, stale = cache_report(PhraseCache(clips), phrases, "heart")
    assert missing == texts[3:] and stale == ["An old line."]
    assert cache_report(None, phrases, "heart") == (texts, [])


def test_explicit_agent_name_setting_wins_over_the_file() -> None:
    spec = load_agent_file(ROOT / "examples/dental_clinic.yaml")
    assert apply_agent(load_settings(agent_name="bench"), spec).agent_name == "bench"


def test_an_agent_file_sets_its_own_reprompt_lines_and_the_call_says_them_from_cache(tmp_path: Path) -> None:
    import numpy as np

    from caches import CachedPhrase, load_phrases
    from worker.pipeline import phrase_lines

    spec = load_agent_file(write(tmp_path, "name: a\nphrases: {reprompt: ['Still with me?']}"))
    mine = [p for p in agent_phrases(spec) if p.kind == "reprompt"]
    assert [p.text for p in mine] == ["Still with me?"]
    default = [
        p.text for p in agent_phrases(load_agent_file(write(tmp_path, "name: b"))) if p.kind == "reprompt"
    ]
    assert default == list(load_phrases().defaults["en"]["reprompt"])

    clip = CachedPhrase("Still with me?", "reprompt", "heart", "en", "fp", 24_000, np.zeros(2400, np.int16))
    assert phrase_lines(PhraseCache([clip]), "heart", "en", "reprompt") == ["Still with me?"]
    # nothing cached for this voice: the language's defaults, synthesised when said
    assert phrase_lines(PhraseCache([clip]), "other", "ko", "reprompt") == list(
        load_phrases().defaults["ko"]["reprompt"]
    )


def test_say_writes_a_line_in_the_agents_voice_with_its_pronunciations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m worker.agent_file say`: how an owner listens to a respelling before a caller hears it."""
    import soundfile as sf

    from worker.agent_file.__main__ import main

    path = write(tmp_path, "name: a\npronunciations: {Nguyen: win}")
    out = tmp_path / "said.wav"
    assert main(["say", str(path), "Doctor  Nguyen will call you.", "--out", str(out)]) == 0
    assert "read: Doctor win will call you." in capsys.readouterr().out
    audio, rate = sf.read(out)
    assert rate == 24000 and len(audio) > rate // 2
    assert main(["say", str(path), "Doctor Nguyen.", "--out", str(out), "--as-written"]) == 0
    assert "read: Doctor Nguyen." in capsys.readouterr().out
    assert main(["say", str(tmp_path / "missing.yaml"), "Hi.", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
