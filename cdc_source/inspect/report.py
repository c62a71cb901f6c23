"""A report: the checkpoint, this source's batch records, their summary and, when a
server was asked, its side. A pure assembly of the other modules' results."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_source.inspect.checkpoint import Checkpoint
from cdc_source.inspect.records import BatchRecord, batch_record, choose_source
from cdc_source.inspect.server import ServerReport
from cdc_source.inspect.summary import Summary, summarize


@dataclass(frozen=True)
class Report:
    checkpoint: Checkpoint
    source_id: str
    records: tuple[BatchRecord, ...]
    summary: Summary
    server: ServerReport | None = None


def build_report(
    checkpoint: Checkpoint,
    source_id: str | None = None,
    server: ServerReport | None = None,
) -> Report:
    chosen = choose_source(checkpoint, source_id)
    records = [batch_record(batch, chosen) for batch in checkpoint.batches]
    captured = None if server is None or server.captured is None else list(server.captured)
    return Report(checkpoint, chosen, tuple(records), summarize(records, captured), server)
