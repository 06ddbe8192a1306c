"""Pipecat's Smart Turn v3.2 (BSD-2) as a baseline for `benchmarks.turns`: the audio end-of-turn model a
Pipecat user gets, run the way Pipecat's `LocalSmartTurnAnalyzerV3` runs it.

The ONNX ships inside the `pipecat-ai` wheel (`pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx`,
8.7 MB). Parley does not depend on Pipecat, so the benchmark takes the one file out of the wheel:

    python -m benchmarks.smart_turn fetch      # pip download pipecat-ai==1.14.0 --no-deps, extract the ONNX

Model input (from Pipecat's analyzer): the turn's audio at 16 kHz, the last 8 s (zero-padded at the front),
Whisper log-mel features (80 mels, 800 frames) of the waveform normalised to zero mean and unit variance;
output one sigmoid, P(turn complete). Pipecat's default timing: Silero VAD stop 0.2 s, then the model; above
0.5 the turn ends there, otherwise when the silence reaches `stop_secs` = 3 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

PIPECAT_VERSION = "1.14.0"
ONNX_IN_WHEEL = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
DEFAULT_PATH = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "parley" / "smart-turn-v3.2-cpu.onnx"
)
RATE = 16000
WINDOW_S = 8
VAD_STOP_S = 0.2
"""Pipecat's VADParams.stop_secs, the silence before the analyzer runs."""
STOP_S = 3.0
"""Pipecat's SmartTurnParams.stop_secs: the silence that ends a turn the model calls incomplete."""
PRE_SPEECH_S = 0.5


class SmartTurnError(RuntimeError):
    """The model file is missing or unreadable (one line)."""


def model_path() -> Path:
    return Path(os.environ.get("PARLEY_SMART_TURN_ONNX", str(DEFAULT_PATH)))


def fetch() -> Path:
    """Download the pipecat-ai wheel (no dependencies) with pip and keep only the ONNX."""
    dest = model_path()
    if dest.is_file():
        return dest
    with tempfile.TemporaryDirectory(prefix="parley-pipecat-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", f"pipecat-ai=={PIPECAT_VERSION}", "--no-deps"]
        try:
            subprocess.run([*cmd, "-d", tmp, "-q"], check=True, timeout=300)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            raise SmartTurnError(f"could not download pipecat-ai {PIPECAT_VERSION}: {e}") from None
        wheels = list(Path(tmp).glob("pipecat_ai-*.whl"))
        if not wheels:
            raise SmartTurnError("pip left no pipecat-ai wheel")
        with zipfile.ZipFile(wheels[0]) as z:
            data = z.read(ONNX_IN_WHEEL)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return dest


class SmartTurn:
    """The ONNX model with its Whisper features; `predict(int16 16 kHz audio) -> P(complete)`."""

    def __init__(self, path: Path | None = None) -> None:
        import onnxruntime as ort
        from transformers import WhisperFeatureExtractor

        path = path or model_path()
        if not path.is_file():
            raise SmartTurnError(
                f"Smart Turn model not at {path}: run `python -m benchmarks.smart_turn fetch`"
            )
        so = ort.SessionOptions()
        so.inter_op_num_threads = 1
        so.intra_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(path), sess_options=so)
        except Exception as e:
            raise SmartTurnError(f"cannot load {path}: {e}") from None
        self._features = WhisperFeatureExtractor(chunk_length=WINDOW_S)

    def predict(self, pcm: np.ndarray) -> float:
        audio = pcm.astype(np.float32) / 32768.0 if pcm.dtype == np.int16 else pcm.astype(np.float32)
        n = WINDOW_S * RATE
        audio = audio[-n:] if len(audio) > n else np.pad(audio, (n - len(audio), 0))
        feats = self._features(audio, sampling_rate=RATE, return_tensors="np", do_normalize=True)
        out = self._session.run(None, {"input_features": feats["input_features"].astype(np.float32)})
        return float(np.asarray(out[0]).reshape(-1)[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.smart_turn", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["fetch"])
    ap.parse_args(argv)
    try:
        print(fetch())
    except SmartTurnError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
