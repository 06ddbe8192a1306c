"""LiveKit's forkserver under Parley's preloads: jobs exit 0 on a group SIGTERM (they exited 255) and when
killed in prewarm (-10), and they speak with the models the forkserver made."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from worker.forkserver_signals import in_forkserver

ROOT = Path(__file__).resolve().parents[2]


def probe(*preload: str) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "tests.worker.forkserver_probe", *preload],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # its own group: the SIGTERM it sends reaches nothing else
    )
    return next((line for line in res.stdout.splitlines() if line.startswith("EXIT ")), res.stderr[-300:])


@pytest.mark.slow
def test_group_sigterm_kills_a_plain_forkserver_and_the_job_reads_255() -> None:
    assert probe() == "EXIT 255"  # the cause, reproduced: not the job's own status


@pytest.mark.slow
def test_with_the_preload_the_job_reports_its_own_exit_0() -> None:
    assert probe("worker.forkserver_signals") == "EXIT 0"


def test_importing_it_elsewhere_changes_nothing() -> None:
    assert not in_forkserver()
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN


@pytest.mark.slow
def test_a_job_speaks_with_the_voice_it_inherited_from_the_forkserver() -> None:
    """The CPU voice and VADs are made once in the forkserver; a forked job uses them (ONNX Runtime with
    one thread has no pool to lose in the fork) and says exactly what a voice of its own says."""
    res = subprocess.run(
        [sys.executable, "-m", "tests.worker.forkserver_probe", "models"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in res.stdout.splitlines() if line.startswith(("SHARED", "SAME"))]
    assert lines == ["SHARED True VADS 2", "SAME True EXIT 0"], res.stderr[-500:]


_STARTING = """
import os, sys, time
from worker.forkserver_signals import exit_cleanly_until_started, started
exit_cleanly_until_started()  # as in the forkserver: the job process below is born with it
if os.fork() == 0:
    if sys.argv[1] == "after":
        started()
    print("ready", flush=True)
    time.sleep(20)
    os._exit(3)
_, status = os.wait()
print(os.waitstatus_to_exitcode(status), flush=True)
"""


@pytest.mark.parametrize(("phase", "status"), [("starting", 0), ("after", -signal.SIGUSR1)])
def test_a_process_killed_while_starting_exits_0_and_one_killed_later_shows_it(
    phase: str, status: int
) -> None:
    """LiveKit kills a job process that has not finished starting at worker shutdown with SIGUSR1 (the
    worker logged "exited with non-zero exit code -10" for a process that never held a call); once prewarm
    is over the default is back."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _STARTING, phase], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        children = psutil.Process(proc.pid).children()
        assert len(children) == 1
        os.kill(children[0].pid, signal.SIGUSR1)
        assert proc.stdout.readline().strip() == str(status)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
