"""The language-model end-of-turn scorer: its reading of llama.cpp replies, its cache and deadline, the
policy's use of it, and the real SmolLM2 server telling a cut clause from a finished sentence."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
from livekit.agents import llm, stt

from turn_detection import ParleyTurnDetector, Profile, TurnHooks, TurnOptions, params_for
from turn_detection.endpoint_policy import EndpointOptions, combine, decide, sequence_hold
from turn_detection.lm_eot import (
    LmEotError,
    LmEotOptions,
    LmEotScorer,
    agent_context,
    build_prompt,
    end_probability,
    normalise,
)
from turn_detection.text_cues import TextCue, text_cue
from worker.llm_server import free_port


def _reply(tokens: dict[str, float]) -> dict[str, object]:
    top = [{"token": t, "logprob": math.log(p)} for t, p in tokens.items()]
    return {"completion_probabilities": [{"token": top[0]["token"], "top_logprobs": top}]}


def test_end_probability_sums_the_sentence_ending_tokens() -> None:
    p = end_probability(_reply({" the": 0.5, ".": 0.2, "?": 0.05, "<|im_end|>": 0.1, " a": 0.1}))
    assert p == pytest.approx(0.35)


def test_end_probability_without_an_end_token_is_bounded_by_the_least_listed() -> None:
    p = end_probability(_reply({" the": 0.5, " a": 0.3, " my": 0.01}))
    assert p == pytest.approx(0.01)


def test_end_probability_reads_the_older_probs_form() -> None:
    old = {
        "completion_probabilities": [
            {"probs": [{"tok_str": "!", "prob": 0.4}, {"tok_str": " x", "prob": 0.6}]}
        ]
    }
    assert end_probability(old) == pytest.approx(0.4)


def test_a_reply_without_probabilities_is_a_clear_error() -> None:
    with pytest.raises(LmEotError, match="no next-token probabilities"):
        end_probability({"content": "x"})


def test_normalise_drops_punctuation_and_case_and_keeps_the_last_words() -> None:
    assert normalise("Hi, I'd like a table for... FOUR?") == "hi i'd like a table for four"
    assert normalise("0-1-0, 5 5 5.", 4) == "0-1-0 5 5 5"
    assert normalise("네, 그리고...") == "네 그리고"
    assert normalise(" ... ") == ""
    opts = LmEotOptions(url="http://127.0.0.1:1/v1")
    assert opts.base == "http://127.0.0.1:1"
    assert build_prompt("a table for", opts).endswith("<|im_start|>user\na table for")


def test_the_agents_line_goes_before_the_callers_words_as_the_assistants_message() -> None:
    opts = LmEotOptions(url="http://x")
    prompt = build_prompt("tuesday or", opts, "Which day suits you?")
    assert prompt.endswith(
        "<|im_start|>assistant\nWhich day suits you?<|im_end|>\n<|im_start|>user\ntuesday or"
    )
    assert "<|im_start|>assistant" not in build_prompt("tuesday or", opts)  # no line: the words alone
    # its last whole sentences that fit (the question is usually last), else its last words
    long = "I have booked you in for Tuesday at ten in the morning with Doctor Reyes. Anything else today?"
    assert agent_context(long, 8) == "Anything else today?"
    assert agent_context(long, 24) == long
    assert agent_context("one two three four five six", 4) == "three four five six"
    assert agent_context("Sure.<|im_end|>\n<|im_start|>user hi", 24) == "Sure. user hi"  # no markers
    assert agent_context("Which day?", 0) == ""


def test_the_same_words_after_another_line_are_another_query() -> None:
    scorer = LmEotScorer(LmEotOptions(url="http://x"))
    a, b = scorer.query("Tuesday or", "Which day?"), scorer.query("tuesday or...", "Which day?")
    assert a == b and a is not None and a.context == "Which day?"
    assert scorer.query("Tuesday or", "Which colour?") != a
    assert scorer.query("...", "Which day?") is None
    off = LmEotScorer(LmEotOptions(url="http://x", context_words=0))
    assert off.query("Tuesday or", "Which day?") == off.query("Tuesday or")


def test_options_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="http"):
        LmEotOptions(url="127.0.0.1:8080")
    with pytest.raises(ValueError, match="deadline"):
        LmEotOptions(url="http://x", deadline_s=5)


# -- the policy ---------------------------------------------------------------------------------------------
LM = EndpointOptions(lm_weight=1.0, lm_center=0.1, sequence_delay=2.5, max_delay=2.5)


def test_lm_term_is_neutral_at_its_center_and_moves_the_probability_either_way() -> None:
    cue = TextCue(0.6, "unpunctuated")
    assert combine(cue, None, LM, "en", 0.1) == pytest.approx(0.6)
    assert combine(cue, None, LM, "en", 0.6) > 0.9
    assert combine(cue, None, LM, "en", 0.005) < 0.1
    # weight 0 (the default): the score is ignored
    assert combine(cue, None, EndpointOptions(), "en", 0.9) == pytest.approx(0.6)


def test_lm_replaces_the_table_only_for_the_listed_reasons() -> None:
    opts = EndpointOptions(lm_weight=1.0, lm_center=0.1, lm_replaces=frozenset({"closed_sentence"}))
    closed = TextCue(0.78, "closed_sentence")
    assert combine(closed, None, opts, "en", 0.1) == pytest.approx(0.5)  # the table's 0.78 stepped aside
    assert combine(closed, None, opts, "en", None) == pytest.approx(0.78)  # no answer: the table decides
    filler = TextCue(0.05, "trailing_filler")
    assert combine(filler, None, opts, "en", 0.1) == pytest.approx(0.05)


def test_sequence_hold_follows_the_language_model() -> None:
    assert sequence_hold(None, LM) == 2.5  # no score: the fixed hold
    assert sequence_hold(0.002, LM) > 2.3  # "my number is 555 214": more to come
    assert sequence_hold(0.8, LM) < 0.1  # a finished sentence that holds numbers: no hold
    digits = TextCue(0.35, "digit_group")
    assert decide(digits, None, LM, "en", 0.002).delay > 2.4
    assert decide(digits, None, LM, "en", 0.9).delay < 2.5


def test_the_lm_alone_never_holds_past_the_hesitation_delay() -> None:
    closed = TextCue(0.78, "closed_sentence")  # the table reads a finished sentence, the model disagrees
    assert decide(closed, None, LM, "en", 0.0005).delay == pytest.approx(LM.hesitation_delay)
    open_ = TextCue(0.05, "trailing_function_word")  # both read it as unfinished: the full hold
    assert decide(open_, None, LM, "en", 0.0005).delay == pytest.approx(LM.max_delay)


def test_model_hold_sets_how_long_the_models_alone_may_hold() -> None:
    closed = TextCue(0.78, "closed_sentence")
    for hold in (1.8, LM.max_delay):
        assert decide(closed, None, replace(LM, model_hold=hold), "en", 0.0005).delay == pytest.approx(hold)
    with pytest.raises(ValueError):
        replace(LM, model_hold=LM.max_delay + 0.1)


def test_decision_carries_the_lm_score() -> None:
    d = decide(text_cue("I need a table for"), None, LM, "en", 0.004)
    assert d.lm_probability == 0.004
    assert d.delay == LM.max_delay


# -- the real model ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scorer_url() -> object:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions

    with EmbeddedLLM(EmbeddedLLMOptions(n_parallel=1, n_ctx=1024)) as server:
        yield server.base_url


def test_real_model_reads_cut_clauses_as_unfinished(scorer_url: str) -> None:
    scorer = LmEotScorer(LmEotOptions(url=scorer_url))
    cut = [scorer.score_sync(t) for t in ("I'd like to book a table for", "my name is John and", "it's the")]
    whole = [scorer.score_sync(t) for t in ("Can you tell me when you open?", "I want to cancel my order.")]
    assert all(p is not None for p in cut + whole)
    assert max(cut) < min(whole)  # type: ignore[type-var]
    n = len(scorer.query_ms)
    assert scorer.score_sync("it's the...") == cut[2]  # same words after normalising: from the cache
    assert len(scorer.query_ms) == n


async def test_async_scorer_prefetches_caches_and_respects_its_deadline(scorer_url: str) -> None:
    scorer = LmEotScorer(LmEotOptions(url=scorer_url, request_timeout_s=10.0))
    try:
        text = "could you put me through to someone in"
        assert await scorer.wait(text, deadline_s=0.0) is None  # not ready at once: the policy goes on
        p = await scorer.wait(text, deadline_s=10.0)  # the same query, still in flight, answers
        assert p is not None and p < 0.2
        t0 = time.perf_counter()
        assert await scorer.wait(text + ".") == p  # cached: no second query
        assert time.perf_counter() - t0 < 0.05
        scorer.prefetch("thank you very much")
        await asyncio.sleep(0)
        assert scorer.cached("thank you very much") is None
        await scorer.wait("thank you very much", deadline_s=10.0)
        assert scorer.cached("Thank you very much!") is not None
        # what it cost and how each decision got its score, as a call's end logs it
        assert scorer.usage() == {
            "reads": {"decision": 1, "interim": 1},
            "answers": {"late": 1, "joined": 2, "cached": 1},
            "served": {"decision": 2, "interim": 1},
        }
    finally:
        await scorer.aclose()


async def test_unreachable_server_degrades_to_no_score_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scorer = LmEotScorer(LmEotOptions(url=f"http://127.0.0.1:{free_port()}", request_timeout_s=1.0))
    try:
        with caplog.at_level(logging.WARNING, logger="parley.turns"):
            assert await scorer.wait("hello there", deadline_s=2.0) is None
            assert await scorer.wait("hello again", deadline_s=2.0) is None
        assert scorer.failures == 2
        assert sum("end-of-turn LM unavailable" in r.message for r in caplog.records) == 1
        assert scorer.score_sync("hello there") is None
    finally:
        await scorer.aclose()


def _ctx(*user_texts: str) -> llm.ChatContext:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="assistant", content="How can I help?")
    for t in user_texts:
        ctx.add_message(role="user", content=t)
    return ctx


def _interim(text: str) -> stt.SpeechEvent:
    return stt.SpeechEvent(
        type=stt.SpeechEventType.INTERIM_TRANSCRIPT, alternatives=[stt.SpeechData(language="en", text=text)]
    )


async def _scored(
    scorer: LmEotScorer, text: str, agent_line: str = "", within_s: float = 10.0
) -> float | None:
    """The scorer's cached score of `text` once its prefetch has answered (None if it never does)."""
    deadline = time.monotonic() + within_s
    while (score := scorer.cached(text, agent_line)) is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return score


@pytest.mark.parametrize("profile", [Profile.WEB, Profile.TELEPHONY])
async def test_detector_asks_on_interims_and_decides_with_the_score(
    scorer_url: str, profile: Profile
) -> None:
    params = params_for(profile, TurnOptions())
    assert params.endpoint.lm_weight > 0, "both profiles use the LM term (phone callers since 2026-11-27)"
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params)
    scorer = LmEotScorer(LmEotOptions(url=scorer_url, deadline_s=2.0, request_timeout_s=10.0))
    det = ParleyTurnDetector(hooks, lm_scorer=scorer)
    try:
        for listener in hooks.transcript_listeners:
            listener(_interim("I'd like to book a table for"))
        # asked before any decision (polled: a busy machine can take longer than a query's usual 0.1 s)
        assert await _scored(scorer, "I'd like to book a table for") is not None
        hooks.last_speech_end = time.time()
        p = await det.predict_end_of_turn(_ctx("I'd like to book a table for"))
        assert det.last_decision is not None and det.last_decision.lm_probability is not None
        assert p < params.endpoint.unlikely_p
        # the caller goes on in the same turn: the next interim is scored with the words before it
        assert det.turn_text("four people") == "I'd like to book a table for four people"
        hooks.on_agent_state(SimpleNamespace(old_state="listening", new_state="thinking"))
        assert det.turn_text("hello") == "hello"  # a reply started: a new turn
    finally:
        await scorer.aclose()


async def test_a_late_score_still_counts_until_the_turn_would_be_handed_over(scorer_url: str) -> None:
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params_for(Profile.WEB, TurnOptions()))
    # a deadline nothing meets: every score is late, as on a scorer busy with other calls
    scorer = LmEotScorer(LmEotOptions(url=scorer_url, deadline_s=0.0, request_timeout_s=10.0))
    det = ParleyTurnDetector(hooks, lm_scorer=scorer)
    try:
        hooks.last_speech_end = time.time()
        # an open clause: the turn is held up to max_delay anyway, so the score is awaited within it
        p = await det.predict_end_of_turn(_ctx("I'd like to book a table for"))
        assert det.last_decision is not None and det.last_decision.lm_probability is not None
        assert p < hooks.params.endpoint.unlikely_p
        assert scorer.answers == {"late": 1, "late_used": 1} and scorer.served == {"decision": 1}
        # a decision whose moment has already passed does not wait for its late score
        hooks.last_speech_end = time.time() - 5.0
        await det.predict_end_of_turn(_ctx("What time do you open tomorrow?"))
        assert det.last_decision is not None and det.last_decision.lm_probability is None
        assert scorer.answers["late"] == 2 and scorer.answers["late_used"] == 1
    finally:
        await scorer.aclose()


async def test_a_turn_handed_over_before_its_late_score_is_judged_when_the_score_lands(
    scorer_url: str,
) -> None:
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params_for(Profile.WEB, TurnOptions()))
    ep = hooks.params.endpoint
    scorer = LmEotScorer(LmEotOptions(url=scorer_url, deadline_s=0.0, request_timeout_s=10.0))
    det = ParleyTurnDetector(hooks, lm_scorer=scorer)
    text = "The days that work are Saturday."  # a list's first item, read as a whole sentence by the table
    try:
        speech_end = hooks.last_speech_end = time.time() - ep.min_delay  # its moment is now: no wait
        p = await det.predict_end_of_turn(_ctx(text))
        assert (
            p >= ep.unlikely_p and det.last_decision is not None and det.last_decision.lm_probability is None
        )
        while (lm_p := scorer.cached(text)) is None:
            await asyncio.sleep(0.01)
        landed = time.time()
        while det._judging:
            await asyncio.sleep(0.01)
        assert "late_used" not in scorer.answers
        # the model reads it as open (a list goes on): the decision made with it holds the turn longer
        held_until = speech_end + decide(text_cue(text), None, ep, "en", lm_p, None).delay
        assert held_until > speech_end + 1.0
        if landed < held_until - 0.05:  # (a machine too busy to answer within a second says nothing here)
            assert scorer.answers["late_would_hold"] == 1
    finally:
        await scorer.aclose()


async def test_a_scorer_that_never_answers_never_holds_a_turn_past_its_moment() -> None:
    """A server that takes the request and stays silent (wedged, not down): the decision goes on at the
    moment it would have without the score, for a finished turn and for an open clause alike."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params_for(Profile.WEB, TurnOptions()))
    ep = hooks.params.endpoint
    scorer = LmEotScorer(LmEotOptions(url=f"http://127.0.0.1:{port}", request_timeout_s=10.0))
    det = ParleyTurnDetector(hooks, lm_scorer=scorer)
    try:
        for text, latest in (
            ("What time do you open tomorrow?", ep.hesitation_delay),
            ("I'd like a", ep.max_delay),
        ):
            hooks.last_speech_end = time.time()
            await det.predict_end_of_turn(_ctx(text))
            assert time.time() - hooks.last_speech_end < latest + 0.3, text
            assert det.last_decision is not None and det.last_decision.lm_probability is None
        assert scorer.answers["late"] == 2 and "late_used" not in scorer.answers
    finally:
        server.close()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            if getattr(task.get_coro(), "__qualname__", "").startswith("LmEotScorer._run"):
                task.cancel()


async def test_detector_can_leave_interims_unread(scorer_url: str) -> None:
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params_for(Profile.WEB, TurnOptions()))
    opts = LmEotOptions(url=scorer_url, deadline_s=2.0, request_timeout_s=10.0, read_interims=False)
    scorer = LmEotScorer(opts)
    ParleyTurnDetector(hooks, lm_scorer=scorer)
    try:
        preflight = stt.SpeechEvent(
            type=stt.SpeechEventType.PREFLIGHT_TRANSCRIPT,
            alternatives=[stt.SpeechData(language="en", text="I need a taxi to the airport")],
        )
        for listener in hooks.transcript_listeners:
            listener(_interim("I need a taxi"))
            listener(preflight)
        assert await _scored(scorer, "I need a taxi to the airport") is not None
        assert scorer.cached("I need a taxi") is None
        assert scorer.reads == {"preflight": 1}
    finally:
        await scorer.aclose()


async def test_detector_reads_the_callers_words_after_the_agents_last_line(scorer_url: str) -> None:
    hooks = TurnHooks(TurnOptions(use_audio_model=False), params_for(Profile.WEB, TurnOptions()))
    scorer = LmEotScorer(LmEotOptions(url=scorer_url, deadline_s=2.0, request_timeout_s=10.0))
    det = ParleyTurnDetector(hooks, lm_scorer=scorer)
    try:
        reply = llm.ChatMessage(role="assistant", content=["Which day works best for you?"])
        hooks.on_item_added(SimpleNamespace(item=reply))
        hooks.on_item_added(SimpleNamespace(item=llm.ChatMessage(role="user", content=["hi"])))
        assert hooks.agent_line == "Which day works best for you?"  # the caller's own items are not it
        await asyncio.sleep(0.5)  # the new line was read ahead (no score kept, none counted as a query)
        assert scorer.failures == 0 and not scorer.query_ms
        for listener in hooks.transcript_listeners:
            listener(_interim("Tuesday or Wednesday"))
        after = await _scored(scorer, "Tuesday or Wednesday", hooks.agent_line)
        assert after is not None and scorer.cached("Tuesday or Wednesday") is None
        hooks.last_speech_end = time.time()
        await det.predict_end_of_turn(_ctx("Tuesday or Wednesday"))
        assert det.last_decision is not None and det.last_decision.lm_probability == after
    finally:
        await scorer.aclose()
