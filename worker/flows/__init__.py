"""Flows: an agent that finishes tasks (book, move, cancel) step by step, with slots filled by parsers and
tools called by the flow itself, so that even a 135M model cannot lose a booking (issue 63)."""

from .engine import Flow, machine, spoken
from .spec import AnswerSpec, FlowSpec, SlotSpec, TaskSpec

__all__ = ["AnswerSpec", "Flow", "FlowSpec", "SlotSpec", "TaskSpec", "machine", "spoken"]
