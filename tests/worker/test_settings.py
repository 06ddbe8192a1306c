import subprocess
import sys

import pytest

from tests.conftest import ROOT
from worker.settings import Settings, SettingsError, load_settings


def test_defaults_are_offline_and_private(monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert s.llm_base_url == ""  # embedded LLM
    assert s.log_transcripts is False
    assert s.record_audio is False
    assert s.language == "en"


def test_livekit_names_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVEKIT_URL", "wss://example.invalid")
    monkeypatch.setenv("LIVEKIT_API_KEY", "k")
    monkeypatch.setenv("LIVEKIT_API_SECRET", "s3cret")
    s = load_settings()
    assert s.livekit_url == "wss://example.invalid"
    assert s.livekit_api_key == "k"
    assert "s3cret" not in repr(s)  # secrets never printed


@pytest.mark.parametrize(
    ("env", "value", "needle"),
    [
        ("PARLEY_LANGUAGE", "fr", "PARLEY_LANGUAGE"),
        ("PARLEY_LLM_BASE_URL", "ftp://x", "PARLEY_LLM_BASE_URL"),
        ("PARLEY_ENGINE_ADDRESS", "tcp://1.2.3.4", "PARLEY_ENGINE_ADDRESS"),
        ("PARLEY_MAX_CALLS", "-3", "PARLEY_MAX_CALLS"),
        ("PARLEY_CALL_REPORT_URL", "file:///etc/passwd", "PARLEY_CALL_REPORT_URL"),
        ("LIVEKIT_URL", "tcp://x", "LIVEKIT_URL"),
    ],
)
def test_bad_setting_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert needle in msg
    assert "\n" not in msg


def test_stt_model_follows_the_language_unless_set() -> None:
    assert load_settings().effective_stt_model == "tiny.en"
    assert load_settings(language="ko").effective_stt_model == "base"
    assert load_settings(language="ko", stt_language="en").effective_stt_model == "tiny.en"
    assert load_settings(language="ko", stt_model="tiny.en").effective_stt_model == "tiny.en"  # refused later
    assert load_settings(stt_model="base").effective_stt_model == "base"


def test_stt_style_prompt_follows_the_language_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.settings import ENGLISH_STYLE_PROMPT

    assert load_settings().effective_stt_prompt == ENGLISH_STYLE_PROMPT
    assert (
        load_settings(language="ko").effective_stt_prompt == ""
    )  # an English prompt would pull toward English
    assert load_settings(language="ko", stt_language="en").effective_stt_prompt == ENGLISH_STYLE_PROMPT
    assert load_settings(stt_prompt="").effective_stt_prompt == ""  # set empty: no prompt


def test_orpheus_backend_needs_an_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_TTS_BACKEND", "orpheus")
    with pytest.raises(SettingsError, match="PARLEY_ENGINE_ADDRESS"):
        load_settings()


def _run_worker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    import os

    full = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "worker.py", *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"PARLEY_LANGUAGE": "xx"}, "PARLEY_LANGUAGE"),
        ({"PARLEY_STT_MODEL": "/no/such/model"}, "PARLEY_STT_MODEL"),
        ({"PARLEY_LANGUAGE": "ko", "PARLEY_STT_MODEL": "tiny.en"}, "English-only"),
        ({"PARLEY_LLM_BASE_URL": "http://127.0.0.1:9/v1"}, "no LLM answers"),
    ],
)
def test_worker_start_fails_with_one_clear_line(env: dict[str, str], needle: str) -> None:
    proc = _run_worker(env, "start")
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert needle in err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err


def test_idle_processes_follow_the_call_limit_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_MAX_CALLS", "6")
    assert load_settings().idle_processes == 6  # a burst of calls each finds a prewarmed process
    assert load_settings(num_idle_processes=2).idle_processes == 2


def test_the_host_speech_engine_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert s.stt_engine == "host" and s.stt_engine_address == ""  # the worker starts one
    with pytest.raises(SettingsError, match="option stt_engine"):
        load_settings(stt_engine="gpu")


def test_preemptive_tts_follows_the_voice_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU voice voices a preemptive reply before its turn is committed; the GPU engine does not unless
    asked (a thrown-away start would hold one of its streams)."""
    from worker.pipeline import Components, preemptive_tts

    def comp(tts_live: str) -> Components:
        return Components(vads={}, eot_model=None, stt=None, tts=None, llm=None, live={"tts": tts_live})  # type: ignore[arg-type]

    assert preemptive_tts(Settings(), comp("cpu-voice:heart")) is True
    assert preemptive_tts(Settings(), comp("orpheus:tara")) is False
    assert preemptive_tts(Settings(preemptive_tts=False), comp("cpu-voice:heart")) is False
    assert preemptive_tts(Settings(preemptive_tts=True), comp("orpheus:tara")) is True


def test_the_stt_vocabulary_is_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().stt_vocabulary_terms == ()
    s = load_settings(stt_vocabulary=" Okonkwo ,Harrowgate  Road,, Okonkwo")
    assert s.stt_vocabulary_terms == ("Okonkwo", "Harrowgate Road")
    from worker.pipeline import load_stt

    assert load_stt(s)._opts.streaming.vocabulary == ("Okonkwo", "Harrowgate Road")  # type: ignore[attr-defined]


def test_pronunciations_are_read_from_one_setting_and_reach_both_voices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not load_settings().tts_pronunciation_list
    s = load_settings(tts_pronunciations="Nguyen = win;  Okonkwo=oh-konk-woh;")
    assert s.tts_pronunciations == "Nguyen=win; Okonkwo=oh-konk-woh"
    from plugins.orpheus.tts import OrpheusTTS
    from worker.pipeline import load_tts

    cpu, _ = load_tts(s)
    assert cpu.pronunciations.speak("Doctor Nguyen") == "Doctor win"  # type: ignore[attr-defined]
    orpheus = OrpheusTTS.from_settings(s.model_copy(update={"engine_address": "unix:///tmp/none.sock"}))
    assert orpheus.options.pronunciations.speak("Okonkwo's") == "oh-konk-woh's"  # type: ignore[attr-defined]
    with pytest.raises(SettingsError) as err:
        load_settings(tts_pronunciations="Nguyen")
    assert "option tts_pronunciations" in str(err.value) and "word=how to say it" in str(err.value)


def test_the_end_of_turn_scorer_is_built_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.pipeline import load_eot_lm

    embedded = load_eot_lm(load_settings(), "http://127.0.0.1:9/v1", slot=4)
    assert embedded is not None
    assert embedded.opts.extra_body == {"id_slot": 4}  # a slot of its own beside the calls'
    assert embedded.opts.context_words > 0 and embedded.opts.read_interims
    own = load_eot_lm(load_settings(eot_lm_url="http://scorer.internal:8080"), "", slot=4)
    assert own is not None and own.opts.base == "http://scorer.internal:8080"
    assert own.opts.extra_body == {}
    monkeypatch.setenv("PARLEY_LLM_BASE_URL", "http://llm.internal:8000/v1")
    monkeypatch.setenv("PARLEY_LLM_MODEL", "big-model")
    assert load_eot_lm(load_settings(), "http://llm.internal:8000/v1", slot=4) is None  # no server to ask


def test_bad_option_is_one_line_naming_it() -> None:
    for options, needle in [
        ({"llm_max_tokens": -3}, "option llm_max_tokens"),
        ({"tts_voice": "nobody"}, "voice: unknown voice"),
        ({"turn_patience": 9}, "option turn_patience"),
        ({"stt_vocabulary": "Okonkwo, " + "x" * 60}, "option stt_vocabulary"),
        ({"max_calss": 3}, "unknown option max_calss (did you mean max_calls?)"),
    ]:
        with pytest.raises(SettingsError) as err:
            load_settings(**options)
        assert needle in str(err.value) and "\n" not in str(err.value)


def test_deployment_variables_are_at_most_30_and_each_is_a_setting() -> None:
    """The environment carries deployment only (README, "Configuration", lists each of these)."""
    from worker.settings import DEPLOYMENT_VARIABLES, ENGINE_VARIABLES, OTHER_VARIABLES, Deployment

    assert len(DEPLOYMENT_VARIABLES) <= 30
    assert set(DEPLOYMENT_VARIABLES.values()) == set(Deployment.model_fields)
    assert set(DEPLOYMENT_VARIABLES.values()) <= set(Settings.model_fields)
    readme = (ROOT / "README.md").read_text()
    every = [*DEPLOYMENT_VARIABLES, *ENGINE_VARIABLES, *OTHER_VARIABLES]
    missing = [n for n in every if f"`{n}`" not in readme]
    assert not missing, f"not in the README's table: {missing}"


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("PARLEY_MAX_CALS", "unknown variable PARLEY_MAX_CALS (did you mean PARLEY_MAX_CALLS?)"),
        ("PARLEY_TURN_DELAY_SCALE", "`turn.patience` in the agent file"),
        ("PARLEY_ORPHEUS_MAX_STREAMS", "renamed PARLEY_ENGINE_MAX_STREAMS"),
        ("PARLEY_IDLE_REPROMPT_S", "option `idle_reprompt_s`"),
    ],
)
def test_unknown_variable_is_refused_with_one_line(
    monkeypatch: pytest.MonkeyPatch, name: str, needle: str
) -> None:
    monkeypatch.setenv(name, "1")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_tool_header_variables_and_the_engine_image_variables_are_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARLEY_TOOL_SHOP_TOKEN", "x")
    monkeypatch.setenv("PARLEY_ENGINE_MAX_STREAMS", "8")
    load_settings()


def test_an_unknown_variable_in_dot_env_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from worker.settings import check_environment

    (tmp_path / ".env").write_text("PARLEY_LLM_MODEL=x\nPARLEY_BOGUS=1\n")
    with pytest.raises(SettingsError, match="unknown variable PARLEY_BOGUS"):
        check_environment({}, tmp_path / ".env")


def test_unknown_variable_stops_download_files() -> None:
    """Every worker.py command, `download-files` (which loads no settings of its own) included."""
    proc = _run_worker({"PARLEY_BOGUS": "1"}, "download-files")
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert err == "unknown variable PARLEY_BOGUS", err


def test_worker_set_flag_refuses_an_unknown_option() -> None:
    proc = _run_worker({}, "download-files", "--set", "bogus_knob=1")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "invalid setting: unknown option bogus_knob", proc.stderr


def test_unknown_agent_file_field_stops_check_with_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    agent = tmp_path / "agent.yaml"
    agent.write_text("name: a\ninstructions: Be brief.\nvoicee: tara\n")
    proc = subprocess.run(
        [sys.executable, "-m", "worker.agent_file", "check", str(agent)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    out = (proc.stdout + proc.stderr).strip()
    assert out.endswith("voicee: unknown field") and len(out.splitlines()) == 1, out
