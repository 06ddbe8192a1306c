"""The shared SNAC batcher: fires at once when idle, else waits for the earliest deadline; no fixed sleep."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np

from plugins.orpheus.engine.batcher import BatcherOptions, DecodeBatcher, DecodeItem


class Source:
    def __init__(self) -> None:
        self.ready: list[DecodeItem] = []
        self.next_due = float("inf")
        self.delivered: list[tuple[list[DecodeItem], list]] = []  # type: ignore[type-arg]
        self.got = asyncio.Event()

    def collect(self, now: float, est: float, max_items: int):  # type: ignore[no-untyped-def]
        if self.ready:
            items, self.ready = self.ready[:max_items], self.ready[max_items:]
            return items, float("inf")
        if self.next_due <= now:
            self.next_due = float("inf")
            return [DecodeItem("deadline", np.zeros((1, 7), dtype=np.int16), now)], float("inf")
        return [], self.next_due

    def deliver(self, items, results) -> None:  # type: ignore[no-untyped-def]
        self.delivered.append((items, results))
        self.got.set()


class Decoder:
    def __init__(self, gate: threading.Event | None = None, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.gate = gate
        self.fail = fail

    def warm_up(self) -> None:
        return None

    def decode(self, windows):  # type: ignore[no-untyped-def]
        self.calls.append(len(windows))
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail:
            raise RuntimeError("decoder broke")
        return [w.astype(np.int16).repeat(2048) for w in windows]


def item(key: str) -> DecodeItem:
    return DecodeItem(key, np.zeros((1, 7), dtype=np.int16), 0.0)


async def test_fires_at_once_when_idle_and_work_is_due() -> None:
    src, dec = Source(), Decoder()
    b = DecodeBatcher(dec, src)
    b.start()
    src.ready = [item("a"), item("b")]
    b.notify()
    await asyncio.wait_for(src.got.wait(), 5)
    assert dec.calls == [2] and [i.key for i in src.delivered[0][0]] == ["a", "b"]
    await b.close()


async def test_waits_for_the_earliest_deadline_not_a_fixed_tick() -> None:
    src, dec = Source(), Decoder()
    b = DecodeBatcher(dec, src)
    src.next_due = time.monotonic() + 0.3
    b.start()
    for _ in range(5):
        await asyncio.sleep(0)
    assert dec.calls == [], "nothing is due yet"
    await asyncio.wait_for(src.got.wait(), 5)
    assert dec.calls == [1] and src.delivered[0][0][0].key == "deadline"
    await b.close()


async def test_collects_everything_due_while_the_decoder_is_busy() -> None:
    gate = threading.Event()
    src, dec = Source(), Decoder(gate)
    b = DecodeBatcher(dec, src)
    b.start()
    src.ready = [item("first")]
    b.notify()
    while not dec.calls:
        await asyncio.sleep(0.005)
    src.ready = [item(k) for k in "xyz"]  # arrive while the first batch decodes
    b.notify()
    gate.set()
    while len(src.delivered) < 2:
        await asyncio.wait_for(src.got.wait(), 5)
        src.got.clear()
    assert dec.calls == [1, 3]
    assert b.batches == 2 and b.items == 4
    await b.close()


async def test_a_failing_decode_fails_only_its_items_and_the_batcher_goes_on() -> None:
    src, dec = Source(), Decoder(fail=True)
    b = DecodeBatcher(dec, src, BatcherOptions(max_batch=2))
    b.start()
    src.ready = [item("a"), item("b"), item("c")]
    b.notify()
    while sum(len(d[0]) for d in src.delivered) < 3:
        await asyncio.wait_for(src.got.wait(), 5)
        src.got.clear()
    assert dec.calls == [2, 1], "max_batch respected, second batch still ran"
    assert all(isinstance(r, Exception) for _, rs in src.delivered for r in rs)
    await b.close()
