"""Language-model end-of-turn score: how likely a small chat model thinks the caller's sentence is over.

Why: the word tables (text_cues.py) only know closed word classes, and the audio model cannot hear a
hesitation in synthetic or noisy speech. A language model reads any phrasing. LiveKit's own text turn
detector is a fine-tuned SmolLM2-135M; this is the zero-shot form of the same idea, served by the llama.cpp
server Parley already embeds (worker/llm_server.py) or by any llama.cpp-compatible `/completion` endpoint
(the worker's `eot_lm_url` option).

The transcript, lower-cased and without punctuation (the recogniser's full stop is what we want to predict,
not read), goes after `<|im_start|>user\\n`; the score is the probability that the next token ends the
sentence (`.`, `?`, `!`, `<|im_end|>`), read from `n_probs`. The agent's last line, when there is one, goes
before it as the assistant's message: a caller's words are an answer to it, and "Tuesday or" after "Which
day suits you?" reads as unfinished where "Tuesday or Wednesday" reads as a whole answer (LiveKit's own
detector reads the chat context too). The system prefix and the agent's line stay the same through a turn,
so llama.cpp's prompt cache reads only the transcript.

The scorer is asked on every interim and preflight transcript (`prefetch`), so the answer for the final text
is usually cached by the time the VAD ends the speech; `wait` gives up at a deadline and the endpoint policy
then decides without it. The math that turns the score into log-odds lives in endpoint_policy.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import urllib.error
import urllib.request
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("parley.turns")

END_TOKENS: frozenset[str] = frozenset({".", "?", "!", "<|im_end|>", "...", "?!", "!!", "??", ".\n"})
"""Next tokens that end the caller's sentence (SmolLM2's tokenizer; stripped of spaces before matching)."""

_KEEP = re.compile(r"[^\w\s'’-]", re.UNICODE)
_SPACES = re.compile(r"\s+")


class LmEotError(RuntimeError):
    """The scorer's server answered something we cannot read (one line, no transcript in it)."""


@dataclass(frozen=True)
class LmEotOptions:
    url: str
    """Base URL of a llama.cpp-compatible server (`http://127.0.0.1:PORT`; a trailing `/v1` is dropped)."""
    system_prompt: str = "You are a helpful assistant."
    max_words: int = 32
    """Only the transcript's last words are read: the end of a turn is decided by its last clause, and a
    short prompt keeps each query ~20-40 tokens."""
    context_words: int = 24
    """At most this many words of the agent's last line (its last sentences: where its question is);
    0 = the caller's words alone."""
    n_probs: int = 64
    """How many of the most likely next tokens the server returns; end tokens outside them count as the
    least likely of them (an upper bound, so a missing token never reads as certainty of more to come)."""
    request_timeout_s: float = 2.0
    """HTTP timeout of one query (the caller never waits this long: see `deadline_s`)."""
    deadline_s: float = 0.12
    """How long a decision waits for an answer that is not cached yet; past it the policy goes without."""
    cache_size: int = 512
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Added to every request (e.g. `id_slot` to keep the scorer off the call slots)."""
    read_interims: bool = True
    """Score interim transcripts too, not only the preflight and final ones (see `ParleyTurnDetector`)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"eot LM url must start with http:// or https://, got {self.url!r}")
        if not 0.0 <= self.deadline_s <= 2.0:
            raise ValueError("eot LM deadline_s must be within [0, 2] seconds")
        if self.max_words < 1 or self.n_probs < 1 or self.cache_size < 1:
            raise ValueError("eot LM max_words, n_probs and cache_size must be positive")
        if self.context_words < 0:
            raise ValueError("eot LM context_words must be 0 or more")

    @property
    def base(self) -> str:
        base = self.url.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base


def normalise(text: str, max_words: int = 32) -> str:
    """Lower-case, punctuation out (apostrophes and in-word hyphens kept), the last `max_words` words."""
    cleaned = _KEEP.sub(" ", text.lower().replace("’", "'"))
    words = [w.strip("-") for w in _SPACES.split(cleaned) if w.strip("-")]
    return " ".join(words[-max_words:])


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CHATML = re.compile(r"<\|[^|>]*\|>")


def agent_context(line: str, max_words: int = 24) -> str:
    """The end of the agent's last line, whole sentences where they fit in `max_words` (its question is
    usually last), else its last `max_words` words; ChatML markers removed (the line is model output)."""
    if max_words <= 0:
        return ""
    sentences = [s for s in _SENTENCE_END.split(_SPACES.sub(" ", _CHATML.sub(" ", line)).strip()) if s]
    kept: list[str] = []
    count = 0
    for sentence in reversed(sentences):
        n = len(sentence.split())
        if kept and count + n > max_words:
            break
        kept.insert(0, sentence)
        count += n
    words = " ".join(kept).split()
    return " ".join(words[-max_words:])


@dataclass(frozen=True)
class Query:
    """What one score is asked about: the caller's words (normalised) after the agent's line."""

    words: str
    context: str = ""


def build_prompt(words: str, opts: LmEotOptions, context: str = "") -> str:
    """ChatML as SmolLM2-Instruct was trained on it, cut right after the caller's words."""
    agent = f"<|im_start|>assistant\n{context}<|im_end|>\n" if context else ""
    return f"<|im_start|>system\n{opts.system_prompt}<|im_end|>\n{agent}<|im_start|>user\n{words}"


def request_body(query: Query, opts: LmEotOptions) -> dict[str, Any]:
    return {
        "prompt": build_prompt(query.words, opts, query.context),
        "n_predict": 1,
        "n_probs": opts.n_probs,
        "temperature": 0.0,
        "cache_prompt": True,
        **opts.extra_body,
    }


def end_probability(reply: dict[str, Any]) -> float:
    """P(next token ends the sentence) from a llama.cpp `/completion` reply with `n_probs`.

    Reads `completion_probabilities[0].top_logprobs` (llama.cpp since 2025) or the older `probs` form."""
    try:
        first = reply["completion_probabilities"][0]
        if "top_logprobs" in first:
            cands = [(str(c["token"]), math.exp(float(c["logprob"]))) for c in first["top_logprobs"]]
        else:
            cands = [(str(c["tok_str"]), float(c["prob"])) for c in first["probs"]]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise LmEotError(f"eot LM reply has no next-token probabilities ({type(e).__name__}: {e})") from e
    if not cands:
        raise LmEotError("eot LM reply has an empty next-token list")
    found = {tok.strip(" ") for tok, _ in cands}
    p = sum(prob for tok, prob in cands if tok.strip(" ") in END_TOKENS)
    if not found & END_TOKENS:
        p = min(prob for _, prob in cands)  # below every listed token: bounded by the least of them
    return min(1.0, max(1e-6, p))


class LmEotScorer:
    """Cached, deduplicated queries against one llama.cpp server. One per process; shared by calls."""

    def __init__(self, opts: LmEotOptions) -> None:
        self.opts = opts
        self._cache: OrderedDict[Query, float] = OrderedDict()
        self._inflight: dict[Query, asyncio.Future[float | None]] = {}
        self._asked_by: dict[Query, str] = {}
        """What started each cached or running query (for `served`)."""
        self.query_ms: list[float] = []
        """Wall time of each query that reached the server (cost accounting, benchmarks)."""
        self.reads: Counter[str] = Counter()
        """Queries started, by what asked for them: interim, preflight, final (prefetches) or decision."""
        self.answers: Counter[str] = Counter()
        """How each decision got its score: cached, joined (a prefetch still running answered in time),
        asked (started at the decision, answered in time) or late (past the deadline; `late_used`: it
        still landed before the turn would have been committed without it, and the decision was made
        again with it; `late_would_hold`: one that came after the turn was handed over and would have
        held it, which is what a longer deadline would buy)."""
        self.served: Counter[str] = Counter()
        """Which reads' scores the decisions used, by what started them (`reads`' keys): the interims'
        are worth their cost only if they show up here."""
        self.failures = 0
        self._warned = False

    # -- cache ---------------------------------------------------------------------------------------------
    def query(self, text: str, agent_line: str = "") -> Query | None:
        """The cache key of `text` said after `agent_line`; None when no words are left to score."""
        words = normalise(text, self.opts.max_words)
        if not words:
            return None
        return Query(words, agent_context(agent_line, self.opts.context_words))

    def cached(self, text: str, agent_line: str = "") -> float | None:
        key = self.query(text, agent_line)
        return self._cache.get(key) if key else None

    def _store(self, key: Query, p: float) -> None:
        self._cache[key] = p
        self._cache.move_to_end(key)
        while len(self._cache) > self.opts.cache_size:
            old, _ = self._cache.popitem(last=False)
            self._asked_by.pop(old, None)

    def _serve(self, key: Query, outcome: str) -> None:
        self.answers[outcome] += 1
        self.served[self._asked_by.get(key, "unknown")] += 1

    # -- async (the worker) --------------------------------------------------------------------------------
    def prefetch(self, text: str, agent_line: str = "", origin: str = "interim") -> bool:
        """Start scoring `text` now (a transcript as it comes) without waiting for it; True when a query
        started (not cached, not already asked). `origin` is what asked, for `reads`."""
        key = self.query(text, agent_line)
        if key is None or key in self._cache or key in self._inflight:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        fut: asyncio.Future[float | None] = loop.create_future()
        self._inflight[key] = fut
        self._asked_by[key] = origin
        self.reads[origin] += 1
        loop.create_task(self._run(key, fut))
        return True

    async def wait(self, text: str, deadline_s: float | None = None, agent_line: str = "") -> float | None:
        """The score of `text` said after `agent_line`, or None when it is not there within the deadline
        (the query goes on and its answer is cached for the next decision about the same words)."""
        key = self.query(text, agent_line)
        if key is None:
            return None
        if key in self._cache:
            self._cache.move_to_end(key)
            self._serve(key, "cached")
            return self._cache[key]
        asked = self.prefetch(text, agent_line, origin="decision")
        fut = self._inflight.get(key)
        if fut is None:
            return None
        timeout = self.opts.deadline_s if deadline_s is None else deadline_s
        try:
            p = await asyncio.wait_for(asyncio.shield(fut), timeout=max(0.0, timeout))
        except TimeoutError:
            self.answers["late"] += 1
            return None
        if p is not None:
            self._serve(key, "asked" if asked else "joined")
        return p

    async def late(
        self, text: str, timeout_s: float, agent_line: str = "", used: bool = True
    ) -> float | None:
        """The score `wait` gave up on, if it lands within `timeout_s`: a decision that holds the turn
        anyway, or commits it only later, can still use it (counted as `late_used`; `used=False`: only
        looked at afterwards, not counted)."""
        key = self.query(text, agent_line)
        if key is None:
            return None
        p = self._cache.get(key)
        if p is None:
            fut = self._inflight.get(key)
            if fut is None or timeout_s <= 0.0:
                return None
            try:
                p = await asyncio.wait_for(asyncio.shield(fut), timeout=timeout_s)
            except TimeoutError:
                return None
        if p is not None and used:
            self._serve(key, "late_used")
        return p

    def usage(self) -> dict[str, dict[str, int]]:
        """`reads`, `answers` and `served` so far (logged when a call ends: what the scorer cost, how
        often a decision went without it)."""
        return {"reads": dict(self.reads), "answers": dict(self.answers), "served": dict(self.served)}

    def warm(self, agent_line: str) -> None:
        """Have the server read the agent's new line now, before the caller's first words are scored:
        llama.cpp keeps a prompt's prefix, so each query of the turn then reads only the caller's words (a
        cold line costs ~70 ms more; benchmarks.turns' query p95)."""
        context = agent_context(agent_line, self.opts.context_words)
        if not context:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.create_task(self._warm(context))

    async def _warm(self, context: str) -> None:
        try:
            await self._query_async(Query("", context), record=False)
        except Exception as e:  # as for a query: never break a call
            self._failed(e)

    async def _run(self, key: Query, fut: asyncio.Future[float | None]) -> None:
        p: float | None = None
        try:
            p = await self._query_async(key)
            self._store(key, p)
        except Exception as e:  # the server, aiohttp's ClientError family, a bad reply: never break a call
            self._asked_by.pop(key, None)
            self._failed(e)
        finally:
            self._inflight.pop(key, None)
            if not fut.done():
                fut.set_result(p)

    async def _query_async(self, query: Query, record: bool = True) -> float:
        import aiohttp

        # one short-lived session per query: the scorer is shared by the calls of a process and must not
        # hold a connection pool bound to one event loop (a loopback connect costs well under a millisecond)
        start = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=self.opts.request_timeout_s)
        url = f"{self.opts.base}/completion"
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json=request_body(query, self.opts)) as r,
        ):
            if r.status != 200:
                raise LmEotError(f"eot LM server answered HTTP {r.status}")
            reply = await r.json(content_type=None)
        if record:
            self.query_ms.append((time.perf_counter() - start) * 1000)
        return end_probability(reply)

    def _failed(self, e: BaseException) -> None:
        self.failures += 1
        if not self._warned:  # one line per process, then quiet: the policy works without the score
            self._warned = True
            logger.warning(
                "end-of-turn LM unavailable; deciding without it",
                extra={"url": self.opts.base, "error": f"{type(e).__name__}: {str(e)[:160]}"},
            )

    async def aclose(self) -> None:
        """Wait for the queries still in flight (nothing else is held open)."""
        if self._inflight:
            await asyncio.gather(*self._inflight.values(), return_exceptions=True)

    # -- sync (benchmarks, scripts) ------------------------------------------------------------------------
    def score_sync(self, text: str, agent_line: str = "") -> float | None:
        """Blocking form for offline tools; cached like the async path. None when the server fails."""
        key = self.query(text, agent_line)
        if key is None:
            return None
        if key in self._cache:
            return self._cache[key]
        body = json.dumps(request_body(key, self.opts)).encode()
        req = urllib.request.Request(
            f"{self.opts.base}/completion", body, {"Content-Type": "application/json"}
        )
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=self.opts.request_timeout_s) as r:
                reply = json.loads(r.read())
            p = end_probability(reply)
        except (LmEotError, OSError, ValueError) as e:
            self._failed(e)
            return None
        self.query_ms.append((time.perf_counter() - start) * 1000)
        self._store(key, p)
        return p
