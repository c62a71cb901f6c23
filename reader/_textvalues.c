/*
 * Snapshot columns built from the server's text in one pass of C over Arrow buffers.
 *
 * The snapshot's SELECT arrives as Arrow binary columns (validity, int32 offsets, data).
 * Two steps of turning them into output cost Arrow several kernels each, and this file
 * does them in one loop:
 *
 *   time_micros  TIME text, [-]H+:MM:SS[.f{1,6}], as signed microseconds;
 *   hex_seq      a chunk's _seq: one prefix, then each key's bytes as lower-case hex.
 *
 * reader/text_columns.py (_time_micros) and reader/key_columns.py (hex_column) are the
 * pure-Python twins, on Arrow's kernels; the tests compare the two, and every value
 * this file does not take (another shape of TIME, more than nine digits of hours) is
 * left to the twin, which is the reference.
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

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* 1 with *micros set if text[0..n) is [-]H+:MM:SS[.f{1,6}] with at most MAX_HOUR_DIGITS
 * of hours; 0 if not (the caller leaves the column to the Python twin). */
static int parse_time(const uint8_t *text, Py_ssize_t n, int64_t *micros) {
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
    int64_t value = ((hours * 60 + minutes) * 60 + seconds) * 1000000 + fraction;
    *micros = negative ? -value : value;
    return 1;
}

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

static PyObject *time_micros(PyObject *module, PyObject *args) {
    PyObject *validity, *offsets, *data;
    Py_ssize_t offset, length;
    if (!PyArg_ParseTuple(args, "OOOnn", &validity, &offsets, &data, &offset, &length))
        return NULL;
    Binary b;
    if (binary_open(&b, validity, offsets, data, offset, length) < 0) {
        binary_release(&b);
        return NULL;
    }
    PyObject *values = PyBytes_FromStringAndSize(NULL, length * (Py_ssize_t)sizeof(int64_t));
    if (!values) {
        binary_release(&b);
        return NULL;
    }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(values);
    for (Py_ssize_t i = 0; i < length; i++) {
        out[i] = 0;
        if (!is_valid(&b, i)) continue;
        int32_t from = b.ends[offset + i], to = b.ends[offset + i + 1];
        if (!parse_time(b.bytes + from, to - from, &out[i])) {
            Py_DECREF(values);
            binary_release(&b);
            Py_RETURN_NONE;
        }
    }
    PyObject *bits = Py_None;
    Py_INCREF(bits);
    if (b.bits) {
        Py_DECREF(bits);
        bits = packed_validity(&b);
    }
    binary_release(&b);
    if (!bits) {
        Py_DECREF(values);
        return NULL;
    }
    return Py_BuildValue("(NN)", bits, values);
}

static PyObject *hex_seq(PyObject *module, PyObject *args) {
    static const char hex[] = "0123456789abcdef";
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
            uint8_t byte = b.bytes[k];
            out[at++] = hex[byte >> 4];
            out[at++] = hex[byte & 15];
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
    {"hex_seq", hex_seq, METH_VARARGS,
     "hex_seq(prefix, offsets, data|None, offset, length) -> (int32 offsets, text).\n"
     "Per value: the prefix, then the value's bytes as lower-case hex."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef textvalues_module = {
    PyModuleDef_HEAD_INIT, "reader._textvalues",
    "Snapshot columns from the server's text in C: TIME as microseconds, _seq as hex.",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__textvalues(void) { return PyModule_Create(&textvalues_module); }
