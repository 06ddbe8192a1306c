"""The end-to-end tests' stack: the code lives in simulator/livekit_stack.py (the demo and
`benchmarks.call --livekit` run the same stack); these names are re-exported for the tests."""

from simulator.livekit_stack import (
    API_KEY,
    API_SECRET,
    BIN,
    PYTHON,
    REPO,
    WEB_DIR,
    ComponentMissing,
    E2EStack,
    HostLoopback,
    ManagedProcess,
    Netns,
    StackError,
    StackOptions,
    find_binary,
    livekit_server_config,
    livekit_sip_config,
    missing_reason,
    running_stack,
)

__all__ = [
    "API_KEY",
    "API_SECRET",
    "BIN",
    "PYTHON",
    "REPO",
    "WEB_DIR",
    "ComponentMissing",
    "E2EStack",
    "HostLoopback",
    "ManagedProcess",
    "Netns",
    "StackError",
    "StackOptions",
    "find_binary",
    "livekit_server_config",
    "livekit_sip_config",
    "missing_reason",
    "running_stack",
]
