"""Writes docs/options.md: every option of the source, from its one declaration in
cdc_source/option_table.py. ``python docs/make_options.py``; tests/unit/project/test_docs_options.py
fails when the file is out of date."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "options.md"

HEADER = """# Options

Every option of `spark.readStream.format("cdc-mysql")` (and `spark.read`), generated from
their declarations in `cdc_source/option_table.py` by `docs/make_options.py`. Names follow
Flink CDC's MySQL connector where the concept is the same. Options are validated when the
query starts; an unknown name or a bad value is an error that says what is accepted.

| Option | Takes | Default | Meaning |
|---|---|---|---|
"""


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from cdc_source.option_table import OPTIONS

    rows = []
    shown = set()
    for option in OPTIONS:
        if option.key in shown:
            continue
        # Options described together (a file and its position, a certificate and its
        # key) share one row.
        together = [o for o in OPTIONS if o.manual == option.manual]
        shown.update(o.key for o in together)
        keys = ", ".join(f"`{o.key}`" for o in together)
        kinds = " / ".join(dict.fromkeys(o.kind for o in together))
        rows.append(f"| {keys} | {kinds} | {option.shown_default} | {option.manual} |\n")
    return HEADER + "".join(rows)


if __name__ == "__main__":
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
