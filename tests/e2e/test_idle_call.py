"""A caller who joins and says nothing, through a real room: the dispatched worker asks if they are still
there, says goodbye and ends the call, and the caller's connection goes with the room; then the worker sends
its end-of-call report, signed, to a receiver in the call's network (`worker.call_report_receiver`), which
says the silent line ended it. Short timers (`--set idle_reprompt_s=1.5`) so the test takes seconds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from caches import load_phrases
from simulator.livekit_stack import PYTHON, free_ports
from simulator.room_runner import LiveKitCallOptions, run_caller
from tests.e2e.conftest import WORKER_CMD, WORKER_ENV, start_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EN = load_phrases().defaults["en"]


def test_a_silent_caller_is_asked_then_the_agent_ends_the_call(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    secret, reports = tmp_path / "report.secret", tmp_path / "reports.jsonl"
    secret.write_text("e2e-report-secret\n")
    env = {
        **WORKER_ENV,
        "PARLEY_CALL_REPORT_URL": f"http://127.0.0.1:{port}/report",
        "PARLEY_CALL_REPORT_SECRET": "e2e-report-secret",
    }
    stack = start_stack(
        tmp_path / "stack",
        with_worker=True,
        worker_env=env,
        worker_cmd=[*WORKER_CMD, "--set", "idle_reprompt_s=1.5", "--set", "idle_reprompts=1"],
    )
    try:
        receiver_cmd = [
            "-m",
            "worker.call_report_receiver",
            "--port",
            str(port),
            "--secret-file",
            str(secret),
        ]
        receiver = stack.spawn("report-receiver", [str(PYTHON), *receiver_cmd, "--out", str(reports)])
        stack.wait_tcp(port, receiver)
        record = run_caller(stack, [], tmp_path / "call", LiveKitCallOptions(out_dir=tmp_path, stay_s=45))
        deadline = time.monotonic() + 20  # sent at the job's shutdown, after the room is gone
        while not reports.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        receiver_log = receiver.log_text()
    finally:
        stack.close()
    lines = [t for t in record.transcripts if t.who == "agent" and t.text.strip()]
    said = [t.text.strip() for t in lines]
    assert record.greeting_first_audio is not None, said
    assert record.hung_up is not None, f"the caller was still connected after 45 s: {said}"
    asked = [t for t in lines if t.text.strip() in EN["reprompt"]]
    assert len(asked) == 1 and said[-1] in EN["goodbye"] and lines[-1] is not asked[0], said
    # both were heard, not only written: agent audio after each line's transcript opened
    ask_at, bye_at = asked[0].opened, lines[-1].opened
    heard_ask = record.agent.first_voiced_after(ask_at)
    heard_bye = record.agent.first_voiced_after(bye_at)
    assert heard_ask is not None and heard_ask < bye_at, "the reprompt was not heard"
    assert heard_bye is not None and heard_bye < record.hung_up, "the goodbye was not heard"
    # the report: signed (the receiver refuses anything else), one per call, and it says how the call ended
    assert reports.exists(), f"no call report arrived; receiver said: {receiver_log[-600:]}"
    (report,) = [json.loads(line) for line in reports.read_text().splitlines()]
    assert report["ended_by"] == "silence" and report["channel"] == "web", report
    assert report["caller_turns"] == 0 and report["agent_lines"] >= 3, report  # greeting, reprompt, goodbye
    assert "transcript" not in report and "#" in report["room"], report  # the room's name hashed
    assert 2 < report["duration_s"] < 45
