"""Read a CTranslate2 `model.bin` without CTranslate2: named arrays, so another runtime can use the weights.

Why: the GPU speech engine runs Whisper in PyTorch (torch_whisper.py) where CTranslate2's CUDA build cannot
load (its wheel needs CUDA 12's cuBLAS; the GPU image is CUDA 13, like the Orpheus engine's). The packaged
models ship only in CTranslate2's format, so this reads that format directly.

The layout, as CTranslate2's `ModelSpec._serialize` writes it (little-endian): u32 binary version, the spec's
name, u32 revision, u32 variable count; per variable its name, u8 rank, u32 dims, u8 dtype id, u32 byte
count, the bytes; then u32 alias count and (alias, target) name pairs. A string is u16 length (with the
trailing NUL) then the bytes. No livekit, no torch here.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .weights import WhisperModelError

_DTYPES = (np.float32, np.int8, np.int16, np.int32, np.float16, None)  # id 5 is bfloat16: read as raw u16
MIN_VERSION = 5


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> memoryview:
        if self.at + n > len(self.data):
            raise WhisperModelError("model.bin ends early: the file is truncated")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def u8(self) -> int:
        return int(self.take(1)[0])

    def u16(self) -> int:
        return int(struct.unpack("<H", self.take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def string(self) -> str:
        raw = bytes(self.take(self.u16()))
        return raw.rstrip(b"\0").decode("utf-8")


def read_model_bin(path: str | Path) -> tuple[str, dict[str, np.ndarray]]:
    """The spec name ("WhisperSpec") and every variable by name (aliases resolved); arrays are copies."""
    raw = Path(path).read_bytes()
    r = _Reader(memoryview(raw))
    version = r.u32()
    if version < MIN_VERSION or version > 100:
        raise WhisperModelError(f"{path}: not a CTranslate2 model.bin this reader knows (version {version})")
    spec = r.string()
    r.u32()  # revision
    out: dict[str, np.ndarray] = {}
    for _ in range(r.u32()):
        name = r.string()
        shape = tuple(r.u32() for _ in range(r.u8()))
        type_id = r.u8()
        nbytes = r.u32()
        if type_id >= len(_DTYPES):
            raise WhisperModelError(f"{path}: variable {name!r} has an unknown dtype id {type_id}")
        dtype = _DTYPES[type_id]
        buf = r.take(nbytes)
        arr: np.ndarray
        if dtype is None:  # bfloat16: the high half of a float32
            bits = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=dtype).copy()
        out[name] = arr.reshape(shape) if shape else arr.reshape(())
    for _ in range(r.u32()):
        alias, target = r.string(), r.string()
        if target in out:
            out[alias] = out[target]
    return spec, out


def dequantized(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float32 arrays: an int8 `X/weight` with its per-row `X/weight_scale` becomes weight / scale (what
    CTranslate2's int8 quantisation stores); scales are dropped, scalar settings kept as they are."""
    out: dict[str, np.ndarray] = {}
    for name, arr in weights.items():
        if name.endswith("_scale"):
            continue
        if arr.ndim == 0:
            out[name] = arr
            continue
        if arr.dtype == np.int8:
            scale = weights.get(name + "_scale")
            if scale is None:
                raise WhisperModelError(f"int8 variable {name!r} has no {name}_scale")
            arr = arr.astype(np.float32) / scale.astype(np.float32).reshape(-1, *([1] * (arr.ndim - 1)))
        out[name] = np.asarray(arr, dtype=np.float32)
    return out


def _string(value: str) -> bytes:
    raw = value.encode("utf-8") + b"\0"
    return struct.pack("<H", len(raw)) + raw


def write_model_bin(path: str | Path, spec: str, variables: dict[str, np.ndarray], revision: int = 3) -> None:
    """Write `variables` in the layout `read_model_bin` reads (binary version 6); arrays that are the same
    object are written once, the others as aliases."""
    first: dict[int, str] = {}
    aliases: list[tuple[str, str]] = []
    body = bytearray()
    count = 0
    for name, arr in variables.items():
        if id(arr) in first:
            aliases.append((name, first[id(arr)]))
            continue
        first[id(arr)] = name
        type_id = next(i for i, d in enumerate(_DTYPES) if d is not None and arr.dtype == d)
        data = np.ascontiguousarray(arr).tobytes()
        body += _string(name) + struct.pack("<B", arr.ndim)
        body += b"".join(struct.pack("<I", d) for d in arr.shape)
        body += struct.pack("<BI", type_id, len(data)) + data
        count += 1
    head = struct.pack("<I", 6) + _string(spec) + struct.pack("<II", revision, count)
    tail = struct.pack("<I", len(aliases)) + b"".join(_string(a) + _string(t) for a, t in aliases)
    Path(path).write_bytes(head + bytes(body) + tail)


def quantized_int8(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every float matrix named `*weight` (linear layers, embeddings, convolutions) as int8 with a float32
    per-row scale, CTranslate2's int8 form (weight * scale rounded, scale = 127 / the row's largest |w|);
    everything else as it is. Half the bytes of float16: small enough to carry to a GPU box."""
    out: dict[str, np.ndarray] = {}
    done: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for name, arr in weights.items():
        if not (name.endswith("weight") and arr.ndim >= 2 and arr.dtype.kind == "f"):
            out[name] = arr
            continue
        if id(arr) not in done:
            rows = arr.astype(np.float32).reshape(arr.shape[0], -1)
            scale = 127.0 / np.maximum(np.abs(rows).max(axis=1), 1e-12)
            q = np.clip(np.rint(rows * scale[:, None]), -127, 127).astype(np.int8).reshape(arr.shape)
            done[id(arr)] = (q, scale.astype(np.float32))
        out[name], out[name + "_scale"] = done[id(arr)]
    return out


def save_int8_copy(source: str | Path, target: str | Path) -> Path:
    """A copy of the CTranslate2 Whisper folder `source` with int8 weights (model.bin, config.json,
    tokenizer.json): what the GPU check carries to a box that has no model."""
    import shutil

    source, target = Path(source), Path(target)
    target.mkdir(parents=True, exist_ok=True)
    spec, weights = read_model_bin(source / "model.bin")
    write_model_bin(target / "model.bin", spec, quantized_int8(weights))
    for name in ("config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json"):
        if (source / name).exists():
            shutil.copy(source / name, target / name)
    return target
