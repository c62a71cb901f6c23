"""Where the corpus of real servers' binlogs lives (recorded by
:mod:`tests.support.record_binlog_corpus`), and the servers it holds, one directory each."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "data" / "binlog"
FLAVOURS = sorted(p.name for p in CORPUS.iterdir() if (p / "VERSION").is_file())
