"""The one place that knows how transformers' `from_pretrained` spells the weight dtype.

transformers ≥ 4.56 takes `dtype=`; older releases (the one TensorRT-LLM 1.0's image ships among them) take
`torch_dtype=` and would pass an unknown `dtype` on to the model config, loading float32 weights.
"""

from __future__ import annotations

from typing import Any

DTYPE_KWARG_SINCE = (4, 56)


def dtype_kwarg(dtype: Any, version: str | None = None) -> dict[str, Any]:
    """`{"dtype": d}` or `{"torch_dtype": d}` for the installed (or the given) transformers version."""
    if version is None:
        import transformers

        version = transformers.__version__
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    key = "dtype" if tuple(parts) >= DTYPE_KWARG_SINCE else "torch_dtype"
    return {key: dtype}
