"""Slot leases for the embedded LLM: one call per slot, across processes, freed when a holder dies."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from livekit.agents import llm

from worker.llm_slots import SlotPool
from worker.pipeline import Components, call_llm, conversation_prefix, llm_client, load_llm
from worker.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_leases_are_distinct_until_the_pool_is_empty(tmp_path: Path) -> None:
    pool = SlotPool("http://127.0.0.1:8123/v1", 3, root=tmp_path)
    leases = [pool.lease() for _ in range(3)]
    assert [lease.id for lease in leases if lease] == [0, 1, 2]
    assert pool.lease() is None
    leases[1].release()  # type: ignore[union-attr]
    again = pool.lease()
    assert again is not None and again.id == 1
    again.release()
    again.release()  # twice is harmless
    assert not again.held


def test_pools_for_different_servers_do_not_share_slots(tmp_path: Path) -> None:
    a = SlotPool("http://127.0.0.1:8001/v1", 1, root=tmp_path).lease()
    b = SlotPool("http://127.0.0.1:8002/v1", 1, root=tmp_path).lease()
    assert a is not None and b is not None and a.id == b.id == 0


def test_another_process_holding_a_slot_is_respected_and_its_death_frees_it(tmp_path: Path) -> None:
    holder = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from worker.llm_slots import SlotPool
        lease = SlotPool("http://127.0.0.1:9000/v1", 2, root=Path({str(tmp_path)!r})).lease()
        print(lease.id, flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "0"
        pool = SlotPool("http://127.0.0.1:9000/v1", 2, root=tmp_path)
        mine = pool.lease()
        assert mine is not None and mine.id == 1
        assert pool.lease() is None
        proc.kill()  # a crashed job process: the kernel drops its lock
        proc.wait(10)
        freed = pool.lease()
        assert freed is not None and freed.id == 0
    finally:
        proc.kill()


def test_embedded_llm_threads_leave_cores_for_the_rest() -> None:
    from worker.llm_server import auto_batch_threads, auto_threads

    assert [auto_threads(c) for c in (1, 2, 4, 8, 16, 64)] == [1, 1, 1, 3, 4, 4]
    assert [auto_batch_threads(c) for c in (1, 2, 4, 8, 16, 64)] == [1, 1, 3, 4, 4, 4]


def test_a_pool_needs_a_slot(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        SlotPool("http://127.0.0.1:1/v1", 0, root=tmp_path)


async def _ask(model: Any, text: str, prefix: list[dict[str, str]] | None = None) -> int:
    """One streamed turn; how many prompt tokens the server took from its cache."""
    ctx = llm.ChatContext()
    for m in prefix or [{"role": "system", "content": "You are a terse assistant."}]:
        ctx.add_message(role=m["role"], content=m["content"])  # type: ignore[arg-type]
    ctx.add_message(role="user", content=text)
    cached = 0
    async with model.chat(chat_ctx=ctx) as stream:
        async for chunk in stream:
            if chunk.usage is not None:
                cached = chunk.usage.prompt_cached_tokens
    return cached


def _llm_only(settings: Any, base_url: str, slots: SlotPool) -> Components:
    """Components with only the LLM side (what these tests exercise)."""
    return Components(
        vads={},
        eot_model=None,
        stt=None,  # type: ignore[arg-type]
        tts=None,  # type: ignore[arg-type]
        llm=load_llm(settings, base_url),
        llm_base_url=base_url,
        llm_client=llm_client(settings, base_url),
        llm_slots=slots,
    )


def _busy_slots(base_url: str) -> set[int]:
    """Slots of the llama.cpp server that have served a task."""
    base = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{base}/slots", timeout=5) as r:
        return {s["id"] for s in json.loads(r.read()) if s.get("id_task") is not None}


@pytest.mark.slow
async def test_each_call_gets_its_own_slot_of_the_real_embedded_llm(tmp_path: Path) -> None:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions

    settings = load_settings()
    with EmbeddedLLM(EmbeddedLLMOptions(n_parallel=3)) as server:
        comp = _llm_only(settings, server.base_url, SlotPool(server.base_url, 2, root=tmp_path))
        hooks_a: list[Any] = []
        hooks_b: list[Any] = []
        call_a = call_llm(settings, comp, hooks_a)
        call_b = call_llm(settings, comp, hooks_b)
        assert call_llm(settings, comp, []) is comp.llm  # a third call finds the pool empty: unpinned
        await _ask(call_a, "Name a colour.")
        await _ask(call_b, "Name a fruit.")
        assert _busy_slots(server.base_url) == {0, 1}
        # the second turn of call A finds its instructions still cached in its own slot
        assert await _ask(call_a, "Name a colour.") > 0
        for hook in hooks_a:
            hook(None)  # the session closed
        again: list[Any] = []
        assert call_llm(settings, comp, again) is not comp.llm and len(again) == 1


@pytest.mark.slow
async def test_warm_slots_hold_the_conversation_prefix_before_the_first_call() -> None:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions

    settings = load_settings()
    prefix = conversation_prefix(settings)
    with EmbeddedLLM(EmbeddedLLMOptions(n_parallel=2)) as server:
        assert server.warm(prefix) == 2
        pool = SlotPool(server.base_url, 2)  # the real lock directory, as the worker uses it
        comp = _llm_only(settings, server.base_url, pool)
        first_call = call_llm(settings, comp, [])
        # instructions + greeting came from the cache: only the caller's words were read
        assert await _ask(first_call, "I'd like to book a cleaning.", prefix) >= 100
    assert not pool.dir.exists()  # the server's slot locks went with it
