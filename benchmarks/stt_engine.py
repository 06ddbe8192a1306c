"""The host speech engine under many concurrent streams: decodes per second and decode latency.

    python -m benchmarks.stt_engine --device cuda --streams 64,256 --seconds 20 [--json out/stt_engine.json]
    python -m benchmarks.stt_engine --device cpu --streams 2,4 --seconds 10      # a CPU smoke run
    python -m benchmarks.stt_engine --device cuda --backend torch --model DIR --audio WAVS --agree WAVS

`--backend torch` is the PyTorch runner (a CUDA 13 GPU host, where CTranslate2's CUDA 12 wheel cannot
load); `auto` picks it on CUDA when CTranslate2 sees no GPU. `--agree DIR` first decodes each WAV in DIR on
the GPU and on the CPU through the same runner and reports how many texts agree (the GPU path's
correctness, on a box with no reference transcripts).

The engine is the real one (`python -m plugins.whisper serve`, started as the worker starts it), with the
packaged tiny.en unless `--model` says otherwise; the streams are spread over `--clients` connections, as
job processes would hold them. Each stream sends a decode, waits for it, and sends the next at once (a
closed loop: the load is as high as the engine lets it be): 3 of 4 partials, 1 of 4 finals, of audio 1-8 s
long, random noise at speech level unless `--audio DIR` gives WAVs (random audio decodes to few tokens, so
speech gives the more honest per-decode cost). Reported per stream count: decodes/s, latency p50/p95/p99
(send to answer, queueing included) for partials and finals, and the engine's batching (mean and largest
batch). A figure is only as good as the machine was quiet: the load of other processes is not subtracted.

`--rate-per-stream R` paces the streams instead, as callers load a host: each stream sends its next decode
at Poisson times R a second apart on average (or as soon as its last is answered, if that is later), so
the load offered is `streams × R` decodes a second whatever the engine does with it. `--ready-file PATH` is
written when the load starts (another benchmark can then measure beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cli import emit, percentiles, print_json
from plugins.whisper.engine_client import SpeechClientOptions, SpeechEngineClient
from plugins.whisper.model import PRIORITY_FINAL, PRIORITY_PARTIAL, SAMPLE_RATE, DecodeRequest


@dataclass(frozen=True)
class SttBenchOptions:
    streams: tuple[int, ...] = (64, 256)
    seconds: float = 20.0
    clients: int = 8
    device: str = "cuda"
    backend: str = "auto"
    model: str = "tiny.en"
    max_batch: int = 64
    workers: int = 2
    audio_dir: str = ""
    agree_dir: str = ""
    profile_batches: tuple[int, ...] = ()
    rate_per_stream: float = 0.0  # decodes a second per stream, paced; 0 = closed loop
    ready_file: str = ""
    seed: int = 0


def read_wav(path: Path) -> np.ndarray | None:
    """A 16 kHz 16-bit WAV as float32 mono (stdlib only: a GPU box may have no soundfile); None otherwise."""
    import wave

    with wave.open(str(path), "rb") as w:
        if w.getframerate() != SAMPLE_RATE or w.getsampwidth() != 2:
            return None
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).reshape(-1, w.getnchannels())
    return (pcm[:, 0].astype(np.float32) / 32768.0).copy()


def clips(o: SttBenchOptions) -> list[np.ndarray]:
    """What the streams say: WAVs from `audio_dir` (16 kHz mono), else noise at about -26 dBFS."""
    if o.audio_dir:
        out = [a for f in sorted(Path(o.audio_dir).glob("*.wav")) if (a := read_wav(f)) is not None]
        if out:
            return out
    rng = np.random.default_rng(o.seed)
    return [(rng.standard_normal(8 * SAMPLE_RATE) * 0.05).astype(np.float32) for _ in range(8)]


async def load(address: str, n: int, o: SttBenchOptions, audio: list[np.ndarray]) -> dict[str, Any]:
    clients = [SpeechEngineClient(SpeechClientOptions(address, wait_s=30)) for _ in range(min(n, o.clients))]
    lat: dict[int, list[float]] = {PRIORITY_PARTIAL: [], PRIORITY_FINAL: []}
    errors: list[str] = []
    rng = random.Random(o.seed + n)
    before = await clients[0].capacity()
    deadline = time.monotonic() + o.seconds
    if o.ready_file:
        Path(o.ready_file).write_text(f"{n} streams\n")

    async def stream(i: int) -> None:
        client = clients[i % len(clients)]
        k = 0
        due = time.monotonic() + (rng.expovariate(o.rate_per_stream) if o.rate_per_stream > 0 else 0.0)
        while time.monotonic() < deadline:
            if o.rate_per_stream > 0:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                due += rng.expovariate(o.rate_per_stream)
                if time.monotonic() >= deadline:
                    break
            clip = audio[rng.randrange(len(audio))]
            seconds = rng.uniform(1.0, min(8.0, len(clip) / SAMPLE_RATE))
            priority = PRIORITY_FINAL if k % 4 == 3 else PRIORITY_PARTIAL
            req = DecodeRequest(priority=priority, window_s=10, stream_id=f"s{i}")
            t = time.perf_counter()
            try:
                await client.transcribe(clip[: int(seconds * SAMPLE_RATE)], req)
            except Exception as e:  # counted, not fatal: a benchmark reports failures
                errors.append(f"{type(e).__name__}: {str(e)[:120]}")
            else:
                lat[priority].append((time.perf_counter() - t) * 1000)
            k += 1

    started = time.monotonic()
    await asyncio.gather(*(stream(i) for i in range(n)))
    took = time.monotonic() - started
    after = await clients[0].capacity()
    for c in clients:
        await c.aclose()
    decoded = after["decoded"] - before["decoded"]
    batches = after["batches"] - before["batches"]
    every = lat[PRIORITY_PARTIAL] + lat[PRIORITY_FINAL]
    return {
        "streams": n,
        "offered_per_s": round(n * o.rate_per_stream, 1) if o.rate_per_stream > 0 else None,
        "decodes_per_s": round(decoded / took, 1),
        "latency_ms": percentiles(every, (50, 95, 99)),
        "partial_ms": percentiles(lat[PRIORITY_PARTIAL]),
        "final_ms": percentiles(lat[PRIORITY_FINAL]),
        "mean_batch": round(decoded / batches, 1) if batches else None,
        "largest_batch": after["max_batch_seen"],
        "errors": len(errors),
        "error_sample": errors[:5],
    }


def agreement(o: SttBenchOptions) -> dict[str, Any]:
    """The same runner on the GPU and on the CPU over `agree_dir`'s WAVs: how many texts agree."""
    from plugins.whisper.model import ModelOptions, make_runner

    files = [(f.name, a) for f in sorted(Path(o.agree_dir).glob("*.wav")) if (a := read_wav(f)) is not None]
    on = {d: make_runner(ModelOptions(model=o.model, device=d, backend=o.backend)) for d in (o.device, "cpu")}  # type: ignore[arg-type]
    request = DecodeRequest(priority=PRIORITY_FINAL, window_s=15)
    same, differ = 0, []
    for name, audio in files:
        texts = [on[d].decode(audio, request).text for d in (o.device, "cpu")]
        if texts[0] == texts[1]:
            same += 1
        else:
            differ.append({"file": name, o.device: texts[0], "cpu": texts[1]})
    return {"files": len(files), "same_text": same, "differ": differ[:5]}


def phases(o: SttBenchOptions, batches: tuple[int, ...]) -> dict[str, Any]:
    """Where one batch's time goes in the PyTorch runner (features, encoder, greedy decoding), in process,
    the device synchronised around each phase; audio as the load uses it (`clips`, 1-8 s)."""
    import torch

    from plugins.whisper import torch_whisper as tw
    from plugins.whisper.model import ModelOptions, encoder_frames, max_new_tokens
    from plugins.whisper.torch_runner import TorchWhisperRunner
    from plugins.whisper.torch_static import greedy, greedy_static

    runner = TorchWhisperRunner(ModelOptions(model=o.model, device=o.device))  # type: ignore[arg-type]
    runner.warmup(max(batches))
    s = runner._state
    assert s is not None
    audio = clips(o)
    rng = random.Random(o.seed)
    sync = torch.cuda.synchronize if o.device == "cuda" else (lambda: None)
    out: dict[str, Any] = {}
    for b in batches:
        items = []
        for _ in range(b):
            clip = audio[rng.randrange(len(audio))]
            items.append(clip[: int(rng.uniform(1.0, min(8.0, len(clip) / SAMPLE_RATE)) * SAMPLE_RATE)])
        frames = max(encoder_frames(len(a), 10) or 3000 for a in items)
        times: dict[str, list[float]] = {"features": [], "encode": [], "greedy": [], "total": []}
        steps = 0
        for _ in range(4):  # the first is a warm-up
            sync()
            t0 = time.perf_counter()
            mel, _ = runner.features(items, frames)
            sync()
            t1 = time.perf_counter()
            with torch.inference_mode():
                enc = tw.encode(s["params"], s["dims"], mel.to(s["dtype"]))
            sync()
            t2 = time.perf_counter()
            prompt = torch.tensor([runner._prompt("en", None)] * b, device=s["device"])
            budgets = [max_new_tokens(len(a)) for a in items]
            sb = s["static"].get(b)  # the runner's own path: fixed shapes and a graph per step where warmed
            if sb is not None:
                gens = greedy_static(s["params"], s["dims"], sb, enc, prompt, budgets, s["greedy"])
            else:
                gens = greedy(s["params"], s["dims"], enc, prompt, budgets, s["greedy"])
            sync()
            t3 = time.perf_counter()
            for key, took in zip(times, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                times[key].append(took * 1000)
            steps = max(len(g.tokens) for g in gens) + 1
        out[str(b)] = {k: round(float(np.median(v[1:])), 1) for k, v in times.items()} | {
            "steps": steps,
            "graph": b in s["static"] and s["static"][b].graph is not None,
            "decodes_per_s": round(b / (float(np.median(times["total"][1:])) / 1000), 1),
        }
    out["graphs"] = sorted(b for b, sb in s["static"].items() if sb.graph is not None)
    # batches as an engine meets them: every size and window differs from the last
    for pad in (True, False):
        s["pad_batches"] = pad and o.device == "cuda"
        mixed = []
        for _ in range(2 * len(batches) + 8):
            b = rng.randint(1, max(batches))
            cut = [a[: int(rng.uniform(1.0, min(8.0, len(a) / SAMPLE_RATE)) * SAMPLE_RATE)] for a in audio]
            batch = [(cut[rng.randrange(len(cut))], DecodeRequest(window_s=10)) for _ in range(b)]
            sync()
            t0 = time.perf_counter()
            runner.decode_batch(batch)
            sync()
            mixed.append((b, time.perf_counter() - t0))
        total_s = sum(t for _, t in mixed)
        out["mixed_padded" if pad else "mixed_unpadded"] = {
            "batches": len(mixed),
            "mean_batch": round(sum(b for b, _ in mixed) / len(mixed), 1),
            "ms_per_batch_mean": round(total_s / len(mixed) * 1000, 1),
            "ms_per_batch_max": round(max(t for _, t in mixed) * 1000, 1),
            "decodes_per_s": round(sum(b for b, _ in mixed) / total_s, 1),
        }
    return out


def run(o: SttBenchOptions) -> dict[str, Any]:
    from plugins.whisper.model import ModelOptions, resolve_backend
    from worker.speech_engine import HostSpeechEngine, HostSpeechEngineOptions

    backend = resolve_backend(ModelOptions(device=o.device, backend=o.backend))  # type: ignore[arg-type]
    checked = agreement(o) if o.agree_dir else None
    profiled = phases(o, o.profile_batches) if o.profile_batches and backend == "torch" else None
    engine = HostSpeechEngine(
        HostSpeechEngineOptions(
            model=o.model, device=o.device, backend=backend, workers=o.workers, max_batch=o.max_batch
        )
    )
    address = engine.start()
    audio = clips(o)
    try:
        rows = [asyncio.run(load(address, n, o, audio)) for n in o.streams]
    finally:
        engine.close()
    return {
        "device": o.device,
        "backend": backend,
        "model": o.model,
        "max_batch": o.max_batch,
        "workers": o.workers,
        "audio": "speech" if o.audio_dir else "noise",
        "seconds": o.seconds,
        "rate_per_stream": o.rate_per_stream or None,
        "gpu_cpu_agreement": checked,
        "torch_phases_ms": profiled,
        "by_streams": rows,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stt_engine", description=__doc__.splitlines()[0])
    d = SttBenchOptions()
    ap.add_argument("--device", choices=("cpu", "cuda"), default=d.device)
    ap.add_argument("--streams", default=",".join(map(str, d.streams)))
    ap.add_argument("--seconds", type=float, default=d.seconds)
    ap.add_argument("--clients", type=int, default=d.clients)
    ap.add_argument("--backend", choices=("ctranslate2", "torch", "auto"), default=d.backend)
    ap.add_argument("--agree", default="", help="a folder of 16 kHz WAVs decoded on the device and the CPU")
    ap.add_argument("--profile", default="", help="batch sizes to time phase by phase (torch backend)")
    ap.add_argument("--model", default=d.model)
    ap.add_argument("--max-batch", type=int, default=d.max_batch)
    ap.add_argument("--workers", type=int, default=d.workers)
    ap.add_argument("--audio", default="", help="a folder of 16 kHz WAVs to decode instead of noise")
    ap.add_argument(
        "--rate-per-stream", type=float, default=0.0, help="paced decodes/s per stream (0: closed loop)"
    )
    ap.add_argument("--ready-file", default="", help="written when the load starts")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    o = SttBenchOptions(
        streams=tuple(int(s) for s in a.streams.split(",") if s),
        seconds=a.seconds,
        clients=a.clients,
        device=a.device,
        backend=a.backend,
        model=a.model,
        max_batch=a.max_batch,
        workers=a.workers,
        audio_dir=a.audio,
        agree_dir=a.agree,
        profile_batches=tuple(int(b) for b in a.profile.split(",") if b),
        rate_per_stream=a.rate_per_stream,
        ready_file=a.ready_file,
    )
    report = run(o)
    sys.exit(emit(report, print_json, a.json))


if __name__ == "__main__":
    main()
