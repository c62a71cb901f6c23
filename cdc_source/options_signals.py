"""The signal options (docs/options.md): where a running query takes requests for
snapshots on demand (:mod:`cdc_source.rereads`)."""

from __future__ import annotations

from cdc_source.option_spec import Option
from cdc_source.option_values import OptionError
from cdc_source.rereads import RequestError, check_table


def _directory(raw: str, key: str) -> str | None:
    if raw.startswith(("s3:", "s3a:", "gs:", "abfs:", "abfss:", "hdfs:", "dbfs:")):
        raise OptionError(
            f"option '{key}' must be a folder on the driver's file system, got '{raw}'"
        )
    return raw or None


def _table(raw: str, key: str) -> str | None:
    if not raw.strip():
        return None
    try:
        return check_table(raw)
    except RequestError as err:
        raise OptionError(f"option '{key}': {err}") from None


SIGNAL_OPTIONS: tuple[Option, ...] = (
    Option(
        "signal.directory",
        kind="folder",
        field="signal_directory",
        parse=_directory,
        default=None,
        shown_default="unset",
        summary=(
            "a folder on the driver (the query's checkpoint location) whose 'signals' "
            "subfolder the query reads requests from at each batch: 'cdc-mysql signal "
            "CHECKPOINT snapshot db.t' leaves one there"
        ),
        manual=(
            "a folder on the driver's file system, best the query's checkpoint location "
            "(the same path as `checkpointLocation`). At each micro-batch the query takes "
            "the request files `cdc-mysql signal CHECKPOINT snapshot|stop-snapshot ...` "
            "left in its `signals` subfolder, once each (the offset remembers the last one "
            "taken), and deletes them once the batch that took them is committed. See "
            "[Snapshots on demand](usage.md#snapshots-on-demand)"
        ),
    ),
    Option(
        "signal.data.collection",
        kind="db.table",
        field="signal_table",
        parse=_table,
        default=None,
        shown_default="unset",
        summary=(
            "Debezium's signal table (columns id, type, data): a row of type "
            "'execute-snapshot' asks for a re-read of the tables its JSON data names"
        ),
        manual=(
            "Debezium's signal table, `db.table` with the columns `id` (an increasing "
            "integer), `type` and `data` (JSON). When a batch's binlog range holds rows of "
            "it, the driver reads the rows with an `id` above the highest it took (a "
            "`SELECT`; the driver decodes no row of the binlog) and acts on those of type "
            '`execute-snapshot` (`data`: `{"data-collections": ["db.t"], '
            '"additional-conditions": [{"data-collection": "db.t", "filter": '
            '"id > 10"}]}`) and `stop-snapshot`. It need not be captured. See '
            "[Snapshots on demand](usage.md#snapshots-on-demand)"
        ),
    ),
)
