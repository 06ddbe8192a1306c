"""benchmarks.gpu phase by phase for a lent GPU, with the JSON rewritten after every phase.

    python -m benchmarks.gpu_check --out DIR [--budget-s 300] [--tiny]

The device call that runs it has a hard time limit, so each phase (build, graph warm-up, steady-state steps
per batch, kernels per step, SNAC, capacity, steps with SNAC beside them, TTFB per load, the Triton attention
comparison) checks the time left first, and DIR/gpu.json is rewritten after each one: a timeout or a crash
still leaves every figure measured so far, with `partial`, `phases_done`, `errors` (a phase that raised:
exit status 1) and `skipped` (a phase the time left could not hold: reported, not a failure).
scripts/gpu_check.sh runs this, then the GPU-marked tests.
Knobs (env): BATCHES=1,16,64,128,256  LOADS=0.5,0.9  SECONDS_PER_LOAD=8  FP8=0  COMPILE=auto (the step:
auto/on/off)  SNAC_ALONGSIDE=64,96,128,192,256 (steps with SNAC decoding beside them)
COMPARE_TRITON=64,128,256  TRITON_FP8=1  PROFILE_BATCH=256. An empty list skips its phase.
BESIDE="CMD" (with BESIDE_READY=PATH, a file CMD writes once its load runs): after the TTFB phase, CMD is
started in the background and the steps, the steps with SNAC and the TTFB are measured again under
`beside` while it runs: what another process on the same GPU (the speech engine at a caller's load) costs
the voice. CMD is waited for (BESIDE_WAIT_S, 120) and then stopped.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks import gpu


def _ints(name: str, default: str) -> tuple[int, ...]:
    return tuple(sorted(int(x) for x in os.environ.get(name, default).split(",") if x.strip()))


class Phases:
    def __init__(self, out: Path, budget_s: float) -> None:
        self.path = out / "gpu.json"
        self.t0 = time.monotonic()
        self.budget_s = budget_s
        self.res: dict[str, Any] = {
            "partial": True,
            "phases_done": [],
            "errors": {},
            "skipped": {},
            "phase_s": {},
        }
        out.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def dump(self) -> None:
        self.res["seconds"] = round(time.monotonic() - self.t0, 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.res, indent=2, default=str))
        tmp.replace(self.path)

    def run(self, name: str, fn: Callable[[], Any], need_s: float = 0.0) -> bool:
        if need_s > 0 and self.left() < need_s:
            self.res["skipped"][name] = f"{self.left():.0f} s left, needs ~{need_s:.0f} s"
            self.dump()
            return False
        t = time.monotonic()
        print(f"[gpu_check] {name} ({self.left():.0f} s left)", flush=True)
        try:
            fn()
            self.res["phases_done"].append(name)
            return True
        except Exception as e:  # a phase that fails leaves the others' figures
            self.res["errors"][name] = f"{type(e).__name__}: {e}"[:2000]
            traceback.print_exc()
            return False
        finally:
            self.res["phase_s"][name] = round(time.monotonic() - t, 1)
            self.dump()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--out", default="out/gpu-check")
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--tiny", action="store_true", help="tiny shapes on CPU (a dry run of the phases)")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if device == "cpu":  # the Triton attention's dry run: its kernels through Triton's interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    ph = Phases(Path(args.out), args.budget_s)
    res = ph.res
    if device == "cuda":
        o = replace(
            gpu.GpuBenchOptions(),
            batches=_ints("BATCHES", "1,16,64,128,256"),
            loads=tuple(float(x) for x in os.environ.get("LOADS", "0.5,0.9").split(",") if x.strip()),
            seconds_per_load=float(os.environ.get("SECONDS_PER_LOAD", "8")),
            steady_steps=40,
            fp8=os.environ.get("FP8", "0") == "1",
            compile=os.environ.get("COMPILE", "auto"),
        )
        o = replace(o, rows=max(o.rows, max(o.batches)))
    else:
        o = replace(gpu.GpuBenchOptions.cpu_tiny(), seconds_per_load=1.0, steady_steps=3, loads=(0.5, 0.9))
    st: dict[str, Any] = {}
    COMPARE_TRITON = tuple(
        b for b in _ints("COMPARE_TRITON", "64,128,256" if device == "cuda" else "2") if b <= o.rows
    )
    PROFILE_BATCH = int(os.environ.get("PROFILE_BATCH", "256" if device == "cuda" else "4"))
    SNAC_ALONGSIDE = tuple(
        b for b in _ints("SNAC_ALONGSIDE", "64,96,128,192,256" if device == "cuda" else "2,8") if b <= o.rows
    )
    BESIDE = os.environ.get("BESIDE", "")

    def env() -> None:
        res["torch"] = torch.__version__
        if device == "cuda":
            prop = torch.cuda.get_device_properties(0)
            res["device"] = f"cuda: {prop.name} (torch {torch.__version__}, CUDA {torch.version.cuda})"
            res["gpu_total_gib"] = round(prop.total_memory / 2**30, 1)
        else:
            res["device"] = f"cpu (tiny shapes, not a speed figure; torch {torch.__version__})"
        res["shape"] = (
            "tiny" if device == "cpu" else "orpheus-3b (Llama-3.2-3B, vocab 156 940), random weights"
        )
        res["dtype"] = gpu.dtype_label(o, device)
        res["attention_backend"] = o.attention
        res["realtime_step_budget_ms"] = round(gpu.REALTIME_STEP_MS / gpu.HEADROOM, 3)
        res["capacity_rule"] = gpu.CAPACITY_RULE
        res["mean_position"] = {m: round(gpu.mean_position(o, m), 1) for m in gpu.MIXES}
        res["options"] = {k: v for k, v in asdict(o).items() if k not in ("shape", "snac")}

    def build() -> None:
        torch.manual_seed(o.seed)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        st["gen"], st["dec"], mem = gpu.build(o, device)
        res["gpu_memory_gb"] = {k: round(v, 3) for k, v in mem.items()}

    def warm() -> None:
        gen = st["gen"]
        # every bucket up to the one the largest measured batch runs in (160 streams run in the 256-row graph)
        top = max((*o.batches, *SNAC_ALONGSIDE))
        res["graphs_warmed"] = gpu.warm(gen, (*(b for b in gen.batch_buckets if b < top), top))
        res["compiled"], res["compile_error"] = gen.compiled, gen.compile_error
        res["prefill_graphs"] = len(gen.prefill_shapes())

    def steps() -> None:
        """Both position mixes: `step_ms*` the stress mix (uniform 0..1500), `step_ms_reply*` sentence pieces
        of replies; the generator's host µs per id from the same steps (for the capacity rule)."""
        rng = np.random.default_rng(o.seed)
        host = st.setdefault("host", [])
        for mix, key in (("stress", "step_ms"), ("reply", "step_ms_reply")):
            res.setdefault(key, {})
            res.setdefault(f"{key}_p90", {})
            for b in o.batches:
                if ph.left() < 20:
                    res["skipped"][f"{key}_{b}"] = "time"
                    break
                stats: dict[str, float] = {}
                mean, p90 = gpu.steady_step_ms(st["gen"], replace(o, mix=mix), b, rng, stats=stats)
                host.append(stats["host_us_per_id"])
                res[key][str(b)], res[f"{key}_p90"][str(b)] = round(mean, 3), round(p90, 3)
                print(f"  step b={b} ({mix}): {mean:.3f} ms (p90 {p90:.3f})", flush=True)
                ph.dump()
        res["generator_host_us_per_id"] = round(float(np.median(host)), 3) if host else None

    def kernels() -> None:
        res["kernels_per_step"] = gpu.kernels_per_step(st["gen"], 64, device)
        res["kv_ids_read_per_step"] = {str(b): gpu.kv_ids_read(o, b) for b in o.batches}

    def snac() -> None:
        res["snac_ms"] = {str(b): round(v, 3) for b, v in gpu.measure_snac(st["dec"], o).items()}
        res["snac_window_frames"] = gpu.STEADY_WINDOW_FRAMES
        if device == "cuda":  # the bf16 option (DecoderOptions.dtype), same weights, for the next choice
            import copy

            from plugins.orpheus.engine.snac_decoder import DecoderOptions, SnacDecoder

            half = SnacDecoder(
                copy.deepcopy(st["dec"].model),
                DecoderOptions(device=device, max_batch=max(o.snac_batches), dtype="bfloat16"),
            )
            res["snac_ms_bf16"] = {str(b): round(v, 3) for b, v in gpu.measure_snac(half, o).items()}
            del half

    def capacity() -> None:
        """The honest rule (gpu.capacity_rule) on each mix: p90 step + SNAC batch + host, 20 % margin."""
        snac_ms = {int(k): float(v) for k, v in res.get("snac_ms", {}).items()} or {1: 0.0}
        host = (res.get("generator_host_us_per_id") or 0.0) + o.engine_us_per_id
        res["host_us_per_id_in_rule"] = round(host, 3)
        for key, out in (("step_ms", "streams_realtime"), ("step_ms_reply", "streams_realtime_reply")):
            p90 = {int(k): float(v) for k, v in res.get(f"{key}_p90", {}).items()}
            cap, detail = gpu.capacity_rule(p90, snac_ms, host) if p90 else (None, {})
            res[out], res["capacity" if key == "step_ms" else "capacity_reply"] = cap, detail

    def alongside() -> None:
        """Steps with SNAC decoding beside them at the rate the streams' windows fall due (the engine's
        shape: its own thread, the default stream), and the capacity that gives."""
        rng = np.random.default_rng(o.seed + 2)
        measured = res.setdefault("steps_with_snac", {})
        for b in SNAC_ALONGSIDE:
            if ph.left() < 20:
                res["skipped"][f"steps_with_snac_{b}"] = "time"
                break
            measured[str(b)] = m = gpu.steps_with_snac(st["gen"], st["dec"], o, b, rng)
            print(f"  step b={b} with SNAC beside it: {m}", flush=True)
            ph.dump()
        by_batch = {int(k): v for k, v in measured.items()}
        res["streams_realtime_alongside"] = gpu.streams_realtime_alongside(by_batch) if by_batch else None

    def ttfb() -> None:
        snac_ms = {int(k): float(v) for k, v in res.get("snac_ms", {}).items()} or {1: 0.0}
        # the engine's shape (SNAC beside the steps) when it was measured, else the serial rule's figure
        cap = st.setdefault(  # kept for a second pass (BESIDE), so both measure the same number of streams
            "ttfb_cap",
            res.get("streams_realtime_reply") or res.get("streams_realtime") or max(o.batches),
        )
        res["first_audio_ids"] = first = gpu.first_audio_tokens()
        res.setdefault("ttfb_ms", {})
        host = []
        for load in o.loads:
            need = o.seconds_per_load + 2 * o.utterance_ids / 82.03 + 5
            if ph.left() < need:
                res["skipped"][f"ttfb_{load}"] = f"{ph.left():.0f} s left"
                continue
            stats, us = gpu.measure_ttfb(st["gen"], o, cap, load, snac_ms, first)
            res["ttfb_ms"][f"{round(load * 100)}%"] = stats
            host.append(us)
            res["cpu_us_per_token"] = round(float(np.median(host)), 3)
            ph.dump()
        res["graphs_captured_after_ready"] = st["gen"].captures_after_ready
        if device == "cuda":
            res["gpu_memory_gb"]["peak"] = round(torch.cuda.max_memory_allocated() / 1e9, 3)

    def parts() -> None:
        rng = np.random.default_rng(o.seed + 1)
        res["step_parts"] = {
            str(b): gpu.step_parts(st["gen"], o, b, rng)
            for b in sorted({min(64, max(o.batches)), max(o.batches)})
        }

    def profile() -> None:
        """One PROFILE_BATCH-row step's kernels, both mixes (torch.profiler)."""
        res["step_profile"] = {m: gpu.step_profile(st["gen"], o, PROFILE_BATCH, m) for m in gpu.MIXES}

    def attention() -> None:
        """The Triton split-KV decode attention against the configured one (flex) at COMPARE_TRITON rows,
        both mixes: bf16 KV cache, then the FP8 KV cache (TRITON_FP8=0 leaves it out). Same weights."""
        out = res.setdefault("attention_compare", {})
        out[o.attention] = {
            mix: {
                str(b): [res.get(key, {}).get(str(b)), res.get(f"{key}_p90", {}).get(str(b))]
                for b in COMPARE_TRITON
            }
            for mix, key in (("stress", "step_ms"), ("reply", "step_ms_reply"))
        }
        kinds = [("triton", False)] + (
            [("triton_fp8_kv", True)] if os.environ.get("TRITON_FP8", "1") == "1" else []
        )
        for name, fp8 in kinds:
            ot = replace(o, attention="triton", kv_fp8=fp8)
            g2 = swap(ot, "triton")
            out[f"{name}_warm"] = gpu.warm(g2, COMPARE_TRITON)
            out[f"{name}_compiled"], out[f"{name}_compile_error"] = g2.compiled, g2.compile_error
            rng = np.random.default_rng(o.seed)
            out[name] = {}
            for mix in gpu.MIXES:
                out[name][mix] = {}
                for b in COMPARE_TRITON:
                    if ph.left() < 15:
                        res["skipped"][f"attention_{name}_{mix}_{b}"] = "time"
                        break
                    mean, p90 = gpu.steady_step_ms(g2, replace(ot, mix=mix), b, rng)
                    out[name][mix][str(b)] = [round(mean, 3), round(p90, 3)]
                    print(f"  {name} b={b} ({mix}): {mean:.3f} ms (p90 {p90:.3f})", flush=True)
                    ph.dump()
            if not fp8:
                out["triton_profile"] = gpu.step_profile(g2, ot, PROFILE_BATCH, "stress")

    def admission() -> None:
        res["admission_profile"] = gpu.admission_profile(st["gen"], o)

    def swap(opts: gpu.GpuBenchOptions, attention: str = "") -> Any:
        """Free the generator in use (graphs, KV cache) and build one with `opts` on the same model."""
        gen = st.pop("gen")
        model = gen.model
        gen.close()
        del gen
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        st["gen"] = gpu.build_generator(model, opts, attention or o.attention)
        return st["gen"]

    def beside() -> None:
        """The measured phases again while BESIDE runs; the figures measured alone stay where they were."""
        keys = (
            "step_ms",
            "step_ms_p90",
            "steps_with_snac",
            "streams_realtime_alongside",
            "ttfb_ms",
            "cpu_us_per_token",
        )
        alone = {k: res.pop(k) for k in keys if k in res}
        wait_s = float(os.environ.get("BESIDE_WAIT_S", "120"))
        ready = Path(os.environ.get("BESIDE_READY", "/tmp/parley-beside.ready"))
        ready.unlink(missing_ok=True)
        proc = subprocess.Popen(BESIDE, shell=True, start_new_session=True)
        try:
            t = time.monotonic()
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() - t > wait_s:
                    raise RuntimeError(f"BESIDE never became ready (exit {proc.poll()})")
                time.sleep(0.2)
            res["beside_ready_after_s"] = round(time.monotonic() - t, 1)
            steps()
            if SNAC_ALONGSIDE:
                alongside()
            ttfb()
            res["beside"] = {k: res.get(k) for k in keys}
            res["beside_cmd"] = BESIDE
            res["beside_exit"] = proc.wait(timeout=max(1.0, min(wait_s, ph.left() - 5)))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            for k in keys:
                res.pop(k, None)
            res.update(alone)

    ph.run("env", env)
    if not ph.run("build", build, 30):
        return 2
    ph.run("warm_graphs", warm, 30)
    ph.run("steps", steps, 30)
    ph.run("kernels", kernels, 10)
    ph.run("step_profile", profile, 10)
    ph.run("snac", snac, 10)
    ph.run("capacity", capacity)
    if SNAC_ALONGSIDE:
        ph.run("steps_with_snac", alongside, 20)
    ph.run("ttfb", ttfb, 20)
    if BESIDE:
        ph.run("beside", beside, 60)
    ph.run("step_parts", parts, 15)
    if COMPARE_TRITON:
        ph.run("attention_compare", attention, 60)
    if device == "cuda":
        ph.run("admission_profile", admission, 10)
    res["partial"] = bool(res["errors"] or res["skipped"])
    ph.dump()
    print(
        f"[gpu_check] done in {res['seconds']} s; errors: {list(res['errors'])}; "
        f"skipped for time: {list(res['skipped'])}",
        flush=True,
    )
    return 0 if not res["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
