"""scripts/make_turn_corpus.py loaded as a module, for tests that render the corpus's own files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def corpus_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_turn_corpus", ROOT / "scripts/make_turn_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module
