import itertools
from collections.abc import AsyncIterator

from livekit.agents import llm

from worker.agent import count_sentence_ends, limit_reply
from worker.context import ContextOptions, bound_context


async def _gen(parts: list[str]) -> AsyncIterator[str]:
    for p in parts:
        yield p


async def test_reply_stops_after_the_sentence_budget() -> None:
    parts = ["Sure", ", I can", " help. It costs", " 3.50 dollars. Anything", " else? More text", " here."]
    out = [t async for t in limit_reply(_gen(parts), 2)]
    assert "".join(out) == "Sure, I can help. It costs 3.50 dollars."


def test_sentence_count_ignores_decimals() -> None:
    assert count_sentence_ends("It is 3.30 now. Okay!") == 2


def _ctx(n_turns: int) -> llm.ChatContext:
    ctx = llm.ChatContext()
    ctx.add_message(role="system", content="old instructions")
    for i in range(n_turns):
        ctx.add_message(role="user", content=f"user request number {i}")
        ctx.add_message(role="assistant", content=f"reply number {i}")
    return ctx


def test_short_context_is_kept_verbatim_behind_stable_instructions() -> None:
    out = bound_context(_ctx(2), "INSTR", ContextOptions(recent_turns=8))
    msgs = [m for m in out.items if m.type == "message"]
    assert msgs[0].role == "system" and msgs[0].text_content == "INSTR"
    assert [m.text_content for m in msgs[1:]] == [
        "user request number 0",
        "reply number 0",
        "user request number 1",
        "reply number 1",
    ]


def test_long_context_is_bounded_and_older_turns_summarised() -> None:
    out = bound_context(_ctx(30), "INSTR", ContextOptions(recent_turns=4))
    msgs = [m for m in out.items if m.type == "message"]
    assert msgs[0].text_content == "INSTR"
    assert msgs[1].role == "system" and "Earlier in this call" in (msgs[1].text_content or "")
    assert "user request number 25" in (msgs[1].text_content or "")
    assert len(msgs) == 2 + 4
    assert msgs[-1].text_content == "reply number 29"


def test_the_verbatim_part_moves_in_blocks_so_the_cached_prefix_holds() -> None:
    """Turn after turn the LLM's input only grows at its end, except once per block of dropped messages."""
    opt = ContextOptions(recent_turns=6, drop_step=4)
    prefixes = []
    for turns in range(3, 12):
        out = bound_context(_ctx(turns), "INSTR", opt)
        texts = [m.text_content for m in out.items if m.type == "message"]
        assert 2 <= len(texts) - 2 <= 6 or turns <= 3
        prefixes.append(texts)
    changed = sum(1 for a, b in itertools.pairwise(prefixes) if b[: len(a)] != a)
    assert changed == 4  # once per 4 dropped messages (2 turns); a window sliding per turn changes 8 times


def test_the_callers_words_after_the_last_reply_never_move_the_fold() -> None:
    """The context read ahead after a reply (caller's words still to come) is the prefix of every request
    in the next turn, however many messages a hesitation splits that turn into."""
    opt = ContextOptions(recent_turns=6, drop_step=2)
    ahead = _ctx(3)
    ahead.add_message(role="user", content="")
    prefix = [m.text_content for m in bound_context(ahead, "INSTR", opt).items if m.type == "message"][:-1]
    turn = _ctx(3)
    for part in ("first part", "second part", "third part"):
        turn.add_message(role="user", content=part)
        if part == "second part":  # the agent answered too soon and the caller cut it short
            turn.add_message(role="assistant", content="Sure, I can", interrupted=True)
        texts = [m.text_content for m in bound_context(turn, "INSTR", opt).items if m.type == "message"]
        assert texts[: len(prefix)] == prefix


def test_character_budget_applies() -> None:
    ctx = llm.ChatContext()
    for i in range(6):
        ctx.add_message(role="user", content=("x" * 400) + str(i))
    out = bound_context(ctx, "INSTR", ContextOptions(recent_turns=6, max_chars=1000))
    verbatim = [m for m in out.items if m.type == "message" and m.role == "user"]
    assert 1 <= len(verbatim) <= 3


async def test_reply_without_a_full_stop_ends_at_the_word_budget() -> None:
    parts = ["Sure", " one two, three", " four five six seven", " eight nine ten eleven"]
    out = "".join([t async for t in limit_reply(_gen(parts), 3, max_words=7)])  # type: ignore[misc]
    assert out == "Sure one two, three four five six"
