"""Orpheus streaming decode vs full-sequence decode on random codes (DESIGN §6).

    python -m benchmarks.decoder [--snac-dir DIR] [--utterances 6] [--json out/decoder.json]

Random frames are fed token by token through the engine's own frame assembler and window planner, with the
window size varying 1..4 frames as it does with a client buffer that is low or ahead; every window is decoded
by SNAC and its kept samples are compared with one decode of the whole utterance. Reported: the worst seam
error (RMS over ±half a frame around each window boundary, relative to the utterance RMS; float path, so
int16 rounding is reported separately), dropped and duplicated frames, and the number of tokens before the
first window can be decoded. The default SNAC is the real 24 kHz configuration with random (seeded) weights
and its noise blocks disabled, since noise makes two decodes of the same codes differ by design.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from benchmarks.cli import emit, fail
from plugins.orpheus.engine import ids
from plugins.orpheus.engine.frames import FrameAssembler
from plugins.orpheus.engine.windows import LEFT_CONTEXT, LOOKAHEAD, plan_window

HALF = ids.FRAME_SAMPLES // 2


def build_snac(snac_dir: str, seed: int):  # type: ignore[no-untyped-def]
    import torch

    from plugins.orpheus.engine.snac_decoder import SNAC_24KHZ_CONFIG, load_snac

    torch.manual_seed(seed)
    if snac_dir:
        model = load_snac(snac_dir)
        for m in model.modules():  # make noise blocks identities so decodes are comparable
            if type(m).__name__ == "NoiseBlock":
                m.forward = lambda x: x  # type: ignore[method-assign]
        return model
    from snac import SNAC

    return SNAC(**{**SNAC_24KHZ_CONFIG, "noise": False}).eval()


def decode_float(model, frames: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    from plugins.orpheus.engine.snac_decoder import full_decode

    return full_decode(model, frames)


def first_audio_tokens() -> int:
    """Feed one token at a time; count tokens until the planner can emit the first window."""
    asm = FrameAssembler(1, 64)
    asm.open(0, 7 * 64)
    rng = np.random.default_rng(0)
    for n in range(1, 7 * 64):
        tok = ids.audio_id((n - 1) % 7, int(rng.integers(0, 4096)))
        asm.push(np.array([0]), np.array([tok]))
        if plan_window(0, int(asm.nframes[0]), finished=False) is not None:
            return n
    return -1


def stream_utterance(model, frames: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Windowed decode of one utterance as the engine schedules it; compare with the full decode."""
    from plugins.orpheus.engine.snac_decoder import SnacDecoder

    n = frames.shape[0]
    ref = decode_float(model, frames)
    rms = float(np.sqrt(np.mean(ref**2))) or 1.0
    out = np.zeros_like(ref)
    out16 = np.zeros(ref.size, dtype=np.int16)
    counts = np.zeros(n, dtype=np.int64)
    seams: list[int] = []
    emitted, available = 0, 0
    int16 = SnacDecoder(model)
    while True:
        finished = available >= n
        win = plan_window(emitted, available, finished, max_emit=int(rng.integers(1, 5)))
        if win is None:
            if finished:
                break
            available = min(n, available + int(rng.integers(1, 3)))  # frames arrive one or two at a time
            continue
        audio = decode_float(model, frames[win.start : win.end])
        pcm = int16.decode([frames[win.start : win.end]])[0]
        a, b = (win.emit_from - win.start) * ids.FRAME_SAMPLES, (win.emit_to - win.start) * ids.FRAME_SAMPLES
        lo, hi = win.emit_from * ids.FRAME_SAMPLES, win.emit_to * ids.FRAME_SAMPLES
        out[lo:hi] = audio[a:b]
        assert isinstance(pcm, np.ndarray)
        out16[lo:hi] = pcm[a:b]
        counts[win.emit_from : win.emit_to] += 1
        if win.emit_from > 0:
            seams.append(lo)
        emitted = win.emit_to
    seam_err = [
        float(np.sqrt(np.mean((out[s - HALF : s + HALF] - ref[s - HALF : s + HALF]) ** 2))) / rms * 100
        for s in seams
    ]
    whole = float(np.sqrt(np.mean((out - ref) ** 2))) / rms * 100
    q16 = float(np.sqrt(np.mean((out16.astype(np.float64) / 32767.0 - ref) ** 2))) / rms * 100
    return {
        "frames": n,
        "windows": len(seams) + 1,
        "seam_error_pct_rms_max": max(seam_err) if seam_err else 0.0,
        "error_pct_rms": whole,
        "int16_error_pct_rms": q16,
        "first_frame_error_pct_rms": float(
            np.sqrt(np.mean((out[: ids.FRAME_SAMPLES] - ref[: ids.FRAME_SAMPLES]) ** 2))
        )
        / rms
        * 100,
        "last_frame_error_pct_rms": float(
            np.sqrt(np.mean((out[-ids.FRAME_SAMPLES :] - ref[-ids.FRAME_SAMPLES :]) ** 2))
        )
        / rms
        * 100,
        "dropped": int((counts == 0).sum()),
        "duplicated": int((counts > 1).sum()),
    }


def run(snac_dir: str = "", utterances: int = 6, seed: int = 0) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    model = build_snac(snac_dir, seed)
    rng = np.random.default_rng(seed)
    lengths = [1, 2, 3, 4, 7, 16, 24, 40][: max(1, utterances)]
    t0 = time.perf_counter()
    cases = [stream_utterance(model, rng.integers(0, 4096, (n, 7)).astype(np.int16), rng) for n in lengths]
    return {
        "seam_error_pct_rms": round(max(c["seam_error_pct_rms_max"] for c in cases), 5),
        "dropped_frames": sum(c["dropped"] for c in cases),
        "duplicated_frames": sum(c["duplicated"] for c in cases),
        "first_audio_tokens": first_audio_tokens(),
        "error_pct_rms_max": round(max(c["error_pct_rms"] for c in cases), 5),
        "int16_error_pct_rms_max": round(max(c["int16_error_pct_rms"] for c in cases), 5),
        "first_frame_error_pct_rms_max": round(max(c["first_frame_error_pct_rms"] for c in cases), 5),
        "last_frame_error_pct_rms_max": round(max(c["last_frame_error_pct_rms"] for c in cases), 5),
        "left_context_frames": LEFT_CONTEXT,
        "lookahead_frames": LOOKAHEAD,
        "snac": snac_dir or f"snac_24khz config, random weights (seed {seed}), noise off",
        "seconds": round(time.perf_counter() - t0, 2),
        "utterances": [
            {k: (round(v, 5) if isinstance(v, float) else v) for k, v in c.items()} for c in cases
        ],
    }


def print_table(r: dict[str, Any]) -> None:
    print(f"Orpheus windowed decode vs full decode ({r['snac']})")
    head = ("frames", "windows", "seam max %", "all %", "int16 %", "drop", "dup")
    print("  " + " ".join(f"{h:>10}" for h in head))
    for c in r["utterances"]:
        keys = ("frames", "windows", "seam_error_pct_rms_max", "error_pct_rms", "int16_error_pct_rms")
        row = [c[k] for k in (*keys, "dropped", "duplicated")]
        print("  " + " ".join(f"{v:>10.5f}" if isinstance(v, float) else f"{v:>10}" for v in row))
    print(f"  seam error (max over seams)  {r['seam_error_pct_rms']} % RMS")
    first, last = r["first_frame_error_pct_rms_max"], r["last_frame_error_pct_rms_max"]
    print(f"  first / last frame error     {first} / {last} % RMS")
    print(f"  dropped / duplicated frames  {r['dropped_frames']} / {r['duplicated_frames']}")
    print(f"  first audio after            {r['first_audio_tokens']} tokens")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decoder", description=__doc__.splitlines()[0])
    p.add_argument("--snac-dir", default="", help="a SNAC dir (default: real 24 kHz config, random weights)")
    p.add_argument("--utterances", type=int, default=6, help="how many utterance lengths (1..8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default="", help="write the report here")
    args = p.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore")
    try:
        report = run(args.snac_dir, args.utterances, args.seed)
    except (OSError, ValueError) as e:
        return fail(e, 1)
    return emit(report, print_table, args.json)


if __name__ == "__main__":
    sys.exit(main())
