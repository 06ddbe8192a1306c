"""A Whisper runner on PyTorch (`backend="torch"`): what the host speech engine uses on a CUDA 13 GPU host.

It loads the same CTranslate2 folder the CPU runner does (ct2_file.py reads it), and answers decodes as
`WhisperModelRunner` does: the same features (faster-whisper's log-mel: periodic Hann window of 400, hop
160, 160 samples of padding, Slaney mel filters), the same short encoder window filled with the features'
floor, the same prompt, greedy decoding with the same suppressed tokens, the same no-speech probability and
the same words for finals. What it does not do: beam search and segment timestamps (a request for either is
decoded greedily without timestamps, as one segment: streams use timestamps only to find a place to cut a
long turn, and then cut at the end instead) and language detection on English-only models.

Model math is in torch_whisper.py; no livekit, no CTranslate2, no faster-whisper import.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .ct2_file import dequantized, read_model_bin
from .decoding import (
    HOP,
    PRIORITY_PARTIAL,
    SAMPLE_RATE,
    DecodeRequest,
    DecodeResult,
    ModelOptions,
    Segment,
    encoder_frames,
    max_new_tokens,
)
from .weights import WhisperModelError, resolve_model_path
from .words import TAIL_TOKENS, Word, group_words

logger = logging.getLogger("parley.stt")

N_FFT = 400
N_MELS = 80
FULL_FRAMES = 3000
PAD_SAMPLES = 160
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
WARM_WINDOWS_S = (10, 30)
"""Encoder windows warmed at start: the streams' default (options.py) and Whisper's full window."""


def batch_bucket(n: int) -> int:
    """The batch a GPU decode of `n` requests runs as (the next bucket up)."""
    return next((b for b in BATCH_BUCKETS if b >= n), n)


def mel_filters(sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """Slaney-style mel filters [n_mels, n_fft/2 + 1] (librosa's default, which Whisper was trained on)."""
    fft_hz = np.fft.rfftfreq(n_fft, 1.0 / sr)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    max_mel = min_log_mel + np.log(sr / 2 / min_log_hz) / logstep
    mels = np.linspace(0.0, max_mel, n_mels + 2)
    hz = np.where(mels < min_log_mel, f_sp * mels, min_log_hz * np.exp(logstep * (mels - min_log_mel)))
    ramps = hz[:, None] - fft_hz[None, :]
    widths = np.diff(hz)
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    return (weights * (2.0 / (hz[2:] - hz[:-2]))[:, None]).astype(np.float32)


def compression_ratio(text: str) -> float:
    raw = text.encode("utf-8")
    return len(raw) / len(zlib.compress(raw)) if raw else 0.0


class TorchWhisperRunner:
    """One Whisper model in PyTorch; `decode_batch` decodes requests of one batch key in one pass."""

    def __init__(self, options: ModelOptions = ModelOptions()) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._state: dict[str, Any] | None = None

    @property
    def model_name(self) -> str:
        return self.options.model

    @property
    def multilingual(self) -> bool:
        self.load()
        assert self._state is not None
        return bool(self._state["multilingual"])

    @property
    def loaded(self) -> bool:
        return self._state is not None

    def _device(self) -> str:
        import torch

        if self.options.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        if self.options.device == "cuda" and not torch.cuda.is_available():
            raise WhisperModelError("device=cuda asked for, but PyTorch sees no CUDA device")
        return self.options.device

    def load(self) -> None:
        with self._lock:
            if self._state is not None:
                return
            import torch
            from tokenizers import Tokenizer

            from . import torch_whisper as tw

            path = Path(resolve_model_path(self.options.model, self.options.download_root))
            device = self._device()
            started = time.perf_counter()
            try:
                spec, raw = read_model_bin(path / "model.bin")
                config = json.loads((path / "config.json").read_text())
                tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
            except (OSError, ValueError) as e:
                raise WhisperModelError(f"cannot load Whisper model {str(path)!r}: {e}") from None
            if spec != "WhisperSpec":
                raise WhisperModelError(f"{path}: a {spec}, not a Whisper model")
            weights = dequantized(raw)
            dtype = torch.float16 if device == "cuda" else torch.float32
            if self.options.compute_type in ("float32", "int8_float32"):
                dtype = torch.float32
            elif self.options.compute_type == "float16":
                dtype = torch.float16
            dims = tw.dims_of(raw)
            params = tw.to_params(weights, device, dtype)

            def tid(token: str) -> int | None:
                return tokenizer.token_to_id(token)

            eot = tid("<|endoftext|>")
            sot = tid("<|startoftranscript|>")
            if eot is None or sot is None:
                raise WhisperModelError(f"{path}: the tokenizer has no Whisper special tokens")
            lang_ids = [int(i) for i in config.get("lang_ids", [])]
            multilingual = dims.vocab >= 51865
            specials = [
                tid(t)
                for t in (
                    "<|transcribe|>",
                    "<|translate|>",
                    "<|startoftranscript|>",
                    "<|startofprev|>",
                    "<|startoflm|>",
                    "<|nospeech|>",
                    "<|nocaptions|>",
                )
            ]
            suppress = sorted({int(i) for i in config.get("suppress_ids", [])} | {i for i in specials if i})
            self._state = {
                "torch": torch,
                "tw": tw,
                "params": params,
                "dims": dims,
                "device": device,
                "dtype": dtype,
                "tokenizer": tokenizer,
                "multilingual": multilingual,
                "lang_ids": lang_ids,
                "sot": sot,
                "greedy": tw.GreedyOptions(
                    eot=eot,
                    suppress=suppress,
                    suppress_first=[int(i) for i in config.get("suppress_ids_begin", [220, eot])],
                    no_speech=tid("<|nospeech|>") or tid("<|nocaptions|>"),
                    sot_index=0,
                    text_vocab=eot + 1,
                ),
                "filters": torch.from_numpy(mel_filters()).to(device),
                "pad_batches": device == "cuda",
                "static": {},  # bucket → torch_static.StaticBatch, made (and captured) at warm-up
                "window": torch.hann_window(N_FFT, periodic=True, device=device),
            }
            logger.info(
                "whisper model loaded",
                extra={
                    "model": self.model_name,
                    "device": device,
                    "backend": "torch",
                    "load_s": round(time.perf_counter() - started, 3),
                },
            )

    def warmup(self, max_batch: int = 1) -> None:
        """One decode; on a GPU one per batch bucket up to `max_batch`, in the windows streams use most, so
        the first calls of the day do not pay for plans and kernel choices."""
        self.decode(np.zeros(SAMPLE_RATE // 2, dtype=np.float32), DecodeRequest(language=None))
        s = self._state
        assert s is not None
        if not s["pad_batches"]:
            return
        from . import torch_static as ts

        for b in BATCH_BUCKETS:
            if b > max(1, max_batch):
                break
            sb = ts.new_batch(s["params"], s["dims"], b, s["greedy"], s["device"], s["dtype"])
            if s["device"] == "cuda":
                try:
                    ts.capture(s["params"], s["dims"], sb, s["greedy"].eot)
                except RuntimeError as e:  # decoded without the graph: slower, still right
                    logger.warning(
                        "whisper step graph not captured", extra={"batch": b, "error": str(e)[:200]}
                    )
            s["static"][b] = sb
        noise = np.random.default_rng(0).standard_normal(3 * SAMPLE_RATE).astype(np.float32) * 0.05
        for window in WARM_WINDOWS_S:
            for b in BATCH_BUCKETS:
                if b > max(1, max_batch):
                    break
                self.decode_batch([(noise, DecodeRequest(window_s=window))] * b)

    def features(self, audios: Sequence[np.ndarray], frames: int) -> tuple[Any, list[int]]:
        """Log-mel [B, 80, frames] of a batch, each cut to the window and floor-filled after its audio, and
        the frames each one's audio fills (batch.py's `_features`, for all requests at once).

        One STFT for the whole batch, of a shape that depends on the window only: every request's signal is
        padded as faster-whisper pads it (160 zeros, then 200 mirrored samples each side) and zeros fill the
        rest of its row, so its own frames are exactly faster-whisper's; each row's loudness floor is taken
        over its own frames. (An STFT per request of its own length costs a new cuFFT plan per length.)
        """
        s = self._state
        assert s is not None
        torch = s["torch"]
        counts = [1 + (len(a) + PAD_SAMPLES) // HOP for a in audios]  # frames of a centred STFT
        n_frames = max(frames + 2, *counts)
        longest = max(len(a) for a in audios) + PAD_SAMPLES + N_FFT  # audio past a 30 s window still fits
        wave = _padded_signals(torch, audios, max((n_frames - 1) * HOP + N_FFT, longest), s["device"])
        spec = torch.stft(wave, N_FFT, HOP, window=s["window"], center=False, return_complex=True)
        log_spec = (s["filters"] @ spec.abs() ** 2).clamp(min=1e-10).log10()  # [B, 80, n_frames]
        valid = (
            torch.arange(log_spec.shape[-1], device=s["device"])[None, :]
            < torch.tensor([c - 1 for c in counts], device=s["device"])[:, None]
        )  # faster-whisper drops each STFT's last frame
        top = log_spec.masked_fill(~valid[:, None, :], float("-inf")).amax(dim=(1, 2), keepdim=True)
        feats = (torch.maximum(log_spec, top - 8.0) + 4.0) / 4.0
        contents = [min(FULL_FRAMES, c - 2) for c in counts]
        # each row: its own frames, then zeros (a 30 s window, as pad_or_trim) or, in a shorter window, the
        # lowest value of its audio's frames (the floor silence gives)
        t = torch.arange(frames, device=s["device"])[None, None, :]
        kept = torch.tensor([min(c, frames) for c in contents], device=s["device"])[:, None, None]
        used = torch.tensor([min(len(a) // HOP, frames) for a in audios], device=s["device"])[:, None, None]
        feats = feats[:, :, :frames]
        floor = feats.masked_fill(t >= used, float("inf")).amin(dim=(1, 2), keepdim=True)
        out = torch.where(t < kept, feats, torch.zeros_like(feats))
        if frames < FULL_FRAMES:
            out = torch.where((t >= used) & (used > 0), floor, out)
        return out, contents

    def _language(self, request: DecodeRequest, multilingual: bool) -> str | None:
        lang = request.language
        if lang is not None and not multilingual and lang != "en":
            raise WhisperModelError(f"model {self.model_name!r} is English-only; cannot decode {lang!r}")
        return "en" if lang is None and not multilingual else lang

    def decode(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult:
        return self.decode_batch([(audio, request)])[0]

    def decode_batch(self, items: Sequence[tuple[np.ndarray, DecodeRequest]]) -> list[DecodeResult]:
        """Requests that share a window and a prompt (engine.py groups them), decoded in one pass."""
        if not items:
            return []
        self.load()
        s = self._state
        assert s is not None
        torch, tw, tok = s["torch"], s["tw"], s["tokenizer"]
        started = time.perf_counter()
        first = items[0][1]
        if any((r.language, r.initial_prompt) != (first.language, first.initial_prompt) for _, r in items):
            raise ValueError("a batch shares one language and one prompt (engine.py groups requests so)")
        frames = max(encoder_frames(len(a), r.window_s) or FULL_FRAMES for a, r in items)
        language = self._language(first, s["multilingual"])
        n = len(items)
        rows = batch_bucket(n) if s["pad_batches"] else n
        audios = [a for a, _ in items]
        # padded to a bucket with copies of the last request (decoded for one token, then dropped): a few
        # shapes whatever the batch, so no cuFFT plan or kernel choice is made per batch size
        mel, contents = self.features(audios + audios[-1:] * (rows - n), frames)
        with torch.inference_mode():
            encoded = tw.encode(s["params"], s["dims"], mel.to(s["dtype"]))
            languages = self._languages(encoded[:n], language, n)
        prompts = [self._prompt(lang, first.initial_prompt) for lang in languages]
        budgets = [max_new_tokens(len(a)) for a in audios]
        g: Any = s["greedy"]
        g = tw.GreedyOptions(**{**g.__dict__, "sot_index": prompts[0].index(s["sot"])})
        prompt = torch.tensor(prompts + prompts[-1:] * (rows - n), device=s["device"])
        budgets += [1] * (rows - n)
        sb = s["static"].get(rows)
        from . import torch_static as ts

        if sb is not None:  # a bucket's buffers, a CUDA graph per step
            with sb.lock:
                gens = ts.greedy_static(s["params"], s["dims"], sb, encoded, prompt, budgets, g)[:n]
        else:
            gens = ts.greedy(s["params"], s["dims"], encoded, prompt, budgets, g)[:n]
        decode_s = time.perf_counter() - started
        out = []
        for (audio, request), content, gen, lang in zip(items, contents[:n], gens, languages, strict=True):
            text = tok.decode(gen.tokens)
            avg_logprob = gen.sum_logprob / (len(gen.tokens) + 1)
            segments: tuple[Segment, ...] = ()
            silent = gen.no_speech_prob > 0.6 and avg_logprob <= -1.0  # faster-whisper's silence rule
            if text.strip() and not silent and content > 0:
                segments = (
                    Segment(
                        text,
                        0.0,
                        content / 100,
                        gen.no_speech_prob,
                        avg_logprob,
                        compression_ratio(text.strip()),
                    ),
                )
            words: tuple[Word, ...] = ()
            if segments and request.priority != PRIORITY_PARTIAL:
                words = self._words(gen)
            out.append(DecodeResult(segments, lang, len(audio) / SAMPLE_RATE, decode_s, words=words))
        return out

    def _languages(self, encoded: Any, language: str | None, n: int) -> list[str]:
        if language is not None:
            return [language] * n
        s = self._state
        assert s is not None
        from . import torch_static as ts

        torch, tok = s["torch"], s["tokenizer"]
        sot = torch.full((n, 1), s["sot"], device=s["device"])
        logits = ts.prompt_logits(s["params"], s["dims"], s["greedy"], encoded, sot)
        ids = torch.tensor(s["lang_ids"], device=s["device"])
        best = ids[logits[:, -1, ids].argmax(-1)].tolist()
        return [(tok.id_to_token(i) or "<|en|>")[2:-2] for i in best]

    def _prompt(self, language: str | None, initial_prompt: str | None) -> list[int]:
        s = self._state
        assert s is not None
        tok = s["tokenizer"]
        prompt: list[int] = []
        if initial_prompt:
            prev = tok.encode(" " + initial_prompt.strip(), add_special_tokens=False).ids
            prompt = [tok.token_to_id("<|startofprev|>"), *prev[-223:]]
        prompt.append(s["sot"])
        if s["multilingual"]:
            prompt += [tok.token_to_id(f"<|{language}|>"), tok.token_to_id("<|transcribe|>")]
        prompt.append(tok.token_to_id("<|notimestamps|>"))
        return prompt

    def _words(self, gen: Any) -> tuple[Word, ...]:
        """The last words with their probabilities, read as words.py reads a CTranslate2 generation."""
        tok = self._state["tokenizer"]  # type: ignore[index]
        ids = gen.tokens
        start = max(0, len(ids) - TAIL_TOKENS)
        while start > 0 and not (tok.id_to_token(ids[start]) or "").startswith("Ġ"):
            start -= 1
        return group_words(
            ids[start:],
            gen.probabilities[start:],
            lambda t: tok.id_to_token(t) or "",
            lambda g: tok.decode(g),
        )

    async def transcribe(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult:
        return await asyncio.to_thread(self.decode, audio, request)

    def close(self) -> None:
        with self._lock:
            self._state = None


def _padded_signals(torch: Any, audios: Sequence[np.ndarray], width: int, device: str) -> Any:
    """[B, width] rows on `device`: each request's audio with faster-whisper's padding (PAD_SAMPLES zeros,
    then N_FFT / 2 mirrored samples each side), zeros after.

    Built on the device from one copy of the audio alone: a host-built row is as wide as the window (a
    batch of 128 at 10 s is 80 MB of mostly zeros), and filling and copying it was half a GPU batch's time.
    Only the mirrored ends need work: the start's 200 samples mirror the audio's first 201, and of the end's
    200 the last 41 mirror the audio's last 41 (the rest mirror the zero padding).
    """
    half = N_FFT // 2
    rows = torch.zeros(len(audios), width, dtype=torch.float32, device=device)
    lengths = [len(a) for a in audios]
    flat = np.concatenate([np.asarray(a, dtype=np.float32) for a in audios] or [np.zeros(0, np.float32)])
    src = torch.from_numpy(flat).to(device)
    tail = half - PAD_SAMPLES + 1  # audio samples the end's mirror reaches
    at = 0
    for row, n in enumerate(lengths):
        if n > half:
            x = src[at : at + n]
            rows[row, half : half + n] = x
            rows[row, :half] = x[1 : half + 1].flip(0)
            end = half + n + PAD_SAMPLES + (PAD_SAMPLES - 1)
            rows[row, end : end + tail] = x[n - tail :].flip(0)
        elif n:  # under 13 ms of audio: np.pad's repeated mirroring, on the host
            signal = np.pad(np.asarray(audios[row], dtype=np.float32), (0, PAD_SAMPLES))
            padded = np.pad(signal, (half, half), mode="reflect")
            rows[row, : len(padded)] = torch.from_numpy(padded).to(device)
        at += n
    return rows
