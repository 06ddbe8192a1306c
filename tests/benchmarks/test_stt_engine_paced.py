"""benchmarks.stt_engine's paced load (`--rate-per-stream`) against the real host speech engine on the CPU:
the load offered is streams × rate whatever the engine does, and the ready file says when it began."""

from __future__ import annotations

from pathlib import Path

from benchmarks.stt_engine import SttBenchOptions, run


def test_paced_streams_offer_a_fixed_load_and_write_the_ready_file(tmp_path: Path) -> None:
    ready = tmp_path / "load.ready"
    o = SttBenchOptions(
        streams=(2,),
        seconds=3.0,
        device="cpu",
        backend="ctranslate2",
        workers=1,
        rate_per_stream=2.0,
        ready_file=str(ready),
    )
    report = run(o)
    row = report["by_streams"][0]
    assert ready.read_text().startswith("2 streams")
    assert report["rate_per_stream"] == 2.0 and row["offered_per_s"] == 4.0
    assert row["errors"] == 0
    # paced, not closed loop: about 4 decodes a second over 3 s (Poisson, so a wide band), never a flood
    assert 0.5 <= row["decodes_per_s"] <= 8.0
    assert row["latency_ms"]["p50"] is not None
