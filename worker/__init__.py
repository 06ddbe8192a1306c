"""Parley's LiveKit worker: settings, the agent, the pipeline builder and the AgentServer."""

__version__ = "0.1.0"
