"""Train the end-of-turn text model and write its weights.

    python -m turn_detection.train [--out turn_detection/data/eot_text.npz] [--bits 18] [--epochs 60]

Logistic regression over hashed features (turn_detection/eot_text.py `features`), fitted full-batch with
AdaGrad and a little L2 on the chat turns of `chitchat-dataset` (train/data.py; 5 % of the conversations held
out for the validation figures it prints). Deterministic for a seed; ~1-2 min on two cores. The weights are
stored as float16 (512 KiB at 18 bits). The policy's threshold and weight for the score are chosen on the
turn corpus's dev split, not here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from turn_detection.eot_text import WEIGHTS, agent_cues, features, hashed, normalise

from .data import Example, examples, held_out


def load_chitchat() -> dict:
    try:
        import chitchat_dataset  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit(
            "error: chitchat-dataset is not installed (uv pip install chitchat-dataset==0.9.0, "
            "the `train` dependency group)"
        ) from None
    path = Path(chitchat_dataset.__file__).with_name("dataset.json")
    return json.loads(path.read_text())


def featurise(rows: list[Example], bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR-like arrays: each row's feature indices (flat), row offsets, labels."""
    flat: list[np.ndarray] = []
    offsets = [0]
    cues: dict[str, list[str]] = {}
    for r in rows:
        agent = cues.get(r.agent_line)
        if agent is None:
            agent = cues.setdefault(r.agent_line, agent_cues(r.agent_line))
        idx = hashed(features(normalise(r.text), agent), bits)
        flat.append(idx)
        offsets.append(offsets[-1] + len(idx))
    labels = np.array([r.done for r in rows], dtype=np.float32)
    return np.concatenate(flat), np.array(offsets, dtype=np.int64), labels


def _logits(w: np.ndarray, idx: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return np.add.reduceat(w[idx], offsets[:-1])


def fit(
    idx: np.ndarray,
    offsets: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    bits: int,
    epochs: int,
    l2: float,
    lr: float,
) -> np.ndarray:
    """Full-batch AdaGrad on the weighted mean log-loss + l2/2 |w|^2. AdaGrad, not Adam: a rare n-gram's
    weight moves as slowly as its evidence builds up (Adam gave rare features large weights, and the
    turn corpus's dev split, whose words the chats rarely use, scored worse: AUC 0.68 against 0.74)."""
    w = np.zeros(1 << bits, dtype=np.float64)
    g2 = np.zeros_like(w)
    counts = np.diff(offsets)
    total = weights.sum()
    for _ in range(epochs):
        p = 1.0 / (1.0 + np.exp(-_logits(w, idx, offsets)))
        err = np.repeat((p - y) * weights / total, counts)
        g = np.bincount(idx, weights=err, minlength=w.size) + l2 * w
        g2 += g * g
        w -= lr * g / (np.sqrt(g2) + 1e-8)
    return w


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m turn_detection.train", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=WEIGHTS)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--l2", type=float, default=1e-5)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument(
        "--pause-weight",
        type=float,
        default=0.3,
        help="weight of the pauses between a turn's messages (a chat writer often sends a whole sentence "
        "and then another: weak evidence that a finished clause is not the end)",
    )
    ap.add_argument("--seed", type=int, default=65)
    args = ap.parse_args(argv)
    if not 12 <= args.bits <= 22:
        print("error: --bits must be within [12, 22]", file=sys.stderr)
        return 2
    start = time.perf_counter()
    rows = list(examples(load_chitchat(), args.seed))
    train = [r for r in rows if not held_out(r.conversation)]
    val = [r for r in rows if held_out(r.conversation)]
    idx, off, y = featurise(train, args.bits)
    weights = np.array([args.pause_weight if r.kind == "pause" else 1.0 for r in train])
    w = fit(idx, off, y, weights, args.bits, args.epochs, args.l2, args.lr)
    vidx, voff, vy = featurise(val, args.bits)
    vp = 1.0 / (1.0 + np.exp(-_logits(w, vidx, voff)))
    loss = float(-np.mean(vy * np.log(vp + 1e-9) + (1 - vy) * np.log(1 - vp + 1e-9)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, w=w.astype(np.float16), bits=np.int64(args.bits))
    print(
        f"{len(train)} training / {len(val)} held-out examples ({y.mean():.2f} / {vy.mean():.2f} done); "
        f"held-out AUC {auc(vp, vy):.3f}, log-loss {loss:.3f}; {time.perf_counter() - start:.0f} s "
        f"-> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
