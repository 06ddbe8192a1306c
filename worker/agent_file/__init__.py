"""Agents people define: an agent file (YAML, `spec.py`) or a Python entry point (`entry.py`), served by the
Parley worker with its turn handling, voices, phrase cache and fillers (`runtime.py`).

    python -m worker.agent_file check FILE    # prints `ok: NAME` or the one-line error (exit 0 / 1)
"""

from .entry import AgentEntryError
from .http_tools import HttpToolRuntime, ToolTimings, http_tool, http_tools
from .runtime import (
    ServedAgent,
    agent_cache_dir,
    agent_phrases,
    apply_agent,
    cache_report,
    call_tools,
    effective_settings,
    load_served_agent,
    make_agent,
    pop_worker_flags,
    served_spec,
)
from .spec import AgentFileError, AgentSpec, HttpToolSpec, load_agent_file, parse_agent

__all__ = [
    "AgentEntryError",
    "AgentFileError",
    "AgentSpec",
    "HttpToolRuntime",
    "HttpToolSpec",
    "ServedAgent",
    "ToolTimings",
    "agent_cache_dir",
    "agent_phrases",
    "apply_agent",
    "cache_report",
    "call_tools",
    "effective_settings",
    "http_tool",
    "http_tools",
    "load_agent_file",
    "load_served_agent",
    "make_agent",
    "parse_agent",
    "pop_worker_flags",
    "served_spec",
]
