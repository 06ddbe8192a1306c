"""benchmarks.gpu at tiny shapes on CPU: the same code path as on an H100; checks the JSON contract and that
the values are consistent with each other (not timings)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import gpu


def test_capacity_rule_counts_the_p90_step_snac_at_its_batch_and_the_host() -> None:
    """Synthetic timings: the budget is 12.19 / 1.2 = 10.16 ms per step."""
    budget = gpu.REALTIME_STEP_MS / gpu.HEADROOM
    p90 = {1: 2.0, 64: budget - 1.0, 128: budget - 0.01, 256: budget + 1.0}
    free = {1: 0.0, 64: 0.0}
    assert gpu.streams_realtime(p90, free, 0.0) == 128
    # SNAC: one batch of ⌈b/28⌉ windows per step (64 streams: 3 windows, 128: 5), not b windows / 28
    assert [gpu.snac_batch(b) for b in (1, 28, 29, 64, 128, 256)] == [1, 1, 2, 3, 5, 10]
    snac = {1: 0.5, 2: 0.6, 4: 0.8, 8: 1.2}
    cap, detail = gpu.capacity_rule(p90, snac, 0.0)
    assert cap == 64  # 128 streams fit without SNAC; one 5-window SNAC batch per step takes it over
    assert detail["64"]["snac_ms"] == 0.7 and detail["128"]["snac_ms"] == 0.9
    assert detail["64"]["total_ms"] == round(budget - 1.0 + 0.7, 3) and detail["64"]["fits"] is True
    assert detail["128"]["fits"] is False
    # the host: b ids × µs per id; 10 µs/id at 64 streams is 0.64 ms
    cap, detail = gpu.capacity_rule({1: 2.0, 64: budget - 0.5}, free, 10.0)
    assert detail["64"]["host_ms"] == 0.64 and cap == 1
    cap, detail = gpu.capacity_rule({1: 2.0, 64: budget - 0.5}, free, 2.0)
    assert detail["64"]["host_ms"] == 0.128 and cap == 64
    assert gpu.interpolate({1: 1.0, 3: 3.0}, 2) == 2.0 and gpu.interpolate({1: 1.0, 3: 3.0}, 5) == 5.0


def test_reply_mix_starts_fresh_and_stays_near_the_start() -> None:
    import numpy as np

    o = gpu.GpuBenchOptions()
    pieces = gpu.piece_ids()
    assert pieces.min() >= 7 and len(pieces) > len(gpu.REPLY_TEXTS)  # several pieces per reply
    pos, left = gpu.draw_rows(np.random.default_rng(0), o, 4096, "reply")
    assert pos.min() >= gpu.PIECE_PROMPT_IDS and (pos + left <= gpu.PIECE_PROMPT_IDS + pieces.max()).all()
    reply, stress = gpu.mean_position(o, "reply"), gpu.mean_position(o, "stress")
    assert 100 < reply < 400 and 700 < stress < 800  # the stress mix is uniform over 0..1500
    with pytest.raises(ValueError, match="mix"):
        gpu.draw_rows(np.random.default_rng(0), o, 4, "uniform")


def test_dtype_label_says_fp8() -> None:
    o = gpu.GpuBenchOptions()
    assert gpu.dtype_label(o, "cuda") == "bf16 weights, bf16 KV cache"
    assert gpu.dtype_label(replace(o, fp8=True), "cuda").startswith("fp8 weights")
    assert gpu.dtype_label(replace(o, attention="triton", kv_fp8=True), "cuda").endswith("fp8 KV cache")
    assert gpu.dtype_label(o, "cpu") == "float32"


@pytest.mark.slow
def test_tiny_cpu_run_writes_every_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = replace(gpu.GpuBenchOptions.cpu_tiny(), seconds_per_load=1.0, steady_steps=3)
    monkeypatch.setattr(gpu.GpuBenchOptions, "cpu_tiny", classmethod(lambda cls: tiny))
    out = tmp_path / "gpu.json"
    assert gpu.main(["--tiny", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    for key in ("device", "streams_realtime", "step_ms", "ttfb_ms", "snac_ms", "cpu_us_per_token"):
        assert key in r
    assert r["device"].startswith("cpu (tiny shapes") and r["attention_backend"] == "flex"
    assert set(r["step_ms"]) == {"1", "2", "4", "8"} and all(v > 0 for v in r["step_ms"].values())
    assert all(r["step_ms_p90"][b] > 0 for b in r["step_ms"])
    assert set(r["snac_ms"]) == {"1", "2", "4"} and all(v > 0 for v in r["snac_ms"].values())
    assert set(r["ttfb_ms"]) == {"50%", "90%"}
    for stats in r["ttfb_ms"].values():
        assert stats["utterances"] >= 1 and 0 < stats["p50"] <= stats["p90"] <= stats["p99"]
    assert 0 <= r["streams_realtime"] <= 8 and r["cpu_us_per_token"] > 0
    assert set(r["step_ms_reply_p90"]) == set(r["capacity_reply"]) == {"1", "2", "4", "8"}
    assert r["host_us_per_id_in_rule"] >= 10.0  # the engine's own 10 µs per id at least
    assert r["first_audio_ids"] == 21
    assert r["gpu_memory_gb"]["kv_cache"] > 0
    assert r["kernels_per_step"]["kernels"] > 0 and r["graphs_captured_after_ready"] == 0
    for kv in r["kv_ids_read_per_step"].values():
        assert 0 < kv["length_aware"] <= kv["padded"] and kv["ratio"] <= 1.0


def test_length_aware_reads_are_whole_blocks_up_to_each_row() -> None:
    o = replace(gpu.GpuBenchOptions(), max_position=127)  # every row inside the first block
    assert gpu.kv_ids_read(o, 4, draws=5) == {"length_aware": 512, "padded": 512, "ratio": 1.0}
    far = gpu.kv_ids_read(gpu.GpuBenchOptions(), 256)
    assert 0.45 < far["ratio"] < 0.55  # positions uniform over 0..1500: about half the padded reads


@pytest.mark.slow
def test_steady_state_steps_admit_at_the_load_rate() -> None:
    """The step timing's load: positions spread over 0..max_position, rows replaced by new utterances
    (prefill) as they end, so roughly b / utterance_ids admissions per step."""
    import numpy as np

    o = replace(gpu.GpuBenchOptions.cpu_tiny(), steady_steps=30, utterance_ids=20, max_position=200)
    model = gpu.build_model(o, "cpu")
    gen = gpu.build_generator(model, o, "flex")
    admitted = []
    real = gen.admit_many

    def counting(batch, deliver=True):  # type: ignore[no-untyped-def]
        admitted.append(len(batch))
        return real(batch, deliver)

    gen.admit_many = counting
    gpu.steady_step_ms(gen, o, 8, np.random.default_rng(0))
    rate = sum(admitted) / (o.steady_steps + 6)
    assert 0.5 * 8 / o.utterance_ids < rate < 2.5 * 8 / o.utterance_ids
    assert gen.free_rows == 8  # released at the end


@pytest.mark.slow
def test_gpu_check_driver_writes_every_phase_on_cpu(tmp_path: Path) -> None:
    """scripts/gpu_check.sh's benchmark step, dry-run at tiny shapes: every phase lands in gpu.json."""
    from benchmarks import gpu_check

    assert gpu_check.main(["--tiny", "--out", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "gpu.json").read_text())
    assert r["phases_done"] == [
        *("env", "build", "warm_graphs", "steps", "kernels", "step_profile", "snac", "capacity"),
        *("steps_with_snac", "ttfb", "step_parts", "attention_compare"),
    ]
    assert r["partial"] is False and r["errors"] == {}
    assert set(r["step_ms"]) == {"1", "2", "4", "8"} and set(r["ttfb_ms"]) == {"50%", "90%"}
    assert set(r["step_ms_reply_p90"]) == {"1", "2", "4", "8"} and r["dtype"] == "float32"
    for key in ("capacity", "capacity_reply"):  # the rule's parts per batch, as summary.txt prints them
        assert set(r[key]) == {"1", "2", "4", "8"} and all(
            isinstance(c["fits"], bool) for c in r[key].values()
        )
    prof = r["step_profile"]["stress"]
    assert prof["batch"] == 4 and prof["top"] and prof["kernels"] > 0
    att = r["attention_compare"]
    for name in ("flex", "triton", "triton_fp8_kv"):
        assert set(att[name]) == {"stress", "reply"} and set(att[name]["reply"]) == {"2"}, name
    assert all(v > 0 for v in att["triton_fp8_kv"]["stress"]["2"]) and att["triton_profile"]["top"]
    parts = r["step_parts"]["8"]
    assert set(parts) == {"decode_ms", "admit_1_ms", "admit_1_host_ms", "admit_8_ms", "admit_8_host_ms"}
    assert all(v > 0 for v in parts.values()) and parts["admit_1_host_ms"] <= parts["admit_1_ms"]
    assert r["compiled"] is False  # compile is "auto": CUDA only
    assert r["graphs_captured_after_ready"] == 0 and r["attention_backend"] == "flex"
    assert set(r["steps_with_snac"]) == {"2", "8"}
    for b, m in r["steps_with_snac"].items():
        assert m["step_ms"] > 0 and m["snac_windows"] >= 0 and m["backlog_windows"] >= 0, (b, m)
    assert r["streams_realtime_alongside"] in (0, 2, 8)


def test_alongside_capacity_needs_the_budget_and_snac_keeping_up() -> None:
    budget = gpu.REALTIME_STEP_MS / gpu.HEADROOM
    ok = {"step_ms": budget - 0.1, "backlog_windows": 0.0}
    assert gpu.streams_realtime_alongside({64: ok, 128: ok}) == 128
    assert gpu.streams_realtime_alongside({64: ok, 128: {**ok, "step_ms": budget + 0.1}}) == 64
    assert gpu.streams_realtime_alongside({64: ok, 128: {**ok, "backlog_windows": 129.0}}) == 64


def test_snac_alongside_decodes_the_windows_that_fall_due() -> None:
    """The miniature SNAC thread: b / 28 windows per step, decoded in batches of at most max_batch."""
    import numpy as np

    class CountingDecoder:
        def __init__(self) -> None:
            self.sizes: list[int] = []

        def decode(self, windows: list[np.ndarray]) -> list[np.ndarray]:
            self.sizes.append(len(windows))
            return [np.zeros(1, np.int16)] * len(windows)

    dec = CountingDecoder()
    # 2 windows per step
    snac = gpu.SnacAlongside(dec, 56, np.random.default_rng(0), max_batch=4)
    with snac:
        for _ in range(10):
            snac.step()
        for _ in range(200):
            if snac.backlog() == 0:
                break
            time.sleep(0.01)
    assert snac.done == 20 and snac.backlog() == 0
    assert max(dec.sizes) <= 4 and sum(dec.sizes) == 20


def test_gpu_check_driver_out_of_time_still_leaves_json(tmp_path: Path) -> None:
    from benchmarks import gpu_check

    assert gpu_check.main(["--tiny", "--out", str(tmp_path), "--budget-s", "0"]) == 2
    r = json.loads((tmp_path / "gpu.json").read_text())
    # a phase the time left cannot hold is reported as skipped, apart from the phases that failed
    assert r["partial"] is True and r["phases_done"] == ["env"] and "build" in r["skipped"]
    assert r["errors"] == {}


@pytest.mark.slow
def test_gpu_check_measures_again_beside_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BESIDE: the steps and first-audio phases run a second time while a background command (on a GPU
    host, the speech engine at a caller's load) runs; the figures measured alone are kept apart."""
    from benchmarks import gpu_check

    ready = tmp_path / "load.ready"
    monkeypatch.setenv("BESIDE", f"sleep 0.5; echo running > {ready}; sleep 1")
    monkeypatch.setenv("BESIDE_READY", str(ready))
    monkeypatch.setenv("SNAC_ALONGSIDE", "2")
    assert gpu_check.main(["--tiny", "--out", str(tmp_path), "--budget-s", "300"]) == 0
    r = json.loads((tmp_path / "gpu.json").read_text())
    assert "beside" in r["phases_done"] and r["errors"] == {} and r["beside_exit"] == 0
    for key in ("step_ms", "steps_with_snac", "ttfb_ms"):
        assert r[key] and r["beside"][key] and set(r[key]) == set(r["beside"][key])
    assert r["beside_ready_after_s"] >= 0.4
