"""String keys under a NO PAD collation: trailing spaces make distinct keys.

The server compares ``'b'`` and ``'b '`` as different keys under NO PAD and as the same
key under PAD SPACE (the default collations). Chunk boundaries, the frontier and key
identity must follow the column's pad attribute: the one the server reports in
information_schema.COLLATIONS.PAD_ATTRIBUTE where it does (MySQL 8.0+), the collation's
name otherwise (MariaDB before 12.1, whose NO PAD collations are ``*_nopad_*``). Were a
NO PAD key taken as PAD SPACE, ``'b'`` and ``'b '`` would collapse into one key (one of
them lost by the snapshot, or an update applied to the wrong row)."""

from __future__ import annotations

import pytest

from cdc_source.catalog import discover_tables
from tests.support.streams import StreamRun, handover_batch, read_output, wait_for

ONE_DECODER = True  # the pad attribute is the catalog's, not the row decoder's

# (MariaDB collation, MySQL 8 collation, case-insensitive?)
COLLATIONS = {
    "binary": ("utf8mb4_nopad_bin", "utf8mb4_0900_bin", False),
    "case-insensitive": ("utf8mb4_unicode_nopad_ci", "utf8mb4_0900_ai_ci", True),
}
WORDS = ["", " ", "a", "A ", "b", "b ", "B  ", "c", "C ", "d", "e ", "e  ", "f", "F \t"]


@pytest.mark.parametrize("kind", list(COLLATIONS))
def test_no_pad_keys_with_trailing_spaces_stream_as_distinct_keys(server, spark, tmp_path, kind):
    mariadb_collation, mysql_collation, folds_case = COLLATIONS[kind]
    collation = mariadb_collation if server.is_mariadb else mysql_collation
    database = server.fresh_database(f"nopad_{kind.replace('-', '_')}_db")
    server.execute(
        f"CREATE TABLE words (w VARCHAR(20) COLLATE {collation} PRIMARY KEY, n INT) "
        "DEFAULT CHARSET=utf8mb4",
        database=database,
    )
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO words VALUES (%s, %s)", [(w, i) for i, w in enumerate(WORDS)])
        (key,) = discover_tables(conn, lambda db, t: db == database)[0].key_columns
    assert key.collation == collation and not key.pad_space

    options = server.source_options(
        database,
        rf"{database}\.words",
        **{"scan.incremental.snapshot.chunk.size": "2", "scan.snapshot.chunks-per-batch": "2"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    query = run.start()
    wait_for(lambda: len(run.batches_seen) >= 2, 120, "two snapshot batches", query)
    server.execute(
        "UPDATE words SET n = n + 100 WHERE w = 'b '",  # not 'b' nor 'B  '
        "DELETE FROM words WHERE w = 'e '",  # not 'e  '
        "INSERT INTO words VALUES ('c  ', 98), ('  ', 97)",  # new keys beside 'c', ' '
        "UPDATE words SET w = 'd ' WHERE w = 'd'",  # a real key change
        "UPDATE words SET n = -1 WHERE w = ''",  # not ' ' nor '  '
        database=database,
    )
    wait_for(lambda: handover_batch(run.checkpoint) is not None, 120, "the hand-over", query)
    query.stop()
    run.run_to_end()

    def identity(word: str) -> str:
        return word.casefold() if folds_case else word  # trailing spaces always count

    output = read_output(spark, run.out)
    reads = [identity(r["w"]) for r in output if r["_op"] == "r"]
    assert len(reads) == len(set(reads)), "a key was read twice by the snapshot"
    assert {"b", "b ", "b  "} <= {w.casefold() for w in reads}, "keys that differ by spaces"
    latest: dict[str, dict] = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        latest[identity(row["w"])] = row
    replayed = {(r["w"], r["n"]) for r in latest.values() if r["_op"] != "d"}
    assert replayed == set(server.query("SELECT w, n FROM words", database=database))
