"""SNAC 24 kHz decoding of many windows at once: frames (L, 7) in, int16 PCM (L·2048) out.

Windows are grouped by length in frames (1..8, the only shapes the planner makes), so no window is padded in
time and every result is exact for its window. On a GPU each (batch bucket, length) shape gets a captured CUDA
graph, codes go in through pinned memory, and the float→int16 conversion happens on the device, so one copy
of compact PCM comes back. A group that fails is retried item by item: one bad item never fails a batch.
All graphs share ONE memory pool (captured largest shape first, so every smaller one fits inside its blocks)
instead of one pool each, which would sum every shape's peak; the engine warms SNAC before the LLM starts, so
the capture happens before the LLM claims most of the free memory for its KV cache.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.windows import MAX_WINDOW

log = logging.getLogger("parley.orpheus.snac")

SNAC_24KHZ_CONFIG = {
    "sampling_rate": 24000,
    "encoder_dim": 48,
    "encoder_rates": [2, 4, 8, 8],
    "decoder_dim": 1024,
    "decoder_rates": [8, 8, 4, 2],
    "attn_window_size": None,
    "codebook_size": 4096,
    "codebook_dim": 8,
    "vq_strides": [4, 2, 1],
    "noise": True,
    "depthwise": True,
}
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class DecoderOptions:
    snac_dir: str = ""  # holds config.json + pytorch_model.bin
    device: str = "cpu"  # "cpu", "cuda", "cuda:0"
    cuda_graphs: bool = True  # GPU only
    threads: int = 1  # CPU intra-op threads for SNAC
    max_batch: int = 64
    # "bfloat16"/"float16" halve SNAC's weight and activation bytes on a GPU (its convolutions and Snake
    # activations in that dtype; the PCM is rounded from it); "float32" is the reference
    dtype: str = "float32"


def load_snac(snac_dir: str | Path):  # type: ignore[no-untyped-def]
    """Build SNAC from a local dir (config.json + pytorch_model.bin); no hub access."""
    import torch
    from snac import SNAC

    d = Path(snac_dir)
    cfg_path, weights = d / "config.json", d / "pytorch_model.bin"
    if not cfg_path.is_file() or not weights.is_file():
        raise FileNotFoundError(f"SNAC dir {d} must hold config.json and pytorch_model.bin")
    model = SNAC(**json.loads(cfg_path.read_text()))
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    return model.eval()


class SnacDecoder:
    """Thread-safe batched decoder; `decode(windows)` runs in the batcher's worker thread."""

    def __init__(self, model, options: DecoderOptions = DecoderOptions()) -> None:  # type: ignore[no-untyped-def]
        import torch

        self._torch = torch
        self.options = options
        self.device = torch.device(options.device)
        if options.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"SNAC dtype {options.dtype!r}: float32, bfloat16 or float16")
        self.model = model.to(self.device, dtype=getattr(torch, options.dtype)).eval()
        self._lock = threading.Lock()
        self._graphs: dict[tuple[int, int], tuple[object, list, object]] = {}
        self._pool: object | None = None  # one CUDA graph memory pool shared by every captured shape
        if self.device.type == "cpu":
            torch.set_num_threads(max(1, options.threads))

    @classmethod
    def load(cls, options: DecoderOptions) -> SnacDecoder:
        return cls(load_snac(options.snac_dir), options)

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def warm_up(self) -> None:
        """Run (and on GPU capture) every shape once so the first real request pays nothing."""
        buckets = [b for b in BATCH_BUCKETS if b <= self.options.max_batch] if self.on_gpu else [1]
        for length in warm_up_order(MAX_WINDOW):
            for b in sorted(buckets, reverse=True):
                self.decode([np.zeros((length, ids.FRAME_TOKENS), dtype=np.int16)] * b)

    def decode(self, windows: list[np.ndarray]) -> list[np.ndarray | Exception]:
        """Each window (L, 7) int codes → int16 PCM of L·2048 samples, or the exception for that item."""
        out: list[np.ndarray | Exception] = [ValueError("not decoded")] * len(windows)
        groups: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            if w.ndim != 2 or w.shape[1] != ids.FRAME_TOKENS or w.shape[0] == 0:
                out[i] = ValueError(f"bad window shape {w.shape}")
            elif int(w.min()) < 0 or int(w.max()) >= ids.CODEBOOK:
                out[i] = ValueError("code out of range 0..4095")
            else:
                groups.setdefault(w.shape[0], []).append(i)
        with self._lock:
            for _length, idx in groups.items():
                try:
                    pcm = self._decode_group(np.stack([windows[i] for i in idx]))
                    for j, i in enumerate(idx):
                        out[i] = pcm[j]
                except Exception:  # one bad item must not fail the rest: retry one by one
                    log.exception("SNAC group decode failed; retrying items one by one")
                    for i in idx:
                        try:
                            out[i] = self._decode_group(windows[i][None])[0]
                        except Exception as e:
                            out[i] = e
        return out

    def _decode_group(self, frames: np.ndarray) -> np.ndarray:
        torch = self._torch
        if self.on_gpu and self.options.cuda_graphs:
            return self._decode_graph(frames)
        l0, l1, l2 = ids.frames_to_codes(frames.astype(np.int64))
        with torch.inference_mode():
            codes = [torch.from_numpy(np.ascontiguousarray(c)).to(self.device) for c in (l0, l1, l2)]
            audio = self.model.decode(codes)[:, 0].float()
            pcm = (audio.clamp(-1.0, 1.0) * 32767.0).round().to(torch.int16)
            return pcm.cpu().numpy()

    def _decode_graph(self, frames: np.ndarray) -> np.ndarray:
        """GPU: pad the batch to a bucket and replay the captured graph for (bucket, length)."""
        torch = self._torch
        b, length = frames.shape[0], frames.shape[1]
        if b > BATCH_BUCKETS[-1]:
            parts = [
                self._decode_graph(frames[i : i + BATCH_BUCKETS[-1]]) for i in range(0, b, BATCH_BUCKETS[-1])
            ]
            return np.concatenate(parts)
        bucket = next(x for x in BATCH_BUCKETS if x >= b)
        key = (bucket, length)
        if key not in self._graphs:
            self._graphs[key] = self._capture(bucket, length)
        graph, inputs, output = self._graphs[key]
        padded = np.zeros((bucket, length, ids.FRAME_TOKENS), dtype=np.int64)
        padded[:b] = frames
        for buf, level in zip(inputs, ids.frames_to_codes(padded), strict=True):
            host = torch.from_numpy(np.ascontiguousarray(level)).pin_memory()
            buf.copy_(host, non_blocking=True)
        graph.replay()  # type: ignore[attr-defined]
        host_out = torch.empty(output.shape, dtype=torch.int16, pin_memory=True)  # type: ignore[attr-defined]
        host_out.copy_(output, non_blocking=True)
        torch.cuda.current_stream().synchronize()
        return host_out.numpy()[:b]

    def _capture(self, bucket: int, length: int) -> tuple[object, list, object]:
        torch = self._torch
        inputs = [torch.zeros((bucket, length * k), dtype=torch.int64, device=self.device) for k in (1, 2, 4)]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(2):  # warm-up outside the graph (allocator, cudnn autotune)
                self.model.decode(inputs)
        torch.cuda.current_stream().wait_stream(stream)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(graph, pool=self._pool):
            audio = self.model.decode(inputs)[:, 0].float()
            output = (audio.clamp(-1.0, 1.0) * 32767.0).round().to(torch.int16)
        return graph, inputs, output


def warm_up_order(max_window: int) -> list[int]:
    """Window lengths, largest first: the first capture sizes the shared pool for all that follow."""
    return list(range(max_window, 0, -1))


def full_decode(model, frames: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Reference: one decode of a whole utterance (n, 7) → float32 samples, for benchmarks and tests."""
    import torch

    l0, l1, l2 = ids.frames_to_codes(frames.astype(np.int64)[None])
    with torch.inference_mode():
        audio = model.decode([torch.from_numpy(np.ascontiguousarray(c)) for c in (l0, l1, l2)])
    return audio[0, 0].float().numpy()
