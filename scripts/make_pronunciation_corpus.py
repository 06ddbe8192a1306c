#!/usr/bin/env python3
"""Write the pronunciation corpus: the vocabulary corpus's sentences with each business's respellings.

The sentences, terms and how each term is said are in scripts/data/vocab_corpus.yaml (the respellings were
written once from knowledge of how the names are said, before any voice read them). The businesses are split
exactly as the vocabulary corpus splits them (same seed), so nothing quoted from the test half was heard while
choosing how respellings are applied.
No audio here: `benchmarks.pronunciation` synthesises every sentence with Parley's own voices.

    python scripts/make_pronunciation_corpus.py     # -> out/corpus-pron/{dev,test}/labels.json
    python -m benchmarks.pronunciation --data out/corpus-pron/dev
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from make_vocab_corpus import split_domains

from benchmarks.vocabulary import contains


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("out/corpus-pron"))
    ap.add_argument("--seed", type=int, default=11, help="business split (the vocabulary corpus's)")
    args = ap.parse_args(argv)
    for split, domains in split_domains(args.seed).items():
        labels = {
            "domains": {
                d.name: {"vocabulary": list(d.vocabulary), "pronunciations": d.pronunciations}
                for d in domains
            },
            "sentences": [
                {"domain": d.name, "text": text, "terms": [t for t in d.vocabulary if contains(text, t)]}
                for d in domains
                for text in d.with_terms
            ],
        }
        folder = args.out / split
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "labels.json").write_text(json.dumps(labels, indent=1, ensure_ascii=False) + "\n")
        print(f"{split}: {len(labels['sentences'])} sentences, {len(domains)} businesses -> {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
