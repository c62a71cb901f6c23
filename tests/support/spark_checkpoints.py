"""Spark checkpoints laid out exactly as Spark 4.3 writes them, for the ``inspect`` tests:
metadata, offsets/N and commits/N, each with its checksum file."""

from __future__ import annotations

import json
from pathlib import Path

QUERY_ID = "c0d0a2ec-b9c5-4c43-bb76-a2f06e31d90c"
# Spark's batch metadata line, shortened (the real one carries ~20 SQL confs).
BATCH_METADATA = (
    '{{"batchWatermarkMs":0,"batchTimestampMs":{ts},"conf":'
    '{{"spark.sql.shuffle.partitions":"2",'
    '"spark.sql.streaming.multipleWatermarkPolicy":"min"}}}}'
)
CRC = b"crc\x00\x00\x00\x08\x1f\x8b\x12\x00\x11\x22\x33\x44"


def cdc_offset(
    table: str | None, after: list | None = None, pos: int = 537391, file: str = "binlog.000001"
) -> str:
    """An offset line as Spark logs a Python source's offset (json.dumps, default spacing)."""
    snapshot = None if table is None else {"table": table, "after": after}
    obj = {
        "v": 1,
        "binlog": {"file": file, "pos": pos, "gtids": "", "ts": 1795346227398},
        "snapshot": snapshot,
    }
    return json.dumps(obj)


def write_checkpoint(
    root: Path,
    offsets: list[list[str | None]],
    committed: int,
    version: int = 1,
    metadata: bool = True,
) -> Path:
    """Spark's layout: metadata, offsets/N and commits/N, each with its .N.crc checksum.

    ``offsets[N]`` holds one entry per source (None is Spark's '-'); batches
    ``0..committed-1`` get a commits/ file.
    """
    root.mkdir(parents=True, exist_ok=True)
    if metadata:
        (root / "metadata").write_text(json.dumps({"id": QUERY_ID}, separators=(",", ":")))
        (root / ".metadata.crc").write_bytes(CRC)
    (root / "offsets").mkdir()
    (root / "commits").mkdir()
    (root / "sources").mkdir()
    for batch, sources in enumerate(offsets):
        lines = [f"v{version}", BATCH_METADATA.format(ts=1795346227425 + batch)]
        for index, text in enumerate(sources):
            text = "-" if text is None else text
            lines.append(f"{index}:{text}" if version >= 2 else text)
        (root / "offsets" / str(batch)).write_text("\n".join(lines))  # no final newline
        (root / "offsets" / f".{batch}.crc").write_bytes(CRC)
        if batch < committed:
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
            (root / "commits" / f".{batch}.crc").write_bytes(CRC)
    return root


SNAPSHOT_RUN = [
    [cdc_offset("shop.customers", [200])],
    [cdc_offset("shop.orders", ["eu", 99])],
    [cdc_offset("shop.orders", ["us", 99])],
]
