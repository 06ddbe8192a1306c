"""Ending an rtc client process without interpreter finalisation.

The LiveKit FFI runtime keeps tokio threads that can call back into Python while the interpreter is being
torn down; the Rust side then aborts ("panic in a function that cannot unwind", SIGABRT). A caller whose
work is finished and whose files are written would report a crash it did not have, so every rtc client
process here leaves through `exit_now` once its work is done.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """Flush what was written, then end the process at once (no atexit, no finalisers)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach the reader anyway
            pass
    os._exit(code)
