"""atheris target: arbitrary bytes into the C row decoder, the event framing, the row
counter and the binary JSON decoder. Decoding errors (ValueError subclasses) are the
expected outcome of bad bytes; any other exception, or a crash of the process, is a
finding.

Run: python tests/fuzz/fuzz_binlog.py -max_total_time=20
"""

from __future__ import annotations

import sys

import atheris
import numpy  # noqa: F401  (imported uninstrumented: only the project's code is traced)
import pyarrow  # noqa: F401

with atheris.instrument_imports(include=["cdc_source", "reader"]):
    from cdc_source.binlog import events, framing, row_plan
    from cdc_source.binlog.wire import MalformedEventError
    from reader import json_binary
    from reader.row_decoding import RowSink, native_available

KINDS = (
    row_plan.K_SINT,
    row_plan.K_UINT,
    row_plan.K_FLOAT,
    row_plan.K_DOUBLE,
    row_plan.K_DECIMAL,
    row_plan.K_DATE,
    row_plan.K_DATETIME2,
    row_plan.K_TIMESTAMP2,
    row_plan.K_TIME2,
    row_plan.K_YEAR,
    row_plan.K_VAR,
    row_plan.K_ENUM,
    row_plan.K_SET,
    row_plan.K_BIT,
    row_plan.K_DATETIME,
    row_plan.K_TIMESTAMP,
    row_plan.K_TIME,
)
DECODER = "native" if native_available() else "python"
SPLITTER = framing.splitter()
COUNTER = framing.row_counter()


def _plan(fdp: atheris.FuzzedDataProvider) -> tuple:
    plan = []
    for _ in range(fdp.ConsumeIntInRange(1, 8)):
        kind = KINDS[fdp.ConsumeIntInRange(0, len(KINDS) - 1)]
        if kind in (
            row_plan.K_SINT,
            row_plan.K_UINT,
            row_plan.K_ENUM,
            row_plan.K_SET,
            row_plan.K_BIT,
        ):
            a = fdp.ConsumeIntInRange(1, 8)
        elif kind == row_plan.K_DECIMAL:
            a = fdp.ConsumeIntInRange(1, 65)
        elif kind == row_plan.K_VAR:
            a = fdp.ConsumeIntInRange(1, 4)
        else:
            a = fdp.ConsumeIntInRange(0, 6)
        b = (
            fdp.ConsumeIntInRange(0, min(a, 30))
            if kind == row_plan.K_DECIMAL
            else (fdp.ConsumeIntInRange(0, 40) if kind == row_plan.K_VAR else 0)
        )
        plan.append((kind, a, b))
    return tuple(plan)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    target = fdp.ConsumeIntInRange(0, 4)
    if target == 0:
        plan = _plan(fdp)
        kind = fdp.ConsumeIntInRange(0, 2)
        partial = fdp.ConsumeBool()
        body = fdp.ConsumeBytes(fdp.remaining_bytes())
        sink = RowSink(plan, json_count=2, decoder=DECODER)
        try:
            sink.decode(body, 0, len(body), kind, partial)
            sink.take()
        except ValueError:
            pass
    elif target == 1:
        body = fdp.ConsumeBytes(fdp.remaining_bytes())
        reader = events.EventReader("binlog.000001", 4, checksum=False)
        try:
            for _ in reader.events([body]):
                pass
        except (MalformedEventError, events.UnsupportedEventError):
            pass
    elif target == 3 and SPLITTER is not None:
        checksum = fdp.ConsumeBool()
        body = fdp.ConsumeBytes(fdp.remaining_bytes())
        try:
            SPLITTER(body, 0, checksum)
        except ValueError:
            pass
    elif target == 4 and COUNTER is not None:
        sizes = fdp.ConsumeBytes(4 * fdp.ConsumeIntInRange(0, 12))
        images = fdp.ConsumeIntInRange(0, 3)
        json_bitmap = fdp.ConsumeIntInRange(-1, 4)
        body = fdp.ConsumeBytes(fdp.remaining_bytes())
        try:
            COUNTER(body, 0, len(body), images, sizes, json_bitmap)
        except ValueError:
            pass
    else:
        body = fdp.ConsumeBytes(fdp.remaining_bytes())
        try:
            json_binary.decode(body)
        except (json_binary.JsonBinaryError, ValueError):
            pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
