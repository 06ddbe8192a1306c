"""Runs the Parley worker (`python -m tests.e2e.worker_launcher start`) with load judged by its own calls.

The e2e tests share a 2-core machine with other work; judged by host CPU, the only worker would mark itself
full and refuse the call under test. Here its load is the engine's fill and its own job count instead, and
everything else is the real worker.
"""

from __future__ import annotations

import sys

from livekit.agents import AgentServer

import worker.server as server


def _own_load(agent_server: AgentServer) -> float:
    jobs = len(agent_server.active_jobs)
    return max(server.engine_load(), min(1.0, jobs / 4))


if __name__ == "__main__":
    server.compute_load = _own_load
    server.main([sys.argv[0], *sys.argv[1:]])
