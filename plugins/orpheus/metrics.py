"""Prometheus metrics of one engine process (own registry, so tests can run several engines)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from plugins.orpheus.engine.core import OrpheusEngine

_MS = (10, 25, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 2000, 5000)


class _EngineCollector(Collector):
    """Values read from the engine at scrape time: no per-token work."""

    def __init__(self, engine: OrpheusEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Any]:
        e = self.engine
        yield CounterMetricFamily(
            "orpheus_audio_tokens", "Audio tokens received from the generator", e.tokens_total
        )
        yield CounterMetricFamily("orpheus_frames", "SNAC frames assembled", e.frames_total)
        yield GaugeMetricFamily("orpheus_active_streams", "Streams open now", len(e.streams))
        yield GaugeMetricFamily("orpheus_max_streams", "Admission limit", e.options.max_streams)
        yield GaugeMetricFamily("orpheus_ready", "1 once models are loaded and warm", 1.0 if e.ready else 0.0)
        yield GaugeMetricFamily(
            "orpheus_decode_estimate_seconds", "Learnt SNAC batch time", e._batcher.estimate_s
        )


class EngineMetrics:
    def __init__(self, engine: OrpheusEngine) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(engine))
        r = self.registry
        self.ttfb = Histogram(
            "orpheus_ttfb_ms", "Text in → first audio out, per stream", buckets=_MS, registry=r
        )
        self.rtf = Histogram(
            "orpheus_rtf",
            "Synthesis time / audio time, per stream",
            buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 4),
            registry=r,
        )
        self.batch_size = Histogram(
            "orpheus_snac_batch_size",
            "Windows per SNAC batch",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=r,
        )
        self.decode_ms = Histogram("orpheus_snac_batch_ms", "SNAC batch decode time", buckets=_MS, registry=r)
        self.queue_wait_ms = Histogram(
            "orpheus_snac_queue_wait_ms",
            "Due window → decode start (worst in batch)",
            buckets=_MS,
            registry=r,
        )
        self.streams = Counter("orpheus_streams", "Streams by outcome", ["outcome"], registry=r)
        self.refused = Counter("orpheus_refused", "Streams refused at admission", ["code"], registry=r)
        self.connections = Gauge("orpheus_connections", "Client connections open", registry=r)
        engine.observe_batch = self._batch
        engine.on_stream_done = self._done

    def _batch(self, size: int, seconds: float, wait: float) -> None:
        self.batch_size.observe(size)
        self.decode_ms.observe(seconds * 1000)
        self.queue_wait_ms.observe(wait * 1000)

    def _done(self, stream: Any, event: dict[str, Any]) -> None:
        outcome = event.get("reason", event.get("code", "error")) if event["type"] == "done" else "error"
        self.streams.labels(outcome).inc()
        if event.get("rtf") is not None:
            self.rtf.observe(event["rtf"])

    def first_audio(self, ttfb_ms: float) -> None:
        self.ttfb.observe(ttfb_ms)
