"""Keep a long call's LLM context bounded without losing what matters.

Layout of what the LLM sees, front to back:
1. the agent's instructions, byte-identical every turn (LLM servers reuse the prefix cache);
2. one short "earlier in this call" note folding older turns into a few facts (only once there are any);
3. the most recent turns verbatim.
Older turns leave in blocks of `drop_step` messages, not one per turn: the LLM server reuses its cached
prefix only while everything before the new words is unchanged, and a window sliding by one message changed
the summary and the first kept message every turn. In an 11-turn call the embedded LLM then re-read ~400
tokens each turn from the fifth on (first token 1.3-2.8 s late); in blocks it re-reads once per block.
Summarising is extractive (no second LLM call on the hot path): the caller's older requests are what the
agent most needs to remember ("I want a cleaning", "Tuesday at ten").
"""

from __future__ import annotations

from dataclasses import dataclass

from livekit.agents import llm


@dataclass(frozen=True)
class ContextOptions:
    recent_turns: int = 24  # at most this many user+assistant messages verbatim
    max_chars: int = 8000  # budget for verbatim turns; the oldest go into the summary first
    drop_step: int = 12  # messages that leave the verbatim part together (at least recent - step stay)
    summary_chars: int = 600
    words_per_item: int = 16


def _text(msg: llm.ChatMessage) -> str:
    return " ".join(msg.text_content.split()) if msg.text_content else ""


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def summarise(older: list[llm.ChatMessage], opt: ContextOptions) -> str:
    """Fold older turns into one line per caller request, newest last, within `summary_chars`."""
    items = [f"caller: {_clip(_text(m), opt.words_per_item)}" for m in older if m.role == "user" and _text(m)]
    out: list[str] = []
    used = 0
    for item in reversed(items):
        if used + len(item) > opt.summary_chars:
            break
        out.append(item)
        used += len(item) + 2
    if not out:
        return ""
    return "Earlier in this call — " + "; ".join(reversed(out)) + "."


def _dropped(messages: list[llm.ChatMessage], opt: ContextOptions) -> int:
    """How many of the oldest messages leave the verbatim part: a multiple of `drop_step`, so it changes
    once per block; never the newest message.

    Only messages up to the agent's last whole reply count: the caller's words after it (one message, or
    several when a hesitation split the turn) and replies the caller cut short never move the fold, so the
    context read ahead after a reply (worker/prompt_warm.py), while the caller has not started yet, is the
    one every request of the next turn starts with. A fold inside a turn re-reads the whole history after the
    instructions (~400 tokens, ~1.1 s on 2 cores) on that turn's first token."""
    step = max(1, min(opt.drop_step, opt.recent_turns))
    n = len(messages)
    whole = [i + 1 for i, m in enumerate(messages) if m.role == "assistant" and not m.interrupted]
    settled = whole[-1] if whole else n
    dropped = -(-(settled - opt.recent_turns) // step) * step if settled > opt.recent_turns else 0
    while dropped < settled - 1 and sum(len(_text(m)) for m in messages[dropped:settled]) > opt.max_chars:
        dropped += step
    return min(dropped, n - 1)


def bound_context(chat_ctx: llm.ChatContext, instructions: str, opt: ContextOptions) -> llm.ChatContext:
    """A new context: stable instructions, a summary of older turns, recent turns verbatim.

    Tool calls and their outputs among the recent turns are kept; older ones are dropped with their turn.
    """
    items = list(chat_ctx.items)
    convo = [it for it in items if not (it.type == "message" and it.role in ("system", "developer"))]
    messages = [it for it in convo if it.type == "message"]
    dropped = _dropped(messages, opt)
    keep_from = convo.index(messages[dropped]) if dropped else 0
    # never start the verbatim part on a dangling tool output
    while keep_from < len(convo) and convo[keep_from].type == "function_call_output":
        keep_from += 1
    older = [it for it in convo[:keep_from] if it.type == "message"]
    recent = convo[keep_from:]

    out = llm.ChatContext()
    out.add_message(role="system", content=instructions)
    note = summarise(older, opt)  # type: ignore[arg-type]
    if note:
        out.add_message(role="system", content=note)
    out.items.extend(recent)
    return out
