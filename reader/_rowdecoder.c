/*
 * Row images of binlog rows events, decoded into Arrow buffers.
 *
 * Thin C in the style of mysqlclient's and asyncpg's extensions: the event framing, the
 * table maps and every decision live in Python (cdc_source/binlog, cdc_source/binlog/row_plan.py);
 * this file only walks the row images of one rows event and appends each value to
 * per-column buffers (validity bitmap, int32 offsets, values). The layout of each
 * column kind is documented in cdc_source/binlog/row_plan.py, and reader/row_decoder_py.py is the
 * pure-Python twin the tests compare this file against.
 *
 * Every read is bounds-checked against the end of the event's row data. Bad bytes raise
 * ValueError with the offset; nothing reads or writes outside a buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    K_SINT = 1, K_UINT, K_FLOAT, K_DOUBLE, K_DECIMAL, K_DATE, K_DATETIME2, K_TIMESTAMP2,
    K_TIME2, K_YEAR, K_VAR, K_ENUM, K_SET, K_BIT, K_DATETIME, K_TIMESTAMP, K_TIME
};
enum { WRITE = 0, UPDATE = 1, DELETE = 2 };
#define MAX_DECIMAL128 38
#define MAX_VAR_BYTES ((size_t)0x7FFFFFFF)

static PyObject *RowDecodeError;
static PyObject *PartialJsonError;
static PyObject *InvalidDateError; /* args: (column index, the value as the server prints it) */

#define REFUSED_TEXT 40

/* MariaDB allows DECIMAL scales up to 38 (MySQL up to 30). */
#define MAX_DECIMAL_SCALE 38

typedef struct { uint8_t *data; size_t len, cap; } Buf;

typedef struct { int kind, a, b, width; } Plan;

typedef struct { Buf validity, offsets, values; } Column;

typedef struct {
    PyObject_HEAD
    int ncols, json_count, broken;
    Plan *plan;
    Py_ssize_t rows, nbytes;
    Buf has_before, has_after;
    Column *before, *after;
} RowSink;

/* ---- buffers --------------------------------------------------------------------- */

static int buf_reserve(Buf *b, size_t extra) {
    if (extra > SIZE_MAX - b->len) { PyErr_NoMemory(); return -1; }
    size_t need = b->len + extra;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) { cap = need; break; }
        cap *= 2;
    }
    uint8_t *p = PyMem_Realloc(b->data, cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    memset(p + b->cap, 0, cap - b->cap);  /* validity bits start cleared */
    b->data = p;
    b->cap = cap;
    return 0;
}

static int buf_append(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static int buf_zeros(Buf *b, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memset(b->data + b->len, 0, n);
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) { PyMem_Free(b->data); b->data = NULL; b->len = b->cap = 0; }

/* Set bit `row` of a bitmap to `valid`, growing it to hold the row. */
static int bit_set(Buf *b, Py_ssize_t row, int valid) {
    size_t need = (size_t)(row / 8) + 1;
    if (need > b->len) {
        if (buf_reserve(b, need - b->len) < 0) return -1;
        memset(b->data + b->len, 0, need - b->len);
        b->len = need;
    }
    if (valid) b->data[row / 8] |= (uint8_t)(1u << (row % 8));
    return 0;
}

/* ---- bounded reading -------------------------------------------------------------- */

typedef struct { const uint8_t *p; size_t pos, end; } Reader;

static int need(Reader *r, size_t n) {
    if (n > r->end - r->pos) {
        PyErr_Format(RowDecodeError, "row image needs %zu bytes at offset %zu, past %zu",
                     n, r->pos, r->end);
        return -1;
    }
    return 0;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* ---- temporal helpers ------------------------------------------------------------- */

static int days_in_month(int64_t y, int m) {
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return d[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
 * Returns 0 and sets *ok = 0 for zero or impossible dates, which have no Spark value. */
static int64_t days_from_civil(int64_t y, int m, int d, int *ok) {
    if (y < 1 || y > 9999 || m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) {
        *ok = 0;
        return 0;
    }
    *ok = 1;
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int fraction(Reader *r, int fsp, int64_t *micros) {
    int n = (fsp + 1) / 2;
    if (n == 0) { *micros = 0; return 0; }
    if (need(r, n) < 0) return -1;
    uint64_t v = be(r->p + r->pos, n);
    r->pos += n;
    *micros = (int64_t)v * (n == 1 ? 10000 : n == 2 ? 100 : 1);
    return 0;
}

/* ---- one value -------------------------------------------------------------------- */

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

static int decimal_size(int precision, int scale) {
    int whole = precision - scale;
    return whole / 9 * 4 + DIG2BYTES[whole % 9] + scale / 9 * 4 + DIG2BYTES[scale % 9];
}

static int append_null(Column *col, const Plan *pl) {
    if (pl->width > 0) return buf_zeros(&col->values, pl->width);
    int32_t end = (int32_t)col->values.len;
    return buf_append(&col->offsets, &end, 4);
}

static int append_i64(Column *col, int64_t v) { return buf_append(&col->values, &v, 8); }

static int append_bytes(Column *col, const uint8_t *p, size_t n, size_t pad) {
    size_t total = n < pad ? pad : n;
    if (total > MAX_VAR_BYTES - col->values.len) {
        PyErr_SetString(RowDecodeError, "a binary column passed 2 GiB in one block");
        return -1;
    }
    if (buf_append(&col->values, p, n) < 0) return -1;
    if (total > n && buf_zeros(&col->values, total - n) < 0) return -1;
    int32_t end = (int32_t)col->values.len;
    return buf_append(&col->offsets, &end, 4);
}

/* MySQL binary DECIMAL (bin2decimal): big-endian digit groups, sign in the first bit
 * (set for positive), negative values stored inverted. */
static int append_decimal(Column *col, Reader *r, const Plan *pl) {
    int precision = pl->a, scale = pl->b, whole = precision - scale;
    if (precision < 1 || precision > 65 || scale < 0 || scale > MAX_DECIMAL_SCALE || scale > precision) {
        PyErr_Format(RowDecodeError, "DECIMAL(%d,%d) cannot be decoded", precision, scale);
        return -1;
    }
    int size = decimal_size(precision, scale);  /* at most 30 bytes (DECIMAL(65,30)) */
    if (need(r, size) < 0) return -1;
    uint8_t raw[40];
    memcpy(raw, r->p + r->pos, size);
    r->pos += size;
    int negative = !(raw[0] & 0x80);
    raw[0] ^= 0x80;
    if (negative) for (int i = 0; i < size; i++) raw[i] ^= 0xFF;
    int pos = 0;
    uint32_t groups[16];
    int digs[16];
    int ngroups = 0, lead = whole % 9, trail = scale % 9;
#define GROUP(nd) do { int nb = DIG2BYTES[nd]; groups[ngroups] = (uint32_t)be(raw + pos, nb); \
                       digs[ngroups++] = nd; pos += nb; } while (0)
    if (lead) GROUP(lead);
    for (int i = 0; i < whole / 9; i++) GROUP(9);
    int int_groups = ngroups;
    for (int i = 0; i < scale / 9; i++) GROUP(9);
    if (trail) GROUP(trail);
#undef GROUP
    for (int i = 0; i < ngroups; i++) {
        uint32_t limit = 1;
        for (int k = 0; k < digs[i]; k++) limit *= 10;
        if (groups[i] >= limit) {
            PyErr_Format(RowDecodeError, "DECIMAL digit group %u has more than %d digits",
                         groups[i], digs[i]);
            return -1;
        }
    }
    if (precision <= MAX_DECIMAL128) {
        __int128 v = 0;
        for (int i = 0; i < ngroups; i++) {
            __int128 scale10 = 1;
            for (int k = 0; k < digs[i]; k++) scale10 *= 10;
            v = v * scale10 + groups[i];
        }
        if (negative) v = -v;
        return buf_append(&col->values, &v, 16);
    }
    char text[96];
    int n = 0;
    if (negative) text[n++] = '-';
    int started = 0;
    for (int i = 0; i < int_groups; i++) {
        if (!started) {
            if (groups[i] == 0) continue;
            n += snprintf(text + n, sizeof text - n, "%u", groups[i]);
            started = 1;
        } else {
            n += snprintf(text + n, sizeof text - n, "%09u", groups[i]);
        }
    }
    if (!started) text[n++] = '0';
    if (scale) {
        text[n++] = '.';
        for (int i = int_groups; i < ngroups; i++) {
            n += snprintf(text + n, sizeof text - n, "%0*u", digs[i], groups[i]);
        }
    }
    return append_bytes(col, (const uint8_t *)text, (size_t)n, 0);
}

/* A date or datetime that is neither a real date nor the all-zero date (2020-02-31 under
 * ALLOW_INVALID_DATES, 2020-00-15 without NO_ZERO_IN_DATE): spelled into `refused` for
 * the error, and *valid set to 2. */
static int refuse_date(char *refused, int *valid, int64_t y, int64_t m, int64_t d,
                       int64_t hms, int64_t micros, int has_time) {
    if (has_time)
        snprintf(refused, REFUSED_TEXT, "%04lld-%02lld-%02lld %02lld:%02lld:%02lld.%06lld",
                 (long long)y, (long long)m, (long long)d, (long long)(hms >> 12),
                 (long long)((hms >> 6) % 64), (long long)(hms % 64), (long long)micros);
    else
        snprintf(refused, REFUSED_TEXT, "%04lld-%02lld-%02lld", (long long)y, (long long)m,
                 (long long)d);
    *valid = 2;
    return 0;
}

/* Appends one non-NULL value. *valid is cleared for the all-zero date, which has no
 * Spark value and is appended as NULL; it is 2 for a date that is neither a real one
 * nor the zero date (spelled into `refused`), which the caller refuses. */
static int append_value(Column *col, Reader *r, const Plan *pl, int *valid, char *refused) {
    const uint8_t *p;
    int ok = 1;
    *valid = 1;
    switch (pl->kind) {
    case K_SINT: {
        if (need(r, pl->a) < 0) return -1;
        uint64_t v = le(r->p + r->pos, pl->a);
        r->pos += pl->a;
        int shift = 64 - 8 * pl->a;
        int64_t s = shift ? (int64_t)(v << shift) >> shift : (int64_t)v;
        return append_i64(col, s);
    }
    case K_UINT: case K_ENUM: case K_SET: {
        if (pl->a < 1 || pl->a > 8) {
            PyErr_Format(RowDecodeError, "integer width %d", pl->a);
            return -1;
        }
        if (need(r, pl->a) < 0) return -1;
        uint64_t v = le(r->p + r->pos, pl->a);
        r->pos += pl->a;
        return buf_append(&col->values, &v, 8);
    }
    case K_FLOAT:
        if (need(r, 4) < 0) return -1;
        p = r->p + r->pos; r->pos += 4;
        return buf_append(&col->values, p, 4);  /* little-endian IEEE, as on x86/ARM */
    case K_DOUBLE:
        if (need(r, 8) < 0) return -1;
        p = r->p + r->pos; r->pos += 8;
        return buf_append(&col->values, p, 8);
    case K_DECIMAL:
        return append_decimal(col, r, pl);
    case K_DATE: {
        if (need(r, 3) < 0) return -1;
        uint64_t v = le(r->p + r->pos, 3);
        r->pos += 3;
        int64_t days = days_from_civil((int64_t)(v >> 9), (int)((v >> 5) & 15), (int)(v & 31), &ok);
        int32_t d32 = (int32_t)days;
        *valid = ok;
        if (!ok && v != 0)
            refuse_date(refused, valid, (int64_t)(v >> 9), (v >> 5) & 15, v & 31, 0, 0, 0);
        return buf_append(&col->values, &d32, 4);
    }
    case K_DATETIME2: {
        if (need(r, 5) < 0) return -1;
        int64_t packed = (int64_t)be(r->p + r->pos, 5) - 0x8000000000LL;
        r->pos += 5;
        int64_t micros;
        if (fraction(r, pl->a, &micros) < 0) return -1;
        if (packed < 0) {
            PyErr_SetString(RowDecodeError, "DATETIME2 value below the zero date");
            return -1;
        }
        int64_t ymd = packed >> 17, hms = packed % (1 << 17), ym = ymd >> 5;
        int64_t days = days_from_civil(ym / 13, (int)(ym % 13), (int)(ymd % 32), &ok);
        *valid = ok;
        if (!ok && (ymd != 0 || hms != 0 || micros != 0))
            refuse_date(refused, valid, ym / 13, ym % 13, ymd % 32, hms, micros, 1);
        int64_t secs = ((days * 24 + (hms >> 12)) * 60 + ((hms >> 6) % 64)) * 60 + hms % 64;
        return append_i64(col, ok ? secs * 1000000 + micros : 0);
    }
    case K_TIMESTAMP2: {
        if (need(r, 4) < 0) return -1;
        int64_t secs = (int64_t)be(r->p + r->pos, 4);
        r->pos += 4;
        int64_t micros;
        if (fraction(r, pl->a, &micros) < 0) return -1;
        *valid = secs != 0;  /* 0 is the zero TIMESTAMP '0000-00-00 00:00:00' */
        return append_i64(col, secs * 1000000 + micros);
    }
    case K_TIME2: {
        int64_t packed;
        if (pl->a >= 5) {
            if (need(r, 6) < 0) return -1;
            packed = (int64_t)be(r->p + r->pos, 6) - 0x800000000000LL;
            r->pos += 6;
        } else {
            if (need(r, 3) < 0) return -1;
            int64_t intpart = (int64_t)be(r->p + r->pos, 3) - 0x800000;
            r->pos += 3;
            int64_t frac = 0;
            int n = (pl->a + 1) / 2;
            if (n) {
                if (need(r, n) < 0) return -1;
                frac = (int64_t)be(r->p + r->pos, n);
                r->pos += n;
                if (intpart < 0 && frac) { intpart += 1; frac -= (n == 1 ? 0x100 : 0x10000); }
                frac *= (n == 1 ? 10000 : 100);
            }
            packed = intpart * (1LL << 24) + frac;
        }
        int neg = packed < 0;
        uint64_t mag = neg ? (uint64_t)(-packed) : (uint64_t)packed;
        uint64_t hms = mag >> 24, us = mag % (1u << 24);
        int64_t total = (int64_t)(((((hms >> 12) % 1024) * 60 + ((hms >> 6) % 64)) * 60 + hms % 64) * 1000000 + us);
        return append_i64(col, neg ? -total : total);
    }
    case K_YEAR: {
        if (need(r, 1) < 0) return -1;
        int y = r->p[r->pos++];
        return append_i64(col, y ? 1900 + y : 0);
    }
    case K_VAR: {
        if (pl->a < 1 || pl->a > 4) {
            PyErr_Format(RowDecodeError, "length prefix of %d bytes", pl->a);
            return -1;
        }
        if (need(r, pl->a) < 0) return -1;
        uint64_t n = le(r->p + r->pos, pl->a);
        r->pos += pl->a;
        if (need(r, n) < 0) return -1;
        p = r->p + r->pos;
        r->pos += n;
        return append_bytes(col, p, n, (size_t)pl->b);
    }
    case K_BIT:
        if (need(r, pl->a) < 0) return -1;
        p = r->p + r->pos; r->pos += pl->a;
        return append_bytes(col, p, pl->a, 0);
    case K_DATETIME: {
        if (need(r, 8) < 0) return -1;
        uint64_t v = le(r->p + r->pos, 8);
        r->pos += 8;
        uint64_t date = v / 1000000, t = v % 1000000;
        int64_t days = days_from_civil(date / 10000, (int)(date / 100 % 100), (int)(date % 100), &ok);
        *valid = ok;
        if (!ok && v != 0)
            refuse_date(refused, valid, (int64_t)(date / 10000), (int64_t)(date / 100 % 100),
                        (int64_t)(date % 100),
                        (int64_t)((t / 10000) << 12 | (t / 100 % 100) << 6 | t % 100), 0, 1);
        int64_t secs = ((days * 24 + t / 10000) * 60 + t / 100 % 100) * 60 + t % 100;
        return append_i64(col, ok ? secs * 1000000 : 0);
    }
    case K_TIMESTAMP: {
        if (need(r, 4) < 0) return -1;
        int64_t secs = (int64_t)le(r->p + r->pos, 4);
        r->pos += 4;
        *valid = secs != 0;
        return append_i64(col, secs * 1000000);
    }
    case K_TIME: {
        if (need(r, 3) < 0) return -1;
        uint64_t v = le(r->p + r->pos, 3);
        r->pos += 3;
        int64_t s = (int64_t)(v << 40) >> 40;
        int64_t m = s < 0 ? -s : s;
        int64_t total = ((m / 10000 * 60 + m / 100 % 100) * 60 + m % 100) * 1000000;
        return append_i64(col, s < 0 ? -total : total);
    }
    }
    PyErr_Format(RowDecodeError, "unknown plan kind %d", pl->kind);
    return -1;
}

/* ---- images and rows -------------------------------------------------------------- */

static int decode_image(RowSink *s, Reader *r, Column *cols) {
    size_t nbytes = ((size_t)s->ncols + 7) / 8;
    if (need(r, nbytes) < 0) return -1;
    const uint8_t *nulls = r->p + r->pos;
    r->pos += nbytes;
    char refused[REFUSED_TEXT];
    for (int i = 0; i < s->ncols; i++) {
        int valid = 0;
        if (nulls[i >> 3] & (1u << (i & 7))) {
            if (append_null(&cols[i], &s->plan[i]) < 0) return -1;
        } else if (append_value(&cols[i], r, &s->plan[i], &valid, refused) < 0) {
            return -1;
        }
        if (valid == 2) {
            PyObject *args = Py_BuildValue("(is)", i, refused);
            if (args) {
                PyErr_SetObject(InvalidDateError, args);
                Py_DECREF(args);
            }
            return -1;
        }
        if (bit_set(&cols[i].validity, s->rows, valid) < 0) return -1;
    }
    return 0;
}

static int absent_image(RowSink *s, Column *cols) {
    for (int i = 0; i < s->ncols; i++) {
        if (append_null(&cols[i], &s->plan[i]) < 0) return -1;
        if (bit_set(&cols[i].validity, s->rows, 0) < 0) return -1;
    }
    return 0;
}

static int lenenc(Reader *r, uint64_t *out) {
    if (need(r, 1) < 0) return -1;
    uint8_t first = r->p[r->pos++];
    int n = first < 0xFB ? 0 : first == 0xFC ? 2 : first == 0xFD ? 3 : first == 0xFE ? 8 : -1;
    if (n < 0) { PyErr_Format(RowDecodeError, "invalid length-encoded integer %#x", first); return -1; }
    if (n == 0) { *out = first; return 0; }
    if (need(r, n) < 0) return -1;
    *out = le(r->p + r->pos, n);
    r->pos += n;
    return 0;
}

/* PARTIAL_UPDATE_ROWS after-images start with value_options and, when its PARTIAL_JSON
 * bit is set, one bit per JSON column of the table (MySQL rpl_record.cc). */
static int partial_json(RowSink *s, Reader *r) {
    uint64_t options;
    if (lenenc(r, &options) < 0) return -1;
    if (options & 1) {
        size_t n = ((size_t)s->json_count + 7) / 8;
        if (need(r, n) < 0) return -1;
        for (size_t i = 0; i < n; i++) {
            if (r->p[r->pos + i]) {
                PyErr_SetString(PartialJsonError,
                    "an after-image holds a partial JSON update (binlog_row_value_options=PARTIAL_JSON)");
                return -1;
            }
        }
        r->pos += n;
    } else if (options) {
        PyErr_Format(RowDecodeError, "unknown value_options %llu", (unsigned long long)options);
        return -1;
    }
    return 0;
}

static PyObject *RowSink_decode(RowSink *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    int kind, partial = 0;
    if (!PyArg_ParseTuple(args, "y*nni|p", &view, &pos, &end, &kind, &partial)) return NULL;
    PyObject *result = NULL;
    if (s->broken) {
        PyErr_SetString(RowDecodeError, "the sink failed earlier and holds a partial row");
        goto done;
    }
    if (pos < 0 || end < pos || end > view.len || kind < WRITE || kind > DELETE) {
        PyErr_Format(RowDecodeError, "row data bounds %zd..%zd outside %zd bytes", pos, end, view.len);
        goto done;
    }
    Reader r = {(const uint8_t *)view.buf, (size_t)pos, (size_t)end};
    Py_ssize_t added = 0;
    while (r.pos < r.end) {
        size_t start = r.pos;
        int rc;
        if (kind == WRITE) {
            rc = absent_image(s, s->before);
            if (rc == 0) rc = decode_image(s, &r, s->after);
        } else if (kind == DELETE) {
            rc = decode_image(s, &r, s->before);
            if (rc == 0) rc = absent_image(s, s->after);
        } else {
            rc = decode_image(s, &r, s->before);
            if (rc == 0 && partial) rc = partial_json(s, &r);
            if (rc == 0) rc = decode_image(s, &r, s->after);
        }
        if (rc == 0) rc = bit_set(&s->has_before, s->rows, kind != WRITE);
        if (rc == 0) rc = bit_set(&s->has_after, s->rows, kind != DELETE);
        if (rc < 0) { s->broken = 1; goto done; }
        s->rows++;
        s->nbytes += (Py_ssize_t)(r.pos - start);
        added++;
    }
    result = PyLong_FromSsize_t(added);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *bytes_of(Buf *b, size_t len) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!out) return NULL;
    memset(PyBytes_AS_STRING(out), 0, len);
    if (len && b->data) memcpy(PyBytes_AS_STRING(out), b->data, b->len < len ? b->len : len);
    return out;
}

static PyObject *columns_of(RowSink *s, Column *cols) {
    PyObject *list = PyList_New(s->ncols);
    if (!list) return NULL;
    size_t bitmap = ((size_t)s->rows + 7) / 8;
    for (int i = 0; i < s->ncols; i++) {
        PyObject *validity = bytes_of(&cols[i].validity, bitmap);
        PyObject *offsets = s->plan[i].width > 0 ? (Py_INCREF(Py_None), Py_None)
                            : bytes_of(&cols[i].offsets, cols[i].offsets.len);
        PyObject *values = bytes_of(&cols[i].values, cols[i].values.len);
        if (!validity || !offsets || !values) {
            Py_XDECREF(validity); Py_XDECREF(offsets); Py_XDECREF(values);
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, PyTuple_Pack(3, validity, offsets, values));
        Py_DECREF(validity); Py_DECREF(offsets); Py_DECREF(values);
        if (!PyList_GET_ITEM(list, i)) { Py_DECREF(list); return NULL; }
    }
    return list;
}

static int reset_columns(RowSink *s, Column *cols) {
    for (int i = 0; i < s->ncols; i++) {
        cols[i].validity.len = 0;
        cols[i].offsets.len = 0;
        cols[i].values.len = 0;
        if (cols[i].validity.data) memset(cols[i].validity.data, 0, cols[i].validity.cap);
        if (s->plan[i].width == 0) {
            int32_t zero = 0;
            if (buf_append(&cols[i].offsets, &zero, 4) < 0) return -1;
        }
    }
    return 0;
}

static int reset(RowSink *s) {
    s->rows = 0;
    s->nbytes = 0;
    s->broken = 0;
    s->has_before.len = s->has_after.len = 0;
    if (s->has_before.data) memset(s->has_before.data, 0, s->has_before.cap);
    if (s->has_after.data) memset(s->has_after.data, 0, s->has_after.cap);
    if (reset_columns(s, s->before) < 0 || reset_columns(s, s->after) < 0) return -1;
    return 0;
}

/* take() -> (rows, has_before bitmap, has_after bitmap, before columns, after columns);
 * a column is (validity bitmap, int32 offsets or None, values). Empties the sink. */
static PyObject *RowSink_take(RowSink *s, PyObject *unused) {
    size_t bitmap = ((size_t)s->rows + 7) / 8;
    PyObject *hb = bytes_of(&s->has_before, bitmap);
    PyObject *ha = bytes_of(&s->has_after, bitmap);
    PyObject *before = columns_of(s, s->before);
    PyObject *after = columns_of(s, s->after);
    PyObject *result = NULL;
    if (hb && ha && before && after)
        result = Py_BuildValue("(nOOOO)", s->rows, hb, ha, before, after);
    Py_XDECREF(hb); Py_XDECREF(ha); Py_XDECREF(before); Py_XDECREF(after);
    if (result && reset(s) < 0) { Py_DECREF(result); return NULL; }
    return result;
}

static int plan_width(int kind, int precision) {
    switch (kind) {
    case K_SINT: case K_UINT: case K_DOUBLE: case K_DATETIME2: case K_TIMESTAMP2:
    case K_TIME2: case K_YEAR: case K_ENUM: case K_SET: case K_DATETIME: case K_TIMESTAMP:
    case K_TIME:
        return 8;
    case K_FLOAT: case K_DATE:
        return 4;
    case K_DECIMAL:
        return precision <= MAX_DECIMAL128 ? 16 : 0;
    default:
        return 0;
    }
}

static void free_columns(Column *cols, int n) {
    if (!cols) return;
    for (int i = 0; i < n; i++) {
        buf_free(&cols[i].validity); buf_free(&cols[i].offsets); buf_free(&cols[i].values);
    }
    PyMem_Free(cols);
}

static int RowSink_init(RowSink *s, PyObject *args, PyObject *kwds) {
    PyObject *plan;
    int json_count = 0;
    static char *kwlist[] = {"plan", "json_count", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|i", kwlist, &plan, &json_count)) return -1;
    PyObject *seq = PySequence_Fast(plan, "plan must be a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 4096) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "a row sink needs 1 to 4096 columns");
        return -1;
    }
    if (s->plan) {  /* __init__ called again: drop the old state */
        free_columns(s->before, s->ncols);
        free_columns(s->after, s->ncols);
        buf_free(&s->has_before);
        buf_free(&s->has_after);
        PyMem_Free(s->plan);
        s->plan = NULL;
        s->before = s->after = NULL;
    }
    s->ncols = (int)n;
    s->json_count = json_count < 0 ? 0 : json_count;
    s->plan = PyMem_Calloc(n ? n : 1, sizeof(Plan));
    s->before = PyMem_Calloc(n ? n : 1, sizeof(Column));
    s->after = PyMem_Calloc(n ? n : 1, sizeof(Column));
    if (!s->plan || !s->before || !s->after) { Py_DECREF(seq); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        int kind, a, b;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iii", &kind, &a, &b)) {
            Py_DECREF(seq);
            return -1;
        }
        if (kind < K_SINT || kind > K_TIME || a < 0 || a > 255 || b < 0 || b > 65535) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "invalid plan entry (%d, %d, %d)", kind, a, b);
            return -1;
        }
        int bad = 0;
        switch (kind) {
        case K_SINT: case K_UINT: case K_ENUM: case K_SET: case K_BIT:
            bad = a < 1 || a > 8; break;
        case K_DECIMAL:
            bad = a < 1 || a > 65 || b > MAX_DECIMAL_SCALE || b > a; break;
        case K_DATETIME2: case K_TIMESTAMP2: case K_TIME2:
            bad = a > 6; break;
        case K_VAR:
            bad = a < 1 || a > 4; break;
        default:
            break;
        }
        if (bad) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "invalid plan entry (%d, %d, %d)", kind, a, b);
            return -1;
        }
        s->plan[i] = (Plan){kind, a, b, plan_width(kind, a)};
    }
    Py_DECREF(seq);
    return reset(s);
}

static void RowSink_dealloc(RowSink *s) {
    free_columns(s->before, s->ncols);
    free_columns(s->after, s->ncols);
    buf_free(&s->has_before);
    buf_free(&s->has_after);
    PyMem_Free(s->plan);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *RowSink_rows(RowSink *s, void *c) { return PyLong_FromSsize_t(s->rows); }
static PyObject *RowSink_nbytes(RowSink *s, void *c) { return PyLong_FromSsize_t(s->nbytes); }

static PyMethodDef RowSink_methods[] = {
    {"decode", (PyCFunction)RowSink_decode, METH_VARARGS,
     "decode(data, pos, end, kind, partial=False) -> rows appended"},
    {"take", (PyCFunction)RowSink_take, METH_NOARGS, "take() -> decoded buffers; empties"},
    {NULL}
};

static PyGetSetDef RowSink_getset[] = {
    {"rows", (getter)RowSink_rows, NULL, "rows held", NULL},
    {"nbytes", (getter)RowSink_nbytes, NULL, "row-image bytes held", NULL},
    {NULL}
};

static PyTypeObject RowSinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reader._rowdecoder.RowSink",
    .tp_basicsize = sizeof(RowSink),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Row images of one table map, decoded into Arrow buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RowSink_init,
    .tp_dealloc = (destructor)RowSink_dealloc,
    .tp_methods = RowSink_methods,
    .tp_getset = RowSink_getset,
};


static PyMethodDef module_methods[] = {
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowdecoder", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__rowdecoder(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyType_Ready(&RowSinkType) < 0) goto fail;
    RowDecodeError = PyErr_NewException("reader._rowdecoder.RowDecodeError", PyExc_ValueError, NULL);
    if (!RowDecodeError) goto fail;
    PartialJsonError = PyErr_NewException("reader._rowdecoder.PartialJsonError", RowDecodeError, NULL);
    if (!PartialJsonError) goto fail;
    InvalidDateError = PyErr_NewException("reader._rowdecoder.InvalidDateError", RowDecodeError, NULL);
    if (!InvalidDateError) goto fail;
    Py_INCREF(&RowSinkType);
    if (PyModule_AddObject(m, "RowSink", (PyObject *)&RowSinkType) < 0) {
        Py_DECREF(&RowSinkType);
        goto fail;
    }
    Py_INCREF(RowDecodeError);
    if (PyModule_AddObject(m, "RowDecodeError", RowDecodeError) < 0) {
        Py_DECREF(RowDecodeError);
        goto fail;
    }
    Py_INCREF(PartialJsonError);
    if (PyModule_AddObject(m, "PartialJsonError", PartialJsonError) < 0) {
        Py_DECREF(PartialJsonError);
        goto fail;
    }
    Py_INCREF(InvalidDateError);
    if (PyModule_AddObject(m, "InvalidDateError", InvalidDateError) < 0) {
        Py_DECREF(InvalidDateError);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
