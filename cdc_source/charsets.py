"""Text of character sets other than UTF-8, turned into Unicode exactly as the server does.

A column's bytes reach the source as stored, by the binlog and (for these columns) by the
snapshot alike, and both decode them here, so the same stored value is the same string.
Python's codecs disagree with the server's conversion tables for several single-byte
character sets (MySQL's ``latin1`` is cp1252 with five more code points; its ``cp866``,
``koi8u``, ``greek`` and ``cp1256`` map some bytes to other characters than Python's), so
a single-byte character set is decoded by a table of 256 characters read from the server
itself when the query starts (:func:`read_byte_tables`). Multi-byte ones (gbk, big5,
sjis, ...) take Python's codec. A byte or sequence that has no character in the set (the
server would show ``?``) is refused, naming it: never replaced."""

from __future__ import annotations

import functools

from cdc_source.refusals import ValueRefusedError

UTF8 = frozenset({"utf8mb4", "utf8mb3", "utf8"})
UNMAPPED = "\ufffd"  # in a byte table: the server has no character for the byte

# Python's codec for each multi-byte character set.
MULTI_BYTE_CODECS = {
    "ucs2": "utf_16_be",
    "utf16": "utf_16_be",
    "utf16le": "utf_16_le",
    "utf32": "utf_32_be",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "eucjpms": "euc_jp",
    "euckr": "euc_kr",
}
# Python's codec for a single-byte set whose table the query could not read (a column
# added while it runs, known only from the binlog): refused where it has no character.
SINGLE_BYTE_CODECS = {
    "latin1": "cp1252",
    "latin2": "iso8859_2",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "tis620": "tis_620",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "macroman": "mac_roman",
    "ascii": "ascii",
}

_ALL_BYTES = bytes(range(256))


def is_utf8(charset: str | None) -> bool:
    return (charset or "utf8mb4").lower() in UTF8


def read_byte_tables(cur, charsets: set[str]) -> dict[str, str]:
    """``{charset: 256 characters}`` for the single-byte character sets among
    ``charsets``, as the server converts each byte to UTF-8 (``UNMAPPED`` where it has
    no character and prints ``?``)."""
    wanted = sorted(c for c in charsets if c and not is_utf8(c))
    if not wanted:
        return {}
    cur.execute(
        "SELECT CHARACTER_SET_NAME, MAXLEN FROM information_schema.CHARACTER_SETS "
        f"WHERE CHARACTER_SET_NAME IN ({', '.join(['%s'] * len(wanted))})",
        wanted,
    )
    single = sorted(_text(name) for name, maxlen in cur.fetchall() if int(maxlen) == 1)
    tables = {}
    for charset in single:
        cur.execute(f"SELECT CONVERT(CONVERT(x'{_ALL_BYTES.hex()}' USING {charset}) USING utf8mb4)")
        (converted,) = cur.fetchone()
        converted = _text(converted)
        if len(converted) != 256:
            continue  # not one character per byte: decoded by its codec instead
        tables[charset] = "".join(
            UNMAPPED if char == "?" and byte != 0x3F else char
            for byte, char in enumerate(converted)
        )
    return tables


@functools.lru_cache(maxsize=256)
def text_decoder(column: str, charset: str, byte_table: str | None) -> TextDecoder:
    """The decoder of one column, built once (its translation table costs 256 entries),
    not once per value or per fetch."""
    return TextDecoder(column, charset, byte_table)


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


class TextDecoder:
    """Decodes one column's stored bytes: by the server's byte table, else by Python's
    codec; refuses what has no character."""

    def __init__(self, column: str, charset: str, byte_table: str | None) -> None:
        self.column = column
        self.charset = charset.lower()
        self.table = (
            None if byte_table is None else str.maketrans({i: c for i, c in enumerate(byte_table)})
        )
        self.codec = MULTI_BYTE_CODECS.get(self.charset) or SINGLE_BYTE_CODECS.get(self.charset)
        if self.table is None and self.codec is None:
            raise ValueRefusedError(
                column,
                f"of character set {charset}",
                "cannot be converted to Unicode by cdc-mysql; exclude the table, or convert "
                "the column to utf8mb4",
            )

    def __call__(self, raw: bytes) -> str:
        if self.table is not None:
            text = raw.decode("latin-1").translate(self.table)
            if UNMAPPED in text:
                raise self._refusal(raw, text.index(UNMAPPED))
            return text
        try:
            return raw.decode(self.codec)
        except UnicodeDecodeError as err:
            raise self._refusal(raw, err.start) from None

    def _refusal(self, raw: bytes, at: int) -> ValueRefusedError:
        start = max(0, at - 16)
        shown = ("..." if start else "") + raw[start : at + 16].hex()
        shown += "..." if at + 16 < len(raw) else ""
        return ValueRefusedError(
            self.column,
            f"x'{shown}'",
            f"holds byte 0x{raw[at]:02x} at offset {at}, which is no character of the "
            f"column's character set {self.charset} (the server itself would show '?'): "
            "correct the value, or store such data in a binary column",
        )
