/*
 * Snapshot columns built from the server's text in one pass of C over Arrow buffers.
 *
 * The snapshot's SELECT arrives as Arrow binary columns (validity, int32 offsets, data).
 * Two steps of turning them into output cost Arrow several kernels each, and this file
 * does them in one loop:
 *
 *   time_micros       TIME text, [-]H+:MM:SS[.f{1,6}], as signed microseconds;
 *   date_days         DATE text, YYYY-MM-DD, as days since 1970-01-01 (Arrow's date32);
 *   datetime_micros   DATETIME and TIMESTAMP text, YYYY-MM-DD HH:MM:SS[.f{1,6}], as
 *                     microseconds since 1970-01-01 00:00:00 (Arrow's timestamp[us]);
 *   decimal128        DECIMAL (and BIGINT UNSIGNED) text, [-]D+[.D+], as Arrow's
 *                     decimal128 of a given precision and scale;
 *   integer_sort_keys integer text as the 9 bytes of its sort key (cdc_source/keys.py):
 *                     the value sign-extended to 72 bits, big-endian, top bit flipped;
 *   hex_seq           a chunk's _seq: one prefix, then each key's bytes as lower-case hex.
 *
 * A column's dates are seldom all different (a DATETIME column of recent rows shares a
 * handful of days), so the temporal parsers remember the last date's ten bytes and its
 * day number, and parse a date only when its bytes differ from the last one's.
 *
 * reader/text_columns.py (Arrow's casts, _time_micros) and reader/key_columns.py
 * (hex_column, and the NumPy key bytes of integers) are the pure-Python twins; the
 * tests compare the two. A parser returns None for a column with any value it does not
 * take (another shape; a zero or invalid date; year 0; more digits than the precision
 * or the scale allow; more than nine digits of hours; a NULL or non-integer key): the
 * twin, which is the reference, then types that column.
 *
 * Safety: the offsets are checked before any byte is read (non-negative, in order, the
 * last within the data buffer, the buffers as long as the rows they are said to hold);
 * bad buffers raise ValueError. Outputs are sized before they are written, in 64 bits,
 * and refused (OverflowError) when an int32 offset cannot hold them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_HOUR_DIGITS 9 /* 999,999,999 h in microseconds fits int64 */

typedef struct {
    Py_buffer validity, offsets, data;
    int has_validity, has_offsets, has_data;
    Py_ssize_t offset, length;
    const uint8_t *bits;
    const int32_t *ends;
    const uint8_t *bytes;
} Binary;

static void binary_release(Binary *b) {
    if (b->has_validity) PyBuffer_Release(&b->validity);
    if (b->has_offsets) PyBuffer_Release(&b->offsets);
    if (b->has_data) PyBuffer_Release(&b->data);
}

/* 0, or -1 with ValueError set: the buffers of ``length`` values starting at ``offset``. */
static int binary_open(Binary *b, PyObject *validity, PyObject *offsets, PyObject *data,
                       Py_ssize_t offset, Py_ssize_t length) {
    memset(b, 0, sizeof(*b));
    b->offset = offset;
    b->length = length;
    if (offset < 0 || length < 0 || offset > PY_SSIZE_T_MAX / 8 - length - 8) {
        PyErr_SetString(PyExc_ValueError, "offset and length must be small non-negative numbers");
        return -1;
    }
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &b->validity, PyBUF_SIMPLE) < 0) return -1;
        b->has_validity = 1;
        if (b->validity.len < (offset + length + 7) / 8) {
            PyErr_SetString(PyExc_ValueError, "the validity bitmap is shorter than its values");
            return -1;
        }
        b->bits = b->validity.buf;
    }
    if (PyObject_GetBuffer(offsets, &b->offsets, PyBUF_SIMPLE) < 0) return -1;
    b->has_offsets = 1;
    if (b->offsets.len / (Py_ssize_t)sizeof(int32_t) < offset + length + 1) {
        PyErr_SetString(PyExc_ValueError, "the offsets are fewer than the values need");
        return -1;
    }
    if ((uintptr_t)b->offsets.buf % sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "the offsets buffer is not aligned to 4 bytes");
        return -1;
    }
    b->ends = (const int32_t *)b->offsets.buf;
    Py_ssize_t data_len = 0;
    if (data != Py_None) {
        if (PyObject_GetBuffer(data, &b->data, PyBUF_SIMPLE) < 0) return -1;
        b->has_data = 1;
        b->bytes = b->data.buf;
        data_len = b->data.len;
    }
    int32_t previous = b->ends[offset];
    if (previous < 0) {
        PyErr_SetString(PyExc_ValueError, "an offset is negative");
        return -1;
    }
    for (Py_ssize_t i = 1; i <= length; i++) {
        int32_t next = b->ends[offset + i];
        if (next < previous) {
            PyErr_SetString(PyExc_ValueError, "the offsets are out of order");
            return -1;
        }
        previous = next;
    }
    if (previous > data_len) {
        PyErr_SetString(PyExc_ValueError, "an offset points past the data");
        return -1;
    }
    return 0;
}

static int is_valid(const Binary *b, Py_ssize_t i) {
    if (!b->bits) return 1;
    Py_ssize_t bit = b->offset + i;
    return (b->bits[bit >> 3] >> (bit & 7)) & 1;
}

/* The last date a column's parser took: its ten bytes and its day number. */
typedef struct {
    uint8_t text[10];
    int64_t days;
    int held;
} DateMemo;

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* 1 with *micros set if text[p..n) is empty or .f{1,6}: the microseconds it spells. */
static int parse_fraction(const uint8_t *text, Py_ssize_t n, Py_ssize_t p, int64_t *micros) {
    int64_t fraction = 0;
    if (p < n) {
        if (text[p] != '.') return 0;
        p++;
        Py_ssize_t digits = 0;
        while (p < n && is_digit(text[p]) && digits < 6) {
            fraction = fraction * 10 + (text[p] - '0');
            p++;
            digits++;
        }
        if (digits == 0 || p != n) return 0;
        for (; digits < 6; digits++) fraction *= 10;
    }
    *micros = fraction;
    return 1;
}

/* 1 with *micros set if text[0..n) is [-]H+:MM:SS[.f{1,6}] with at most MAX_HOUR_DIGITS
 * of hours; 0 if not (the caller leaves the column to the Python twin). */
static inline int parse_time(const uint8_t *text, Py_ssize_t n, int64_t *micros,
                             DateMemo *memo) {
    (void)memo;
    Py_ssize_t p = 0;
    int negative = 0;
    if (p < n && text[p] == '-') {
        negative = 1;
        p++;
    }
    int64_t hours = 0;
    Py_ssize_t start = p;
    while (p < n && is_digit(text[p])) {
        if (p - start >= MAX_HOUR_DIGITS) return 0;
        hours = hours * 10 + (text[p] - '0');
        p++;
    }
    if (p == start) return 0;
    if (n - p < 6 || text[p] != ':' || !is_digit(text[p + 1]) || !is_digit(text[p + 2]) ||
        text[p + 3] != ':' || !is_digit(text[p + 4]) || !is_digit(text[p + 5]))
        return 0;
    int64_t minutes = (text[p + 1] - '0') * 10 + (text[p + 2] - '0');
    int64_t seconds = (text[p + 4] - '0') * 10 + (text[p + 5] - '0');
    p += 6;
    int64_t fraction;
    if (!parse_fraction(text, n, p, &fraction)) return 0;
    int64_t value = ((hours * 60 + minutes) * 60 + seconds) * 1000000 + fraction;
    *micros = negative ? -value : value;
    return 1;
}

static int fixed_digits(const uint8_t *text, int count, int *value) {
    int v = 0;
    for (int i = 0; i < count; i++) {
        if (!is_digit(text[i])) return 0;
        v = v * 10 + (text[i] - '0');
    }
    *value = v;
    return 1;
}

static int days_in_month(int year, int month) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

/* Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t year, int64_t month, int64_t day) {
    year -= month <= 2;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    int64_t year_of_era = year - era * 400;
    int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + day_of_era - 719468;
}

/* 1 with *days set if text[0..10) is a valid YYYY-MM-DD of years 1..9999. */
static int parse_date_once(const uint8_t *text, Py_ssize_t n, int64_t *days) {
    int year, month, day;
    if (n < 10 || text[4] != '-' || text[7] != '-') return 0;
    if (!fixed_digits(text, 4, &year) || !fixed_digits(text + 5, 2, &month) ||
        !fixed_digits(text + 8, 2, &day))
        return 0;
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month))
        return 0;
    *days = days_from_civil(year, month, day);
    return 1;
}

/* parse_date_once, answered from ``memo`` when text[0..10) is the date it holds. */
static inline int parse_date(const uint8_t *text, Py_ssize_t n, int64_t *days, DateMemo *memo) {
    if (n < 10) return 0;
    if (memo->held && memcmp(text, memo->text, 10) == 0) {
        *days = memo->days;
        return 1;
    }
    if (!parse_date_once(text, n, days)) return 0;
    memcpy(memo->text, text, 10);
    memo->days = *days;
    memo->held = 1;
    return 1;
}

/* 1 with *micros set if text[0..n) is YYYY-MM-DD HH:MM:SS[.f{1,6}], valid. */
static inline int parse_datetime(const uint8_t *text, Py_ssize_t n, int64_t *micros,
                                 DateMemo *memo) {
    int64_t days;
    int hour, minute, second;
    if (n < 19 || !parse_date(text, 10, &days, memo) || text[10] != ' ' || text[13] != ':' ||
        text[16] != ':')
        return 0;
    if (!fixed_digits(text + 11, 2, &hour) || !fixed_digits(text + 14, 2, &minute) ||
        !fixed_digits(text + 17, 2, &second) || hour > 23 || minute > 59 || second > 59)
        return 0;
    int64_t fraction;
    if (!parse_fraction(text, n, 19, &fraction)) return 0;
    *micros = ((days * 24 + hour) * 60 + minute) * 60000000LL + second * 1000000LL + fraction;
    return 1;
}

#ifdef __SIZEOF_INT128__
/* The value of the digits text[from..to), at most 38 of them: gathered in 64 bits while
 * they fit (18 digits always do), so the common DECIMAL never multiplies in 128. */
static inline __int128 digits_value(const uint8_t *text, Py_ssize_t from, Py_ssize_t to,
                                    __int128 value) {
    while (from < to) {
        Py_ssize_t run = to - from < 18 ? to - from : 18;
        uint64_t part = 0, scale = 1;
        for (Py_ssize_t p = from; p < from + run; p++) {
            part = part * 10 + (uint64_t)(text[p] - '0');
            scale *= 10;
        }
        value = value == 0 ? (__int128)part : value * (__int128)scale + (__int128)part;
        from += run;
    }
    return value;
}

/* 1 with *units set if text[0..n) is [-]D+[.D+] with at most ``scale`` fraction digits
 * and at most ``precision`` digits in all once scaled: the unscaled value. */
static int parse_decimal(const uint8_t *text, Py_ssize_t n, int precision, int scale,
                         __int128 *units) {
    Py_ssize_t p = 0;
    int negative = 0;
    if (p < n && text[p] == '-') {
        negative = 1;
        p++;
    }
    Py_ssize_t whole_start = p;
    while (p < n && text[p] == '0') p++;
    Py_ssize_t significant_start = p;
    while (p < n && is_digit(text[p])) p++;
    Py_ssize_t whole_end = p;
    Py_ssize_t significant = whole_end - significant_start;
    if (whole_end == whole_start || significant + scale > precision) return 0;
    Py_ssize_t fraction_start = p, fraction_end = p;
    if (p < n) {
        if (text[p] != '.') return 0;
        fraction_start = ++p;
        while (p < n && is_digit(text[p])) p++;
        fraction_end = p;
        if (fraction_end == fraction_start || fraction_end - fraction_start > scale || p != n)
            return 0;
    }
    /* significant + scale <= precision <= 38 digits in all, once scaled. */
    __int128 value = digits_value(text, significant_start, whole_end, 0);
    value = digits_value(text, fraction_start, fraction_end, value);
    for (Py_ssize_t zeros = scale - (fraction_end - fraction_start); zeros > 0; zeros--)
        value *= 10;
    *units = negative ? -value : value;
    return 1;
}
#endif

/* The validity bits of the values, moved to start at bit 0 (a sliced array starts later). */
static PyObject *packed_validity(const Binary *b) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (b->length + 7) / 8);
    if (!out) return NULL;
    uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(out);
    memset(bits, 0, (size_t)PyBytes_GET_SIZE(out));
    for (Py_ssize_t i = 0; i < b->length; i++)
        if (is_valid(b, i)) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    return out;
}

/* (validity|None, values) for a column whose values are all built: releases ``b`` and
 * takes ``values``. */
static PyObject *column_result(Binary *b, PyObject *values) {
    PyObject *bits = b->bits ? packed_validity(b) : (Py_INCREF(Py_None), Py_None);
    binary_release(b);
    if (!bits) {
        Py_DECREF(values);
        return NULL;
    }
    return Py_BuildValue("(NN)", bits, values);
}

typedef int (*int64_parser)(const uint8_t *, Py_ssize_t, int64_t *, DateMemo *);

/* (validity|None, values) of ``width``-byte little-endian values, or None (a value the
 * parser does not take). */
static inline __attribute__((always_inline)) PyObject *parsed_column(PyObject *args,
                                                                     int64_parser parse,
                                                                     int width) {
    PyObject *validity, *offsets, *data;
    Py_ssize_t offset, length;
    if (!PyArg_ParseTuple(args, "OOOnn", &validity, &offsets, &data, &offset, &length))
        return NULL;
    Binary b;
    if (binary_open(&b, validity, offsets, data, offset, length) < 0) {
        binary_release(&b);
        return NULL;
    }
    PyObject *values = PyBytes_FromStringAndSize(NULL, length * (Py_ssize_t)width);
    if (!values) {
        binary_release(&b);
        return NULL;
    }
    char *out = PyBytes_AS_STRING(values);
    DateMemo memo = {.held = 0};
    for (Py_ssize_t i = 0; i < length; i++) {
        int64_t value = 0; /* a NULL's slot holds 0 */
        int32_t from = b.ends[offset + i], to = b.ends[offset + i + 1];
        if (is_valid(&b, i) && !parse(b.bytes + from, to - from, &value, &memo)) {
            Py_DECREF(values);
            binary_release(&b);
            Py_RETURN_NONE;
        }
        if (width == 4) {
            int32_t narrow = (int32_t)value;
            memcpy(out + i * 4, &narrow, 4);
        } else {
            memcpy(out + i * 8, &value, 8);
        }
    }
    return column_result(&b, values);
}

static PyObject *time_micros(PyObject *module, PyObject *args) {
    return parsed_column(args, parse_time, 8);
}

static inline int parse_date_text(const uint8_t *text, Py_ssize_t n, int64_t *days,
                                  DateMemo *memo) {
    return n == 10 && parse_date(text, n, days, memo);
}

static PyObject *date_days(PyObject *module, PyObject *args) {
    return parsed_column(args, parse_date_text, 4);
}

static PyObject *datetime_micros(PyObject *module, PyObject *args) {
    return parsed_column(args, parse_datetime, 8);
}

static PyObject *decimal128(PyObject *module, PyObject *args) {
    PyObject *validity, *offsets, *data;
    Py_ssize_t offset, length;
    int precision, scale;
    if (!PyArg_ParseTuple(args, "OOOnnii", &validity, &offsets, &data, &offset, &length,
                          &precision, &scale))
        return NULL;
    if (precision < 1 || precision > 38 || scale < 0 || scale > precision) {
        PyErr_SetString(PyExc_ValueError, "decimal128 holds precision 1..38, scale 0..precision");
        return NULL;
    }
#ifndef __SIZEOF_INT128__
    Py_RETURN_NONE;
#else
    Binary b;
    if (binary_open(&b, validity, offsets, data, offset, length) < 0) {
        binary_release(&b);
        return NULL;
    }
    PyObject *values = PyBytes_FromStringAndSize(NULL, length * 16);
    if (!values) {
        binary_release(&b);
        return NULL;
    }
    char *out = PyBytes_AS_STRING(values);
    for (Py_ssize_t i = 0; i < length; i++) {
        __int128 units = 0; /* a NULL's slot holds 0 */
        int32_t from = b.ends[offset + i], to = b.ends[offset + i + 1];
        if (is_valid(&b, i) &&
            !parse_decimal(b.bytes + from, to - from, precision, scale, &units)) {
            Py_DECREF(values);
            binary_release(&b);
            Py_RETURN_NONE;
        }
        memcpy(out + i * 16, &units, 16); /* little-endian two's complement, as Arrow's */
    }
    return column_result(&b, values);
#endif
}

/* 1 with *negative and *magnitude set if text[0..n) is [-]D+ whose magnitude fits 64
 * bits. */
static inline int parse_integer(const uint8_t *text, Py_ssize_t n, int *negative,
                                uint64_t *magnitude) {
    Py_ssize_t p = 0;
    *negative = n > 0 && text[0] == '-';
    p += *negative;
    if (p == n) return 0;
    uint64_t value = 0;
    for (; p < n; p++) {
        if (!is_digit(text[p])) return 0;
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, (uint64_t)(text[p] - '0'), &value))
            return 0;
    }
    *magnitude = value;
    return 1;
}

/* 1 with *value set if text[0..n) is [-]D+ within int64. */
static inline int parse_int64(const uint8_t *text, Py_ssize_t n, int64_t *value) {
    int negative;
    uint64_t magnitude;
    if (!parse_integer(text, n, &negative, &magnitude)) return 0;
    if (magnitude > (uint64_t)INT64_MAX + negative) return 0; /* |INT64_MIN| = INT64_MAX + 1 */
    *value = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return 1;
}

#define SORT_KEY_WIDTH 9

static PyObject *integer_sort_keys(PyObject *module, PyObject *args) {
    PyObject *validity, *offsets, *data;
    Py_ssize_t offset, length;
    int is_unsigned;
    if (!PyArg_ParseTuple(args, "OOOnnp", &validity, &offsets, &data, &offset, &length,
                          &is_unsigned))
        return NULL;
    Binary b;
    if (binary_open(&b, validity, offsets, data, offset, length) < 0) {
        binary_release(&b);
        return NULL;
    }
    if (length > (INT32_MAX - 1) / SORT_KEY_WIDTH) {
        binary_release(&b);
        PyErr_SetString(PyExc_OverflowError, "the keys would pass 2 GiB: fetch fewer rows");
        return NULL;
    }
    PyObject *ends = PyBytes_FromStringAndSize(NULL, (length + 1) * (Py_ssize_t)sizeof(int32_t));
    PyObject *keys = ends ? PyBytes_FromStringAndSize(NULL, length * SORT_KEY_WIDTH) : NULL;
    if (!keys) {
        Py_XDECREF(ends);
        binary_release(&b);
        return NULL;
    }
    int32_t *out_ends = (int32_t *)PyBytes_AS_STRING(ends);
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(keys);
    out_ends[0] = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        int32_t from = b.ends[offset + i], to = b.ends[offset + i + 1];
        uint64_t bits = 0;
        uint8_t top = 0x00; /* the sign extension's byte, before its top bit is flipped */
        int taken = is_valid(&b, i);
        if (taken && is_unsigned) {
            int negative;
            taken = parse_integer(b.bytes + from, to - from, &negative, &bits) && !negative;
        } else if (taken) {
            int64_t value;
            taken = parse_int64(b.bytes + from, to - from, &value);
            bits = (uint64_t)value;
            top = value < 0 ? 0xFF : 0x00;
        }
        if (!taken) { /* a NULL key, or text the twin must read */
            Py_DECREF(ends);
            Py_DECREF(keys);
            binary_release(&b);
            Py_RETURN_NONE;
        }
        uint8_t *key = out + i * SORT_KEY_WIDTH;
        key[0] = top ^ 0x80;
        for (int k = 8; k >= 1; k--) {
            key[k] = (uint8_t)(bits & 0xFF);
            bits >>= 8;
        }
        out_ends[i + 1] = (int32_t)((i + 1) * SORT_KEY_WIDTH);
    }
    binary_release(&b);
    return Py_BuildValue("(NN)", ends, keys);
}

/* Each byte's two lower-case hex digits. */
static char hex_pairs[256][2];

static PyObject *hex_seq(PyObject *module, PyObject *args) {
    Py_buffer prefix;
    PyObject *offsets, *data;
    Py_ssize_t offset, length;
    if (!PyArg_ParseTuple(args, "y*OOnn", &prefix, &offsets, &data, &offset, &length))
        return NULL;
    Binary b;
    if (binary_open(&b, Py_None, offsets, data, offset, length) < 0) {
        binary_release(&b);
        PyBuffer_Release(&prefix);
        return NULL;
    }
    int64_t key_bytes = (int64_t)b.ends[offset + length] - b.ends[offset];
    int64_t total = (int64_t)prefix.len * length + 2 * key_bytes;
    if (prefix.len > INT32_MAX || total > INT32_MAX) {
        binary_release(&b);
        PyBuffer_Release(&prefix);
        PyErr_SetString(PyExc_OverflowError, "the _seq column would pass 2 GiB: fetch fewer rows");
        return NULL;
    }
    PyObject *ends = PyBytes_FromStringAndSize(NULL, (length + 1) * (Py_ssize_t)sizeof(int32_t));
    PyObject *text = ends ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total) : NULL;
    if (!text) {
        Py_XDECREF(ends);
        binary_release(&b);
        PyBuffer_Release(&prefix);
        return NULL;
    }
    int32_t *out_ends = (int32_t *)PyBytes_AS_STRING(ends);
    char *out = PyBytes_AS_STRING(text);
    Py_ssize_t at = 0;
    out_ends[0] = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        memcpy(out + at, prefix.buf, (size_t)prefix.len);
        at += prefix.len;
        for (int32_t k = b.ends[offset + i]; k < b.ends[offset + i + 1]; k++) {
            memcpy(out + at, hex_pairs[b.bytes[k]], 2);
            at += 2;
        }
        out_ends[i + 1] = (int32_t)at;
    }
    binary_release(&b);
    PyBuffer_Release(&prefix);
    return Py_BuildValue("(NN)", ends, text);
}

static PyMethodDef module_methods[] = {
    {"time_micros", time_micros, METH_VARARGS,
     "time_micros(validity|None, offsets, data|None, offset, length) -> (validity|None, "
     "int64 values) or None.\nTIME text as signed microseconds; None when a value is of "
     "another shape (the Python twin decides it)."},
    {"date_days", date_days, METH_VARARGS,
     "date_days(validity|None, offsets, data|None, offset, length) -> (validity|None, "
     "int32 days since 1970-01-01) or None."},
    {"datetime_micros", datetime_micros, METH_VARARGS,
     "datetime_micros(validity|None, offsets, data|None, offset, length) -> (validity|None, "
     "int64 microseconds since 1970-01-01 00:00:00) or None."},
    {"decimal128", decimal128, METH_VARARGS,
     "decimal128(validity|None, offsets, data|None, offset, length, precision, scale) -> "
     "(validity|None, 16-byte unscaled values) or None."},
    {"integer_sort_keys", integer_sort_keys, METH_VARARGS,
     "integer_sort_keys(validity|None, offsets, data|None, offset, length, unsigned) -> "
     "(int32 offsets, keys) or None.\nThe 9-byte sort key of each integer; None when a value "
     "is NULL or not [-]D+ within int64 (uint64 if unsigned)."},
    {"hex_seq", hex_seq, METH_VARARGS,
     "hex_seq(prefix, offsets, data|None, offset, length) -> (int32 offsets, text).\n"
     "Per value: the prefix, then the value's bytes as lower-case hex."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef textvalues_module = {
    PyModuleDef_HEAD_INIT, "reader._textvalues",
    "Snapshot columns from the server's text in C: temporal values, decimals, integer sort "
    "keys, _seq.",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__textvalues(void) {
    static const char digits[] = "0123456789abcdef";
    for (int byte = 0; byte < 256; byte++) {
        hex_pairs[byte][0] = digits[byte >> 4];
        hex_pairs[byte][1] = digits[byte & 15];
    }
    return PyModule_Create(&textvalues_module);
}
