import itertools
from collections.abc import AsyncIterator

from livekit.agents import llm

from worker.agent import count_sentence_ends, limit_reply
from worker.context import ContextOptions, bound_context, join_cut_in


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


def _texts(items: list[llm.ChatItem]) -> list[tuple[str, str]]:
    return [(m.role, m.text_content or "") for m in items if m.type == "message"]


def test_a_reply_cut_in_at_a_pause_joins_the_callers_words_around_it() -> None:
    """ "My sister can bring me over on," [agent: "Sounds good" — cut] "the ninth of June.": the LLM
    answers the whole sentence, not its last half."""
    ctx = _ctx(1)
    ctx.add_message(role="user", content="My sister can bring me over on,")
    ctx.add_message(role="assistant", content="Sounds good", interrupted=True)
    ctx.add_message(role="user", content="the ninth of June.")
    out = bound_context(ctx, "INSTR", ContextOptions())
    assert _texts(out.items)[-2:] == [
        ("assistant", "reply number 0"),
        ("user", "My sister can bring me over on, the ninth of June."),
    ]
    assert len(ctx.items) == 6  # the call's own history is untouched


def test_only_a_barely_heard_cut_reply_is_joined_over() -> None:
    def turn(reply: str, interrupted: bool) -> list[llm.ChatItem]:
        ctx = llm.ChatContext()
        ctx.add_message(role="user", content="first")
        ctx.add_message(role="assistant", content=reply, interrupted=interrupted)
        ctx.add_message(role="user", content="second")
        return ctx.items

    joined = [("user", "first second")]
    assert _texts(join_cut_in(turn("Sure, I can", True), 8)) == joined
    long_reply = "Your visit is booked for the ninth and please bring"  # 10 words heard: an answer
    assert len(_texts(join_cut_in(turn(long_reply, True), 8))) == 3
    assert len(_texts(join_cut_in(turn("Sure, I can", False), 8))) == 3  # a whole reply
    assert len(_texts(join_cut_in(turn("Sure, I can", True), 0))) == 3  # off


def test_several_cut_ins_in_one_turn_join_into_one_message() -> None:
    ctx = llm.ChatContext()
    ctx.add_message(role="assistant", content="How can I help?")
    for i, part in enumerate(("my number is", "555", "0123.")):
        if i:
            ctx.add_message(role="assistant", content="Thanks", interrupted=True)
        ctx.add_message(role="user", content=part)
    assert _texts(join_cut_in(ctx.items, 8)) == [
        ("assistant", "How can I help?"),
        ("user", "my number is 555 0123."),
    ]


def test_a_joined_turn_stays_joined_so_the_next_turn_reads_from_the_cache() -> None:
    """After the agent answered the joined turn, the next turn's context starts with the same messages:
    the LLM server re-reads only what is new."""
    ctx = _ctx(1)
    ctx.add_message(role="user", content="My sister can bring me over on,")
    ctx.add_message(role="assistant", content="Sounds good", interrupted=True)
    ctx.add_message(role="user", content="the ninth of June.")
    answered = _texts(bound_context(ctx, "INSTR", ContextOptions()).items)
    ctx.add_message(role="assistant", content="The ninth of June, noted.")
    ctx.add_message(role="user", content="Thanks.")
    later = _texts(bound_context(ctx, "INSTR", ContextOptions()).items)
    assert later[: len(answered)] == answered
    assert later[len(answered) :] == [("assistant", "The ninth of June, noted."), ("user", "Thanks.")]


def test_a_cut_reply_that_called_a_tool_or_a_pending_reply_stays() -> None:
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="book it")
    ctx.add_message(role="assistant", content="Booking", interrupted=True)
    ctx.insert(llm.FunctionCall(call_id="c1", name="book", arguments="{}"))
    ctx.insert(llm.FunctionCallOutput(call_id="c1", name="book", output="ok", is_error=False))
    ctx.add_message(role="user", content="for Tuesday")
    assert len(join_cut_in(ctx.items, 8)) == len(ctx.items)
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="first")
    ctx.add_message(role="assistant", content="Sure", interrupted=True)
    assert join_cut_in(ctx.items, 8) == ctx.items  # the caller has not spoken again: nothing to answer


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
