"""`python worker.py download-files`: fetch every model the configured pipeline needs, with progress bars.

Registered as a LiveKit plugin so the framework's own `download-files` command runs it. On a machine with no
model hub this is a no-op that says so in one line: the embedded defaults (bundled tiny.en, the hibari voice,
SmolLM2) ship inside their Python packages.
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
    from plugins.whisper import BUNDLED_MODEL, download_model

    if settings.stt_model == BUNDLED_MODEL:
        print(f"parley: whisper {BUNDLED_MODEL} is bundled with the package; nothing to download")
        return None
    return download_model(settings.stt_model, progress=True)


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
