"""What the forkserver built (forkserver_models.py) for every job to inherit: read by the pipeline, which
forkserver_models.py imports, so the two share this registry instead of importing each other."""

from __future__ import annotations

from typing import Any

voices: dict[str, Any] = {}  # voice name -> a warm CpuVoice
vads: dict[str, tuple[Any, Any]] = {}  # profile -> (its ProfileParams, Silero VAD)


def shared_voice(name: str) -> Any | None:
    """The forkserver's warm CPU voice of that name, or None (load your own)."""
    return voices.get(name)


def shared_vad(profile: str, params: Any) -> Any | None:
    """The forkserver's VAD for this profile if it was made with these very parameters."""
    made = vads.get(str(profile))
    return made[1] if made is not None and made[0] == params else None
