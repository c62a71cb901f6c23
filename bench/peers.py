"""The peers every cdc-mysql number is compared with, measured in the same run.

- Spark's own JDBC reader into the ``noop`` sink (needs a MariaDB/MySQL JDBC driver jar);
- the raw client: PyMySQL with an unbuffered ``SSCursor`` reading the whole table;
- the raw binlog library: ``pymysqlreplication.BinLogStreamReader`` over the same range,
  row events only, decoding every row (``event.rows``) and counting.
"""

from __future__ import annotations

import os
import re
import time

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
from report import Measurement

JDBC_JAR_CANDIDATES = (
    "/usr/share/java/mariadb-java-client.jar",
    "/usr/share/java/mysql-connector-j.jar",
    "/usr/share/java/mysql-connector-java.jar",
)


def find_jdbc_jar(explicit: str | None) -> str | None:
    for path in ([explicit] if explicit else []) + list(JDBC_JAR_CANDIDATES):
        if path and os.path.exists(path):
            return path
    return None


def jdbc_driver_class(jar: str) -> str:
    """The driver class in the jar.

    The URL is ``jdbc:mysql:`` for both drivers (MariaDB Connector/J 2.x accepts it): with
    ``jdbc:mariadb:`` Spark picks no MySQL dialect, quotes columns with double quotes and
    the server reads them as string literals.
    """
    return "org.mariadb.jdbc.Driver" if "mariadb" in jar else "com.mysql.cj.jdbc.Driver"


def short_error(err: BaseException) -> str:
    """One line for a (possibly Java) exception: its root cause where one is shown."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    causes = [line for line in lines if line.startswith("Caused by:")]
    text = causes[-1] if causes else (lines[0] if lines else type(err).__name__)
    return text[:300]


def jdbc_read(
    spark,
    jar: str,
    host: str,
    port: int,
    user: str,
    password: str,
    database: str,
    table: str,
    rows: int,
    fetch_size: int,
    partitions: int,
) -> Measurement:
    """``spark.read.format("jdbc")`` of the whole table into ``write.format("noop")``.

    ``rows`` is the table's row count (the noop sink does not report one); with more than
    one partition the read is split on the integer primary key ``id`` over 1..rows.
    """
    driver = jdbc_driver_class(jar)
    reader = (
        spark.read.format("jdbc")
        .option("url", f"jdbc:mysql://{host}:{port}/{database}")
        .option("driver", driver)
        .option("dbtable", table)
        .option("user", user)
        .option("password", password)
        .option("fetchsize", str(fetch_size))
    )
    if partitions > 1:
        reader = (
            reader.option("partitionColumn", "id")
            .option("lowerBound", "1")
            .option("upperBound", str(rows + 1))
            .option("numPartitions", str(partitions))
        )
    began = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - began
    name = f"jdbc x{partitions}" if partitions > 1 else "jdbc"
    return Measurement(
        name,
        "peer",
        rows,
        seconds,
        {"driver": driver, "jar": jar, "fetchsize": fetch_size, "partitions": partitions},
    )


def pymysql_scan(
    connection_kwargs: dict, database: str, table: str, fetch_size: int
) -> Measurement:
    """PyMySQL, unbuffered: ``SELECT *`` of the whole table, rows fetched and counted."""
    conn = pymysql.connect(
        **connection_kwargs,
        database=database,
        charset="utf8mb4",
        cursorclass=pymysql.cursors.SSCursor,
        init_command="SET time_zone = '+00:00'",
    )
    try:
        began = time.perf_counter()
        count = 0
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            while True:
                fetched = cur.fetchmany(fetch_size)
                if not fetched:
                    break
                count += len(fetched)
        seconds = time.perf_counter() - began
    finally:
        conn.close()
    return Measurement("pymysql SSCursor", "peer", count, seconds, {"fetch_size": fetch_size})


def _file_number(name: str) -> int:
    match = re.search(r"(\d+)$", name)
    return int(match.group(1)) if match else 0


def binlog_raw(
    connection_kwargs: dict,
    server_id: int,
    start: tuple[str, int],
    end: tuple[str, int],
    database: str,
    table: str,
) -> Measurement:
    """mysql-replication over ``(start, end]``: row events of one table, every row decoded."""
    end_key = (_file_number(end[0]), end[1])
    stream = BinLogStreamReader(
        connection_settings=dict(connection_kwargs),
        server_id=server_id,
        log_file=start[0],
        log_pos=start[1],
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, RotateEvent],
        only_schemas=[database],
        only_tables=[table],
    )
    began = time.perf_counter()
    rows = events = 0
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                continue
            if (_file_number(stream.log_file), stream.log_pos) > end_key:
                break
            events += 1
            rows += len(event.rows)
    finally:
        stream.close()
    seconds = time.perf_counter() - began
    return Measurement(
        "pymysqlreplication",
        "peer",
        rows,
        seconds,
        {"row_events": events, "blocking": False},
    )
