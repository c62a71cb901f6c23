"""The connection options (docs/options.md): how the source reaches the server: address,
account, TLS, the server ids of its binlog dumps, the server's time zone, and how long and
how often it tries again."""

from __future__ import annotations

from cdc_source import option_values as values
from cdc_source.option_spec import Option
from cdc_source.retry import DEFAULT_MAX_RETRIES

CONNECTION_OPTIONS: tuple[Option, ...] = (
    Option(
        "hostname",
        kind="string",
        shown_default="(required)",
        summary="server host name or IP (required)",
        manual="server host name or IP",
    ),
    Option(
        "port",
        kind="integer 1-65535",
        field="port",
        parse=values.port,
        default=3306,
        shown_default="`3306`",
        summary="server port, default 3306",
        manual="server port",
    ),
    Option(
        "username",
        kind="string",
        shown_default="(required)",
        summary="account with SELECT, REPLICATION SLAVE, REPLICATION CLIENT (required)",
        manual="the CDC account",
    ),
    Option(
        "password",
        kind="string",
        field="password",
        parse=values.text,
        default="",
        shown_default="empty",
        summary="password of that account",
        manual="its password (never logged)",
    ),
    Option(
        "ssl-mode",
        kind="one of disabled|preferred|required|verify-ca|verify-identity",
        shown_default="`preferred`",
        summary=(
            "disabled, preferred (default: TLS when the server offers it; none on a loopback "
            "host unless set), required (TLS, certificate not checked), verify-ca (checked "
            "against ssl-ca) or verify-identity (also the host name)"
        ),
        manual=(
            "TLS, as the MySQL client's `--ssl-mode`: `disabled`; `preferred` (TLS when the "
            "server offers it, else unencrypted); `required` (TLS or fail, the certificate is"
            " not checked); `verify-ca` (also checks the server's certificate chain against "
            "`ssl-ca`); `verify-identity` (also that the certificate is for `hostname`: the "
            "one to use across a network). Without the option a loopback host (`localhost`, "
            "`127.x`, `::1`) connects unencrypted, where TLS protects nothing; set it for an "
            "SSH tunnel to a server that requires TLS. Applies to every connection: the "
            "driver's, the binlog dumps and both snapshot clients. MySQL's spelling "
            "(`VERIFY_IDENTITY`) is accepted"
        ),
    ),
    Option(
        "ssl-ca",
        kind="file",
        shown_default="unset",
        summary="CA certificate file (PEM) for verify-ca and verify-identity",
        manual=(
            "CA certificate file (PEM) the server's certificate is checked against; needed "
            "by, and only used with, `verify-ca` and `verify-identity`. For a cloud database "
            "its provider's bundle (Amazon RDS: the region's bundle)"
        ),
    ),
    Option(
        "ssl-cert",
        kind="file",
        shown_default="unset",
        summary="client certificate file (PEM), with ssl-key, for accounts REQUIRE X509",
        manual=(
            "a client certificate and its private key (PEM), for accounts created `REQUIRE "
            "X509` (or `ISSUER`/`SUBJECT`); with `ssl-mode` `required` or stronger"
        ),
    ),
    Option(
        "ssl-key",
        kind="file",
        shown_default="unset",
        summary="the client certificate's private key file (PEM)",
        manual=(
            "a client certificate and its private key (PEM), for accounts created `REQUIRE "
            "X509` (or `ISSUER`/`SUBJECT`); with `ssl-mode` `required` or stronger"
        ),
    ),
    Option(
        "server-id",
        kind="id or range a-b",
        shown_default="`5400-5431`",
        summary=(
            "replica server id or range 'a-b', default 5400-5431, longer when a batch has "
            "more tasks; a single id only where a query never snapshots (a binlog-only "
            "scan.startup.mode) and scan.binlog.parallelism is 1"
        ),
        manual=(
            "a range `a-b` of replica server ids: a batch's binlog tasks take the first ids, "
            "its snapshot tasks the next ones, so the range also caps the tasks of a batch. "
            "The default grows past 5431 when the two parallelisms need more than 32 ids. A "
            "single id (Flink CDC's usual setting) is accepted where one binlog task is all a"
            " batch runs: a `scan.startup.mode` that never snapshots (`latest-offset`, and "
            "the other binlog-only modes) with `scan.binlog.parallelism` 1; otherwise it is "
            "refused, saying why (a snapshot batch runs its binlog task and its snapshot "
            "tasks at once, each dump needing its own id). Give concurrent queries disjoint "
            "ids"
        ),
    ),
    Option(
        "server-time-zone",
        kind="zone",
        field="server_time_zone",
        parse=values.utc_zone,
        default="UTC",
        shown_default="`UTC`",
        summary=(
            "UTC only (Flink CDC's option): TIMESTAMP values are read as exact instants "
            "whatever the server's zone, so there is nothing for another zone to change; "
            "spark.sql.session.timeZone sets the zone they are shown in"
        ),
        manual=(
            "**only UTC is accepted** (also `+00:00`, `Etc/UTC`, `GMT`, `Z`); any other zone "
            "is refused with the reason. In Flink CDC it is the session zone a MySQL "
            "TIMESTAMP is converted to a local date-time in (and must equal the server's "
            "`time_zone`). Here every session runs in UTC and a TIMESTAMP is read as the "
            "exact instant it stores (a Spark `timestamp`) from the snapshot and the binlog "
            "alike, whatever the server's or the writer's `time_zone` (tested with both at "
            "`+05:00`), so a zone would change nothing: remove the option and show values in "
            "a zone with `spark.sql.session.timeZone`. DATETIME is the wall-clock value as "
            "stored (see [Types](types.md))"
        ),
    ),
    Option(
        "connect.timeout",
        kind="duration",
        field="connect_timeout",
        parse=values.whole_seconds,
        default=30,
        shown_default="`30s`",
        summary=(
            "duration to wait for a connection (e.g. 30s, 1min; a bare number is seconds; "
            "rounded up to whole seconds), default 30s; a read that waits 10 times as long "
            "counts as a lost connection"
        ),
        manual=(
            "how long to wait to open a connection (TCP connect and handshake), a duration in"
            " Flink's syntax (`30s`, `1min`, `500ms`, `2 h`; a bare number is seconds, where "
            "Flink reads milliseconds); the clients take whole seconds, so a fraction is "
            "rounded up (a WARN says so). A read that waits ten times as long counts as a "
            "lost connection"
        ),
    ),
    Option(
        "connect.max-retries",
        kind="integer >= 0",
        field="connect_max_retries",
        parse=values.non_negative,
        default=DEFAULT_MAX_RETRIES,
        shown_default="`10`",
        summary=(
            "retries of a connection or query after a transient fault (server restart, "
            "fail-over, lost connection), with waits of 0.5 s doubling to at most 15 s; "
            "default 10 (about 90 s of waiting); 0 fails at the first fault"
        ),
        manual=(
            "retries of a connection, query or binlog read after a transient fault (see "
            "[Faults](semantics.md#faults)), waiting 0.5 s, 1 s, 2 s, ... at most 15 s: the "
            "default waits about 90 s in all, enough for a server restart or fail-over of a "
            "minute. `0` fails at the first fault"
        ),
    ),
)
