"""`python worker.py download-files`: fetch every model the configured pipeline needs, with progress bars.

Registered as a LiveKit plugin so the framework's own `download-files` command runs it. On a machine with no
model hub this is a no-op that says so in one line: the embedded defaults (Whisper tiny.en and the
multilingual base, the hibari voice, SmolLM2) ship inside their Python packages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from livekit.agents import Plugin

from . import __version__
from .settings import Settings, get_settings

log = logging.getLogger("parley.downloads")


class ParleyModels(Plugin):
    def __init__(self) -> None:
        super().__init__("parley", __version__, "parley", log)

    def download_files(self) -> None:
        settings = get_settings()
        for name, fetch in _fetchers():
            try:
                fetch(settings)
            except Exception as e:  # offline hosts: say so in one line and keep going
                print(f"parley: {name}: cannot download now ({e}); the bundled offline defaults still work")


def _whisper(settings: Settings) -> object:
    from plugins.whisper.weights import download_model, is_offline_model

    name = settings.effective_stt_model
    path = download_model(name, progress=True)  # a packaged model is joined into its cache folder now
    if is_offline_model(name):
        print(f"parley: whisper {name} comes from installed packages or a local folder; nothing to download")
    return path


def _fetchers() -> list[tuple[str, Callable[[Settings], object]]]:
    out: list[tuple[str, Callable[[Settings], object]]] = [("whisper", _whisper)]
    try:
        from plugins.orpheus.download import download_for_settings as orpheus_dl  # type: ignore[import-not-found]

        out.append(("orpheus", orpheus_dl))
    except ImportError:
        pass
    return out


def register() -> None:
    if not any(isinstance(p, ParleyModels) for p in Plugin.registered_plugins):
        Plugin.register_plugin(ParleyModels())
