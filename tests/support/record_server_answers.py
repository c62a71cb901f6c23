"""Records the server answers the unit tests replay: what a throwaway MariaDB 10.11 and a
throwaway MySQL 9.7 answer to the queries the source sends (versions, global variables,
binlog heads, collations, the RDS procedure), the error texts the servers and the clients
give for the faults the tests classify, and the first event times of binlog files.

    python -m tests.support.record_server_answers            # both flavours
    python -m tests.support.record_server_answers mysql      # or one of them

One file per flavour goes to ``tests/data/server_answers/<flavour>-<series>.json``;
a rerun replaces it. Each answer is recorded under a *setting*: the global settings
(``SET GLOBAL ...``) in force when the query ran, ``default`` for the server as started.

Values are kept as JSON: strings, numbers and NULL as such, a DECIMAL as
``{"decimal": text}``, bytes as ``{"hex": ...}`` (see :func:`tests.support.server_answers
.value_of`, which reads them back).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

import pymysql

from cdc_source import tls
from cdc_source.embedded_server import EmbeddedServer
from tests.support.certs import make_tls_files, server_args
from tests.support.mysql_dist import ensure
from tests.support.server_answers import ALL_PAD_ATTRIBUTES, COLLATIONS_DISCOVERY

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "data" / "server_answers"
FILES = {"mysql": "mysql-9.7.json", "mariadb": "mariadb-10.11.json"}

VARIABLES = (
    "gtid_mode",
    "gtid_binlog_pos",
    "gtid_strict_mode",
    "lower_case_table_names",
    "log_bin_compress",
    "binlog_transaction_compression",
    "binlog_row_value_options",
    "binlog_expire_logs_seconds",
    "expire_logs_days",
)
QUERIES = (
    "SELECT VERSION(), @@version_comment",
    "SELECT VERSION()",
    *(f"SELECT @@global.{name}" for name in VARIABLES),
    "SHOW GLOBAL STATUS LIKE 'binlog_snapshot_file'",
    "SHOW BINARY LOG STATUS",
    "SHOW MASTER STATUS",
    "CALL mysql.rds_show_configuration",
    COLLATIONS_DISCOVERY,
    ALL_PAD_ATTRIBUTES,
)
# Settings under which the queries are asked again: (name, flavour, statements).
SETTINGS = (
    (
        "binlog_row_value_options=PARTIAL_JSON",
        "mysql",
        ["SET GLOBAL binlog_row_value_options = 'PARTIAL_JSON'"],
    ),
    ("binlog_row_value_options=", "mysql", ["SET GLOBAL binlog_row_value_options = ''"]),
    (
        "binlog_transaction_compression=ON",
        "mysql",
        ["SET GLOBAL binlog_transaction_compression = ON"],
    ),
    (
        "binlog_transaction_compression=OFF",
        "mysql",
        ["SET GLOBAL binlog_transaction_compression = OFF"],
    ),
    ("log_bin_compress=ON", "mariadb", ["SET GLOBAL log_bin_compress = ON"]),
    ("log_bin_compress=OFF", "mariadb", ["SET GLOBAL log_bin_compress = OFF"]),
    ("binlog_expire_logs_seconds=7200", "both", ["SET GLOBAL binlog_expire_logs_seconds = 7200"]),
    (
        "binlog_expire_logs_seconds=604800",
        "both",
        ["SET GLOBAL binlog_expire_logs_seconds = 604800"],
    ),
    (
        "binlog_expire_logs_seconds=0, expire_logs_days=7",
        "mariadb",  # MySQL 8.4 removed expire_logs_days
        ["SET GLOBAL binlog_expire_logs_seconds = 0", "SET GLOBAL expire_logs_days = 7"],
    ),
    ("binlog_expire_logs_seconds=0", "both", ["SET GLOBAL binlog_expire_logs_seconds = 0"]),
    (
        "gtid_mode=OFF",  # the test servers start with gtid_mode=ON
        "mysql",
        [
            "SET GLOBAL gtid_mode = ON_PERMISSIVE",
            "SET GLOBAL gtid_mode = OFF_PERMISSIVE",
            "SET GLOBAL gtid_mode = OFF",
        ],
    ),
)
SETTING_QUERIES = (
    *(f"SELECT @@global.{name}" for name in VARIABLES),
    "SHOW GLOBAL STATUS LIKE 'binlog_snapshot_file'",
)


def as_json(value):
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"hex": bytes(value).hex()}
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise TypeError(f"no JSON form for {value!r}")


def error_of(err: BaseException) -> dict:
    args = list(err.args)
    return {
        "class": type(err).__name__,
        "module": type(err).__module__,
        "code": args[0] if len(args) > 1 else None,
        "message": str(args[1] if len(args) > 1 else (args[0] if args else "")),
    }


def ask(cur, query: str) -> dict:
    try:
        cur.execute(query)
    except pymysql.err.MySQLError as err:
        return {"error": error_of(err)}
    return {
        "columns": [d[0] for d in cur.description or ()],
        "rows": [[as_json(v) for v in row] for row in cur.fetchall()],
    }


def failure(connect) -> dict:
    """The error ``connect()`` raises; where it connects instead, the session's
    ``Ssl_cipher`` (empty: not encrypted)."""
    try:
        conn = connect()
    except Exception as err:  # noqa: BLE001 - recorded as raised
        return error_of(err)
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        cipher = cur.fetchone()[1]
    conn.close()
    return {"connected": True, "Ssl_cipher": as_json(cipher)}


def provoked_errors(server: EmbeddedServer, info, admin, flavour: str, files) -> dict:
    """The server and client errors of the retry and TLS tests, provoked for real."""
    host, port = info.host, info.port
    errors: dict[str, dict] = {}
    cur = admin.cursor()

    def pymysql_connect(**kwargs):
        args = {"host": host, "port": port, "user": info.user, "password": info.password}
        return lambda: pymysql.connect(**(args | kwargs))

    errors["access denied"] = failure(pymysql_connect(password="wrong"))
    errors["unknown database"] = failure(pymysql_connect(database="nope"))
    errors["unknown column"] = ask(cur, "SELECT x")["error"]
    errors["unknown table"] = ask(cur, "SELECT * FROM mysql.no_such_table")["error"]
    errors["unknown variable"] = ask(cur, "SELECT @@global.no_such_variable")["error"]
    errors["syntax error"] = ask(cur, "SHOW NO SUCH STATUS")["error"]
    with info.admin_connect() as dump:  # the server closes a failed dump's connection
        errors["binlog dump of a missing file"] = _dump_missing_file(dump)

    # A user without REPLICATION CLIENT / BINLOG MONITOR reading the head.
    cur.execute("CREATE USER 'plain'@'%' IDENTIFIED BY 'plain-pw'")
    cur.execute("GRANT SELECT ON *.* TO 'plain'@'%'")
    with pymysql_connect(user="plain", password="plain-pw")() as plain, plain.cursor() as pc:
        for statement in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
            errors[f"{statement} without privilege"] = ask(pc, statement).get("error")
        # Connections of an account without SUPER / CONNECTION ADMIN beyond
        # max_connections (MariaDB's least is 10) are refused.
        cur.execute("SET GLOBAL max_connections = 10")
        extra = []
        try:
            for _ in range(12):
                extra.append(pymysql_connect(user="plain", password="plain-pw")())
        except pymysql.err.MySQLError as err:
            errors["too many connections"] = error_of(err)
        for conn in extra:
            conn.close()
        cur.execute("SET GLOBAL max_connections = 151")

    # A connection killed from another, then used twice.
    victim = pymysql_connect()()
    victim_id = victim.thread_id()
    cur.execute(f"KILL {victim_id}")
    time.sleep(0.2)
    for name in ("query on a killed connection", "second query on a killed connection"):
        try:
            victim.cursor().execute("SELECT 1")
            errors[name] = None
        except Exception as err:  # noqa: BLE001 - recorded as raised
            errors[name] = error_of(err)

    # TLS: the servers answer a client's TLS the way they were started.
    if flavour == "mysql":  # started with the test certificates, for 127.0.0.1 only
        errors["pymysql: unknown CA"] = failure(
            pymysql_connect(
                **tls.pymysql_arguments({"ssl_mode": "verify-ca", "ssl_ca": str(files.other_ca)})
            )
        )
        errors["pymysql: host name mismatch"] = failure(
            pymysql_connect(
                host="localhost",
                **tls.pymysql_arguments({"ssl_mode": "verify-identity", "ssl_ca": str(files.ca)}),
            )
        )
        errors["mysqlclient: unknown CA"] = failure(
            _mysqlclient(host, port, info, {"ssl_mode": "verify-ca", "ssl_ca": str(files.other_ca)})
        )
        # (No host name mismatch through mysqlclient: its C library takes 'localhost' as
        # the default Unix socket, whatever server listens there.)
        cur.execute("SET GLOBAL require_secure_transport = ON")
        errors["insecure transport"] = failure(pymysql_connect(ssl_disabled=True))
        cur.execute("SET GLOBAL require_secure_transport = OFF")
    else:  # the Debian MariaDB as started here has no TLS
        errors["pymysql: server without TLS"] = failure(
            pymysql_connect(**tls.pymysql_arguments({"ssl_mode": "required"}))
        )
        for mode in ("required", "verify-ca", "verify-identity"):
            settings = {"ssl_mode": mode} | ({"ssl_ca": str(files.ca)} if "verify" in mode else {})
            errors[f"mysqlclient {mode}: server without TLS"] = failure(
                _mysqlclient(host, port, info, settings)
            )

    # Shutdown while a query runs; then nothing listens on the port.
    busy = pymysql_connect()()
    outcome: dict = {}

    def sleep() -> None:
        try:
            with busy.cursor() as c:
                c.execute("SELECT SLEEP(20)")
                outcome["returned"] = as_json(c.fetchone()[0])
        except Exception as err:  # noqa: BLE001 - recorded as raised
            outcome["error"] = error_of(err)

    sleeper = threading.Thread(target=sleep)
    sleeper.start()
    time.sleep(0.5)
    try:
        cur.execute("SHUTDOWN")
    except pymysql.err.MySQLError:
        pass
    sleeper.join(30)
    errors["query during shutdown"] = outcome
    server.process.wait(60)
    errors["connection refused"] = failure(pymysql_connect(connect_timeout=5))
    return errors


def _mysqlclient(host: str, port: int, info, settings: dict):
    """mysqlclient with the arguments the source gives it."""
    import MySQLdb

    arguments = tls.mysqlclient_arguments(settings, MySQLdb._mysql.get_client_info())
    return lambda: MySQLdb.connect(
        host=host, port=port, user=info.user, password=info.password, **arguments
    )


def _dump_missing_file(conn) -> dict:
    """COM_BINLOG_DUMP (0x12) from a file the server does not have."""
    cur = conn.cursor()
    cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
    cur.execute("SET @mariadb_slave_capability = 4")
    name = b"binlog.999999"
    payload = (4).to_bytes(4, "little") + b"\x00\x00" + (4242).to_bytes(4, "little") + name
    try:
        conn._execute_command(0x12, payload)
        conn._read_packet()
    except pymysql.err.MySQLError as err:
        return error_of(err)
    raise AssertionError("the dump of a missing file did not fail")


def first_event_times(cur, datadir: Path) -> dict:
    """Binary logs opened in bursts (several in one second, some apart), each file's first
    event time (the FORMAT_DESCRIPTION's header timestamp) in ms, as SHOW BINARY LOGS
    lists them."""
    for pause in (0, 0, 1.1, 0, 2.1, 0, 0):
        time.sleep(pause)
        cur.execute("FLUSH BINARY LOGS")
    cur.execute("SHOW BINARY LOGS")
    names = [row[0] for row in cur.fetchall()]
    times = []
    for name in names:
        with open(datadir / name, "rb") as f:
            head = f.read(8)
        assert head[:4] == b"\xfebin"
        times.append(int.from_bytes(head[4:8], "little") * 1000)
    return {"files": names, "first_event_ms": times}


def record(flavour: str) -> dict:
    mysql = ensure() if flavour == "mysql" else None
    with tempfile.TemporaryDirectory(prefix="cdc-answers-") as tmp:
        files = make_tls_files(Path(tmp) / "tls")
        extra = server_args(files) if mysql else ()
        server = EmbeddedServer(buffer_pool="64M", mysql=mysql, extra_args=extra)
        info = server.start()
        try:
            with info.admin_connect() as admin, admin.cursor() as cur:
                answers = {"default": {q: ask(cur, q) for q in QUERIES}}
                for name, where, statements in SETTINGS:
                    if where not in (flavour, "both"):
                        continue
                    for statement in statements:
                        cur.execute(statement)
                    answers[name] = {q: ask(cur, q) for q in SETTING_QUERIES}
                version = answers["default"]["SELECT VERSION()"]["rows"][0][0]
                binlogs = first_event_times(cur, server.datadir)
                errors = provoked_errors(server, info, admin, flavour, files)
        finally:
            server.stop()
    client = {"pymysql": pymysql.__version__, "python": sys.version.split()[0]}
    try:
        import MySQLdb

        client["mysqlclient"] = ".".join(map(str, MySQLdb.version_info[:3]))
        client["mysqlclient library"] = MySQLdb._mysql.get_client_info()
    except ImportError:
        pass
    return {
        "server": version,
        "recorded by": "python -m tests.support.record_server_answers",
        "clients": client,
        "answers": answers,
        "errors": errors,
        "binary logs": binlogs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flavours", nargs="*", help="mysql, mariadb (default: both)")
    args = parser.parse_args(argv)
    unknown = set(args.flavours) - set(FILES)
    if unknown:
        parser.error(f"unknown flavour(s) {', '.join(sorted(unknown))}")
    OUT.mkdir(parents=True, exist_ok=True)
    for flavour in args.flavours or sorted(FILES):
        path = OUT / FILES[flavour]
        path.write_text(json.dumps(record(flavour), indent=1, ensure_ascii=False) + "\n")
        print(f"{flavour}: {path} ({path.stat().st_size} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
