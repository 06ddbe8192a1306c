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
    s = Settings()
    assert s.livekit_url == "wss://example.invalid"
    assert s.livekit_api_key == "k"
    assert "s3cret" not in repr(s)  # secrets never printed


@pytest.mark.parametrize(
    ("env", "value", "needle"),
    [
        ("PARLEY_LANGUAGE", "fr", "PARLEY_LANGUAGE"),
        ("PARLEY_LLM_BASE_URL", "ftp://x", "PARLEY_LLM_BASE_URL"),
        ("PARLEY_ENGINE_ADDRESS", "tcp://1.2.3.4", "PARLEY_ENGINE_ADDRESS"),
        ("PARLEY_LLM_MAX_TOKENS", "-3", "PARLEY_LLM_MAX_TOKENS"),
        ("PARLEY_TTS_VOICE", "nobody", "PARLEY_TTS_VOICE"),
        ("PARLEY_TURN_DELAY_SCALE", "9", "PARLEY_TURN_DELAY_SCALE"),
        ("PARLEY_CALL_REPORT_URL", "file:///etc/passwd", "PARLEY_CALL_REPORT_URL"),
        ("PARLEY_STT_VOCABULARY", "Okonkwo, " + "x" * 60, "PARLEY_STT_VOCABULARY"),
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
    monkeypatch.setenv("PARLEY_STT_PROMPT", "")
    assert load_settings().effective_stt_prompt == ""  # set empty: no prompt


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
    monkeypatch.setenv("PARLEY_NUM_IDLE_PROCESSES", "2")
    assert load_settings().idle_processes == 2


def test_the_host_speech_engine_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert s.stt_engine == "host" and s.stt_engine_address == ""  # the worker starts one
    monkeypatch.setenv("PARLEY_STT_ENGINE", "gpu")
    with pytest.raises(SettingsError, match="PARLEY_STT_ENGINE"):
        load_settings()


def test_preemptive_tts_follows_the_voice_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU voice voices a preemptive reply before its turn is committed; the GPU engine does not unless
    asked (a thrown-away start would hold one of its streams)."""
    from worker.pipeline import Components, preemptive_tts

    def comp(tts_live: str) -> Components:
        return Components(vads={}, eot_model=None, stt=None, tts=None, llm=None, live={"tts": tts_live})  # type: ignore[arg-type]

    assert preemptive_tts(Settings(), comp("cpu-voice:heart")) is True
    assert preemptive_tts(Settings(), comp("orpheus:tara")) is False
    monkeypatch.setenv("PARLEY_PREEMPTIVE_TTS", "false")
    assert preemptive_tts(Settings(), comp("cpu-voice:heart")) is False
    monkeypatch.setenv("PARLEY_PREEMPTIVE_TTS", "true")
    assert preemptive_tts(Settings(), comp("orpheus:tara")) is True


def test_the_stt_vocabulary_is_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().stt_vocabulary_terms == ()
    monkeypatch.setenv("PARLEY_STT_VOCABULARY", " Okonkwo ,Harrowgate  Road,, Okonkwo")
    s = load_settings()
    assert s.stt_vocabulary_terms == ("Okonkwo", "Harrowgate Road")
    from worker.pipeline import load_stt

    assert load_stt(s)._opts.streaming.vocabulary == ("Okonkwo", "Harrowgate Road")  # type: ignore[attr-defined]


def test_pronunciations_are_read_from_one_setting_and_reach_both_voices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not load_settings().tts_pronunciation_list
    monkeypatch.setenv("PARLEY_TTS_PRONUNCIATIONS", "Nguyen = win;  Okonkwo=oh-konk-woh;")
    s = load_settings()
    assert s.tts_pronunciations == "Nguyen=win; Okonkwo=oh-konk-woh"
    from plugins.orpheus.tts import OrpheusTTS
    from worker.pipeline import load_tts

    cpu, _ = load_tts(s)
    assert cpu.pronunciations.speak("Doctor Nguyen") == "Doctor win"  # type: ignore[attr-defined]
    orpheus = OrpheusTTS.from_settings(load_settings(engine_address="unix:///tmp/none.sock"))
    assert orpheus.options.pronunciations.speak("Okonkwo's") == "oh-konk-woh's"  # type: ignore[attr-defined]
    monkeypatch.setenv("PARLEY_TTS_PRONUNCIATIONS", "Nguyen")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "PARLEY_TTS_PRONUNCIATIONS" in str(err.value) and "word=how to say it" in str(err.value)


def test_the_end_of_turn_scorer_is_built_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.pipeline import load_eot_lm

    embedded = load_eot_lm(load_settings(), "http://127.0.0.1:9/v1", slot=4)
    assert embedded is not None
    assert embedded.opts.extra_body == {"id_slot": 4}  # a slot of its own beside the calls'
    assert embedded.opts.context_words > 0 and embedded.opts.read_interims
    monkeypatch.setenv("PARLEY_EOT_LM_URL", "http://scorer.internal:8080")
    monkeypatch.setenv("PARLEY_TURN_LM_READ_INTERIMS", "false")
    monkeypatch.setenv("PARLEY_TURN_LM_AGENT_LINE", "false")
    own = load_eot_lm(load_settings(), "", slot=4)
    assert own is not None and own.opts.base == "http://scorer.internal:8080"
    assert own.opts.extra_body == {} and own.opts.context_words == 0 and not own.opts.read_interims
    monkeypatch.delenv("PARLEY_EOT_LM_URL")
    monkeypatch.setenv("PARLEY_LLM_BASE_URL", "http://llm.internal:8000/v1")
    monkeypatch.setenv("PARLEY_LLM_MODEL", "big-model")
    assert load_eot_lm(load_settings(), "http://llm.internal:8000/v1", slot=4) is None  # no server to ask
