"""Keep a long call's LLM context bounded without losing what matters.

Layout of what the LLM sees, front to back:
1. the agent's instructions, byte-identical every turn (LLM servers reuse the prefix cache);
2. one short "earlier in this call" note folding older turns into a few facts (only once there are any);
3. the most recent turns verbatim.
Summarising is extractive (no second LLM call on the hot path): the caller's older requests are what the
agent most needs to remember ("I want a cleaning", "Tuesday at ten").
"""

from __future__ import annotations

from dataclasses import dataclass

from livekit.agents import llm


@dataclass(frozen=True)
class ContextOptions:
    recent_turns: int = 8  # user+assistant messages kept verbatim (counted as messages)
    max_chars: int = 6000  # budget for verbatim turns; the oldest go into the summary first
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


def bound_context(chat_ctx: llm.ChatContext, instructions: str, opt: ContextOptions) -> llm.ChatContext:
    """A new context: stable instructions, a summary of older turns, recent turns verbatim.

    Tool calls and their outputs among the recent turns are kept; older ones are dropped with their turn.
    """
    items = list(chat_ctx.items)
    convo = [it for it in items if not (it.type == "message" and it.role in ("system", "developer"))]
    messages = [it for it in convo if it.type == "message"]
    keep_from = 0
    if len(messages) > opt.recent_turns:
        keep_from = convo.index(messages[-opt.recent_turns])
    # enforce the character budget on what is kept verbatim
    total = 0
    for idx in range(len(convo) - 1, keep_from - 1, -1):
        it = convo[idx]
        if it.type == "message":
            total += len(_text(it))
            if total > opt.max_chars and idx < len(convo) - 1:
                keep_from = idx + 1
                break
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
