"""Fetch the Orpheus checkpoint (with its tokenizer) and the SNAC 24 kHz decoder on a production host.

The worker's `download-files` command calls `download_for_settings(settings)`. huggingface_hub draws the
progress bars and keeps the files in its cache, so a second run only checks them. A host with no model
hub (HF_HUB_OFFLINE, or the hub not answering) gets one clear line and nothing else: the engine's tiny test
model and the CPU voice need no download. No livekit import.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ORPHEUS_REPO = "canopylabs/orpheus-3b-0.1-ft"  # gated: accept the licence on the hub and set HF_TOKEN
SNAC_REPO = "hubertsiuzdak/snac_24khz"
# the weights, config and tokenizer the engine loads; no training state or READMEs
CHECKPOINT_FILES = ["*.json", "*.safetensors", "tokenizer*", "*.model"]
SNAC_FILES = ["config.json", "pytorch_model.bin"]


@dataclass(frozen=True)
class DownloadOptions:
    orpheus_repo: str = ORPHEUS_REPO
    snac_repo: str = SNAC_REPO
    revision: str | None = None  # pin a commit for reproducible hosts
    cache_dir: str | None = None  # None = huggingface_hub's cache (HF_HOME)
    progress: bool = True
    reach_timeout_s: float = 3.0  # how long to wait for the hub before calling the host offline


@dataclass(frozen=True)
class DownloadResult:
    model_dir: Path | None  # pass to `python -m plugins.orpheus serve --model-dir`
    snac_dir: Path | None  # ... and `--snac-dir`
    message: str

    @property
    def downloaded(self) -> bool:
        return self.model_dir is not None


def options_from_settings(settings: Any) -> DownloadOptions:
    """Optional settings fields (`orpheus_repo`, `snac_repo`, `orpheus_revision`, `model_cache_dir`)."""
    return DownloadOptions(
        orpheus_repo=getattr(settings, "orpheus_repo", None) or ORPHEUS_REPO,
        snac_repo=getattr(settings, "snac_repo", None) or SNAC_REPO,
        revision=getattr(settings, "orpheus_revision", None) or None,
        cache_dir=str(getattr(settings, "model_cache_dir", "") or "") or None,
    )


def download_for_settings(settings: Any) -> DownloadResult:
    """What `download-files` runs: nothing for a CPU-voice-only worker, else fetch both models."""
    if getattr(settings, "tts_backend", "auto") == "cpu":
        return _say(DownloadResult(None, None, "orpheus: the CPU voice is configured; nothing to download"))
    return download(options_from_settings(settings))


def download(options: DownloadOptions) -> DownloadResult:
    """Fetch both repos (progress bars on stderr), or say in one line why this host cannot."""
    import huggingface_hub
    from huggingface_hub import constants

    why_offline = _offline_reason(constants.HF_HUB_OFFLINE, constants.ENDPOINT, options.reach_timeout_s)
    if why_offline:
        return _say(
            DownloadResult(
                None,
                None,
                f"orpheus: {why_offline}; skipping the checkpoint download "
                "(the engine's test model and the CPU voice work offline)",
            )
        )
    if not options.progress:
        huggingface_hub.utils.disable_progress_bars()
    try:
        model_dir = huggingface_hub.snapshot_download(
            options.orpheus_repo,
            revision=options.revision,
            allow_patterns=CHECKPOINT_FILES,
            cache_dir=options.cache_dir,
        )
        snac_dir = huggingface_hub.snapshot_download(
            options.snac_repo, allow_patterns=SNAC_FILES, cache_dir=options.cache_dir
        )
    finally:
        if not options.progress:
            huggingface_hub.utils.enable_progress_bars()
    result = DownloadResult(
        Path(model_dir),
        Path(snac_dir),
        f"orpheus: checkpoint ready; serve with --model-dir {model_dir} --snac-dir {snac_dir}",
    )
    return _say(result)


def _offline_reason(offline_flag: bool, endpoint: str, timeout_s: float) -> str | None:
    if offline_flag:
        return "HF_HUB_OFFLINE is set"
    url = urlparse(endpoint)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as e:
        return f"the model hub {endpoint} is not reachable ({e.strerror or type(e).__name__})"


def _say(result: DownloadResult) -> DownloadResult:
    print(result.message, flush=True)
    return result
