"""Limits that keep a steered LLM or a careless deployment from doing harm: the DTMF tool's key cap, and
the built-in development secret refused for a LiveKit server beyond this machine."""

from __future__ import annotations

import pytest
from livekit.agents import ToolError

from worker.settings import SettingsError, load_settings
from worker.sip import MAX_DTMF_KEYS, dtmf_digits, send_dtmf_tool


def test_dtmf_keys_are_capped_per_call() -> None:
    assert dtmf_digits("1234#") == ["1", "2", "3", "4", "#"]
    assert len(dtmf_digits("1" * MAX_DTMF_KEYS)) == MAX_DTMF_KEYS
    with pytest.raises(ToolError, match=f"at most {MAX_DTMF_KEYS} keys"):
        dtmf_digits("1" * (MAX_DTMF_KEYS + 1))
    with pytest.raises(ToolError, match="at most"):
        dtmf_digits("9 " * 100_000)  # refused before it is even split
    with pytest.raises(ToolError, match="digits 0-9"):
        dtmf_digits("12x")
    assert f"at most {MAX_DTMF_KEYS} keys" in send_dtmf_tool().info.description


@pytest.mark.parametrize("url", ["wss://lk.example.org", "ws://10.0.0.5:7880", "ws://[2001:db8::1]:7880"])
def test_dev_secret_is_refused_for_a_livekit_server_beyond_loopback(monkeypatch, url: str) -> None:
    monkeypatch.delenv("LIVEKIT_API_SECRET", raising=False)
    monkeypatch.delenv("PARLEY_LIVEKIT_API_SECRET", raising=False)
    monkeypatch.setenv("LIVEKIT_URL", url)
    with pytest.raises(SettingsError, match="built-in development secret only works with a loopback"):
        load_settings()
    monkeypatch.setenv("LIVEKIT_API_SECRET", "a-real-secret-of-this-deployment")
    assert load_settings().livekit_url == url


@pytest.mark.parametrize("url", ["ws://127.0.0.1:7880", "ws://localhost:7880", "ws://[::1]:7880"])
def test_dev_secret_is_fine_on_loopback(monkeypatch, url: str) -> None:
    monkeypatch.delenv("LIVEKIT_API_SECRET", raising=False)
    monkeypatch.delenv("PARLEY_LIVEKIT_API_SECRET", raising=False)
    monkeypatch.setenv("LIVEKIT_URL", url)
    assert load_settings().livekit_api_secret.get_secret_value() == "secret"
