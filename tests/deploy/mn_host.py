"""A Parley worker host for the multi-node test whose reported load the test sets.

This is `python worker.py start` (the real worker: settings, preflight, prewarmed job processes, sessions,
SIGTERM drain) with one input made controllable: the host's pressure (1.0 = full) is read from a file
instead of being counted from its calls, engine fill and measured headroom; the worker still scales it into
the load LiveKit sees. On the shared 2-core CI machine the system CPU is pegged by unrelated work (here, the
other host: both run on one machine), so the CPU term would mark every host full at random; and there is
no GPU engine here to fill up. Writing 1.0 to the file is exactly what a host whose engine is full reports.

    PARLEY_TEST_LOAD_FILE=/tmp/host-a.load python -m tests.deploy.mn_host start
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import worker.load as load_module
import worker.server as server_module


def file_load(path: Path) -> float:
    try:
        return min(1.0, max(0.0, float(path.read_text().strip() or 0.0)))
    except (OSError, ValueError):
        return 1.0  # unreadable = full, as the worker treats an engine it cannot ask


def main() -> None:
    path = Path(os.environ["PARLEY_TEST_LOAD_FILE"])
    load_module.host_pressure = lambda _server: file_load(path)  # type: ignore[assignment]
    load_module.measured_pressure = lambda _calls: 0.0  # type: ignore[assignment]
    server_module.main([str(Path(server_module.__file__).parents[1] / "worker.py"), *sys.argv[1:]])


if __name__ == "__main__":
    main()
