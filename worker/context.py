"""Keep a long call's LLM context bounded without losing what matters.

Layout of what the LLM sees, front to back:
1. the agent's instructions, byte-identical every turn (LLM servers reuse the prefix cache);
2. one short "earlier in this call" note folding older turns into a few facts (only once there are any);
3. the most recent turns verbatim;
4. a caller turn the agent cut in on at a pause as one message, the cut reply left out (`join_cut_in`).
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
    cut_in_words: int = 3
    """A reply the caller cut short within this many words (what was heard: about a second) was a cut-in at
    a pause, not an answer: the LLM sees the caller's words before and after it as one turn (0 = keep it).
    A caller who talks over more of a reply is answering what it said (a time it offered, say), so those
    words stay."""


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
    out.items.extend(join_cut_in(recent, opt.cut_in_words))
    return out


def callers_words(items: list[llm.ChatItem]) -> int:
    """Words of the caller's messages at the end of a context: what a reply to it answers."""
    n = 0
    for item in reversed(items):
        if not _is_user(item):
            break
        n += len(_text(item).split())  # type: ignore[arg-type]
    return n


def _is_user(item: llm.ChatItem) -> bool:
    return item.type == "message" and item.role == "user"


def _cut_in(item: llm.ChatItem, max_words: int) -> bool:
    return (
        item.type == "message"
        and item.role == "assistant"
        and item.interrupted
        and len(_text(item).split()) <= max_words
    )


def join_cut_in(items: list[llm.ChatItem], max_words: int) -> list[llm.ChatItem]:
    """Each caller turn the agent cut in on, as one user message.

    When the agent takes the turn at a pause ("My sister can bring me over on," …) and the caller goes on
    ("the ninth of June"), the reply is cut after a word or two and the context holds the fragment, the cut
    reply and the rest as three messages; a small LLM then answers "the ninth of June" alone. Here the cut
    reply goes (the caller barely heard it) and the caller's messages around it become one. Every such turn in
    the history is joined the same way, not just the newest, so the context only ever grows at its end and
    the LLM server's cached prefix holds from one turn to the next. A reply that called a tool, or that the
    caller heard more of than `max_words`, stays as it was; so does a cut reply the caller has not spoken
    after yet.
    """
    if max_words <= 0:
        return items
    out: list[llm.ChatItem] = []
    i, n = 0, len(items)
    while i < n:
        if not _is_user(items[i]):
            out.append(items[i])
            i += 1
            continue
        j, joins = i, 0
        while j < n and _is_user(items[j]):
            j += 1
        while j + 1 < n and _cut_in(items[j], max_words) and _is_user(items[j + 1]):
            j, joins = j + 1, joins + 1
            while j < n and _is_user(items[j]):
                j += 1
        out.extend(_joined(items[i:j]) if joins else items[i:j])
        i = j
    return out


def _joined(group: list[llm.ChatItem]) -> list[llm.ChatItem]:
    """The caller's messages of `group` as one; the group as it was when a part is not plain text (an
    image or audio part a text join would lose)."""
    users = [m for m in group if _is_user(m)]
    if any(not isinstance(c, str) for m in users for c in m.content):  # type: ignore[union-attr]
        return group
    first = users[0]
    assert isinstance(first, llm.ChatMessage)
    text = " ".join(t for t in (_text(m) for m in users) if t)  # type: ignore[arg-type]
    return [llm.ChatMessage(role="user", content=[text], id=first.id, created_at=first.created_at)]
