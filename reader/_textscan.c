/*
 * A SELECT's result as Arrow binary columns, read in C over libmariadb.
 *
 * The connection is mysqlclient's (MySQLdb), borrowed through its
 * _get_native_connection() capsule: connecting, TLS, timeouts and errors of the
 * handshake stay mysqlclient's. This module only runs one query at a time with
 * mysql_use_result (rows stream, nothing is buffered beyond one network packet) and
 * copies each value's bytes, as the server sent them in the text protocol, into one
 * Arrow binary column per field: validity bitmap, int32 offsets, data. Typing the
 * values is Arrow's job (casts in reader/text_columns.py): the C stays thin.
 *
 * A fetch also says, of the columns the caller names, whether all their bytes are ASCII
 * (one pass over each such column's data, a loop the compiler vectorizes): such a
 * column is valid UTF-8 as it is, and needs no other check
 * (reader/snapshot_connection.py).
 *
 * A fetch's buffers are handed to Python as they were filled, each owned by a
 * Buffer object (the buffer protocol, freed with it), so a value's bytes are copied
 * once, from libmariadb's row into the column. A column's data buffer starts at the
 * size its previous fetch needed, so a steady scan seldom grows one; a column gets a
 * validity bitmap only once it holds a NULL.
 *
 * Safety: every length comes from libmariadb's row lengths; every append is checked
 * against the int32 offset range; the borrowed connection is kept alive by a
 * reference and checked open before each use, so a closed connection is an
 * exception, never a dangling pointer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mysql.h>
#include <errmsg.h>
#include <stdint.h>
#include <string.h>

#define CAPSULE_NAME "_mysql.connection.native_connection"

static PyObject *ScanError; /* args: (errno, message) */

typedef struct {
    char *bytes;
    size_t length;
    size_t capacity;
} Growable;

typedef struct {
    uint8_t *validity; /* one bit per row, LSB first, as Arrow; NULL until a NULL value */
    int32_t *offsets;  /* rows + 1 */
    Growable data;
} Column;

#define HIGH_BITS 0x8080808080808080ULL

typedef struct {
    PyObject_HEAD
    PyObject *owner; /* the MySQLdb connection object */
    MYSQL *mysql;
    MYSQL_RES *result;
    unsigned int field_count;
    size_t *sizes; /* per field: the data bytes its previous fetch held (a capacity hint) */
} TextScan;

/* Memory malloc'd by a fetch, exposed read-only through the buffer protocol and freed
 * with the object: Arrow wraps it (pa.py_buffer) without a copy. */
typedef struct {
    PyObject_HEAD
    char *bytes;
    Py_ssize_t length;
} Buffer;

static void Buffer_dealloc(Buffer *self) {
    free(self->bytes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Buffer_getbuffer(Buffer *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->bytes ? self->bytes : "",
                             self->length, 1, flags);
}

static Py_ssize_t Buffer_length(Buffer *self) { return self->length; }

static PyBufferProcs Buffer_as_buffer = {(getbufferproc)Buffer_getbuffer, NULL};
static PySequenceMethods Buffer_as_sequence = {.sq_length = (lenfunc)Buffer_length};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reader._textscan.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One buffer of a fetched column (validity, offsets or data), read-only.",
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_as_buffer = &Buffer_as_buffer,
    .tp_as_sequence = &Buffer_as_sequence,
};

/* A Buffer taking ownership of ``*bytes`` (set to NULL), or NULL with an exception set
 * (``*bytes`` is then still the caller's to free). */
static PyObject *buffer_of(char **bytes, Py_ssize_t length) {
    Buffer *buffer = PyObject_New(Buffer, &BufferType);
    if (!buffer) return NULL;
    buffer->bytes = *bytes;
    buffer->length = length;
    *bytes = NULL;
    return (PyObject *)buffer;
}

static int grow(Growable *g, size_t needed) {
    if (needed <= g->capacity) return 0;
    size_t capacity = g->capacity ? g->capacity : 4096;
    while (capacity < needed) {
        if (capacity > SIZE_MAX / 2) return -1;
        capacity *= 2;
    }
    char *bytes = realloc(g->bytes, capacity);
    if (!bytes) return -1;
    g->bytes = bytes;
    g->capacity = capacity;
    return 0;
}

static PyObject *scan_error(unsigned int code, const char *message) {
    PyObject *args = Py_BuildValue("(Is)", code, message);
    if (args) {
        PyErr_SetObject(ScanError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *server_error(TextScan *self) {
    return scan_error(mysql_errno(self->mysql), mysql_error(self->mysql));
}

/* 1 if the borrowed connection is still open, 0 with ScanError set if not. */
static int connection_open(TextScan *self) {
    PyObject *closed = PyObject_GetAttrString(self->owner, "closed");
    if (!closed) return 0;
    int is_closed = PyObject_IsTrue(closed);
    Py_DECREF(closed);
    if (is_closed < 0) return 0;
    if (is_closed) {
        scan_error(CR_SERVER_GONE_ERROR, "the connection was closed");
        return 0;
    }
    return 1;
}

/* Frees the result. ``drain``: read the rows not yet fetched (the connection stays
 * usable); otherwise the connection is left mid-result and must be closed. */
static void release_result(TextScan *self, int drain) {
    if (!self->result) return;
    if (!drain) self->result->handle = NULL; /* mysql_free_result then reads nothing */
    mysql_free_result(self->result);
    self->result = NULL;
}

static int TextScan_init(TextScan *self, PyObject *args, PyObject *kwargs) {
    PyObject *owner;
    if (!PyArg_ParseTuple(args, "O", &owner)) return -1;
    PyObject *capsule = PyObject_CallMethod(owner, "_get_native_connection", NULL);
    if (!capsule) return -1;
    MYSQL *mysql = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    Py_DECREF(capsule);
    if (!mysql) return -1;
    Py_INCREF(owner);
    Py_XSETREF(self->owner, owner);
    self->mysql = mysql;
    return 0;
}

static void TextScan_dealloc(TextScan *self) {
    release_result(self, 0);
    free(self->sizes);
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *TextScan_execute(TextScan *self, PyObject *args) {
    const char *query;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "y#", &query, &length)) return NULL;
    if (!self->owner) return scan_error(CR_UNKNOWN_ERROR, "TextScan is not initialized");
    if (!connection_open(self)) return NULL;
    if (self->result) return scan_error(CR_COMMANDS_OUT_OF_SYNC, "a result is still open");
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = mysql_real_query(self->mysql, query, (unsigned long)length);
    if (!failed) self->result = mysql_use_result(self->mysql);
    Py_END_ALLOW_THREADS
    if (failed) return server_error(self);
    if (!self->result) {
        if (mysql_errno(self->mysql)) return server_error(self);
        return scan_error(CR_UNKNOWN_ERROR, "the statement returned no result set");
    }
    unsigned int count = mysql_num_fields(self->result);
    if (count != self->field_count || !self->sizes) { /* another shape: no hints yet */
        free(self->sizes);
        self->sizes = calloc(count ? count : 1, sizeof(size_t));
        if (!self->sizes) {
            release_result(self, 0);
            return PyErr_NoMemory();
        }
    }
    self->field_count = count;
    return PyLong_FromUnsignedLong(count);
}

static void free_columns(Column *columns, unsigned int count) {
    if (!columns) return;
    for (unsigned int i = 0; i < count; i++) {
        free(columns[i].validity);
        free(columns[i].offsets);
        free(columns[i].data.bytes);
    }
    free(columns);
}

/* 1 if every byte of text[0, length) is below 0x80. */
static int all_ascii(const char *text, size_t length) {
    uint64_t seen = 0, word;
    size_t at = 0;
    for (; at + 8 <= length; at += 8) {
        memcpy(&word, text + at, 8);
        seen |= word;
    }
    for (; at < length; at++) seen |= (uint8_t)text[at];
    return (seen & HIGH_BITS) == 0;
}

/* The fetched columns as a list of (validity or None, offsets, data, ascii) tuples, the
 * first three Buffers, ascii True for a column ``checked`` names (a nonzero byte at its
 * index) whose bytes are all ASCII; each buffer's memory moves from ``columns`` into its
 * Buffer. */
static PyObject *column_buffers(Column *columns, unsigned int count, Py_ssize_t rows,
                                const Py_buffer *checked) {
    PyObject *list = PyList_New(count);
    if (!list) return NULL;
    for (unsigned int i = 0; i < count; i++) {
        Column *c = &columns[i];
        if (!c->data.bytes) { /* no value had a byte: Arrow still wants a buffer */
            c->data.bytes = malloc(1);
            if (!c->data.bytes) {
                Py_DECREF(list);
                return PyErr_NoMemory();
            }
        } else if (c->data.capacity - c->data.length > c->data.length / 4 + 4096) {
            char *fitted = realloc(c->data.bytes, c->data.length ? c->data.length : 1);
            if (fitted) c->data.bytes = fitted; /* (else the larger block is kept) */
        }
        int asked = (Py_ssize_t)i < checked->len && ((const char *)checked->buf)[i];
        PyObject *ascii = asked && all_ascii(c->data.bytes, c->data.length) ? Py_True : Py_False;
        PyObject *validity = c->validity
            ? buffer_of((char **)&c->validity, (rows + 7) / 8)
            : (Py_INCREF(Py_None), Py_None);
        PyObject *offsets =
            buffer_of((char **)&c->offsets, (Py_ssize_t)((rows + 1) * sizeof(int32_t)));
        PyObject *data = buffer_of(&c->data.bytes, (Py_ssize_t)c->data.length);
        PyObject *triple = (validity && offsets && data)
                               ? PyTuple_Pack(4, validity, offsets, data, ascii)
                               : NULL;
        Py_XDECREF(validity);
        Py_XDECREF(offsets);
        Py_XDECREF(data);
        if (!triple) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, triple);
    }
    return list;
}

enum { FETCH_OK, FETCH_NO_MEMORY, FETCH_TOO_LARGE };

/* Copies 1..16 bytes with fixed-size moves (inlined: no call per short value), reading
 * and writing only ``[0, length)``: two overlapping halves of 8, 4 or 1 byte(s). */
static inline void copy_short(char *to, const char *from, size_t length) {
    if (length >= 8) {
        uint64_t head, tail;
        memcpy(&head, from, 8);
        memcpy(&tail, from + length - 8, 8);
        memcpy(to, &head, 8);
        memcpy(to + length - 8, &tail, 8);
    } else if (length >= 4) {
        uint32_t head, tail;
        memcpy(&head, from, 4);
        memcpy(&tail, from + length - 4, 4);
        memcpy(to, &head, 4);
        memcpy(to + length - 4, &tail, 4);
    } else {
        to[0] = from[0];
        to[length / 2] = from[length / 2];
        to[length - 1] = from[length - 1];
    }
}

/* A column's first NULL, at ``row``: its bitmap, every earlier row valid. */
static int start_validity(Column *c, Py_ssize_t max_rows, Py_ssize_t row) {
    c->validity = calloc((size_t)(max_rows + 7) / 8, 1);
    if (!c->validity) return -1;
    memset(c->validity, 0xff, (size_t)(row / 8));
    for (Py_ssize_t r = row - row % 8; r < row; r++) c->validity[r / 8] |= (uint8_t)(1u << (r % 8));
    return 0;
}

/* Reads up to max_rows rows, stopping after the row that brings the data to max_bytes.
 * Runs without the GIL: touches only libmariadb and malloc'd buffers. */
static int fetch_rows(TextScan *self, Column *columns, Py_ssize_t max_rows, size_t max_bytes,
                      Py_ssize_t *rows_out, int *ended) {
    unsigned int count = self->field_count;
    Py_ssize_t rows = 0;
    size_t bytes = 0;
    *ended = 0;
    while (rows < max_rows && bytes < max_bytes) {
        MYSQL_ROW row = mysql_fetch_row(self->result);
        if (!row) {
            *ended = 1;
            break;
        }
        unsigned long *lengths = mysql_fetch_lengths(self->result);
        for (unsigned int i = 0; i < count; i++) {
            Column *c = &columns[i];
            size_t start = c->data.length;
            if (row[i]) {
                if (c->validity) c->validity[rows / 8] |= (uint8_t)(1u << (rows % 8));
                size_t length = lengths[i];
                if (length > (size_t)INT32_MAX - start) return FETCH_TOO_LARGE;
                if (length) { /* an empty value: the column may have no buffer yet (NULL) */
                    size_t end = start + length;
                    if (grow(&c->data, end) < 0) return FETCH_NO_MEMORY;
                    char *to = c->data.bytes + start;
                    const char *from = row[i];
                    if (length <= 16) {
                        copy_short(to, from, length);
                    } else {
                        memcpy(to, from, length);
                    }
                    c->data.length = end;
                    bytes += length;
                }
            } else if (!c->validity && start_validity(c, max_rows, rows) < 0) {
                return FETCH_NO_MEMORY;
            }
            c->offsets[rows + 1] = (int32_t)c->data.length;
        }
        rows++;
    }
    *rows_out = rows;
    return FETCH_OK;
}

/* One fetch (see TextScan_fetch); ``checked``: the columns whose ASCII-ness is asked. */
static PyObject *fetch_checked(TextScan *self, Py_ssize_t max_rows, Py_ssize_t max_bytes,
                               const Py_buffer *checked) {
    if (max_rows <= 0 || max_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "max_rows and max_bytes must be positive");
        return NULL;
    }
    if (max_rows > PY_SSIZE_T_MAX / 8 - 8) {
        PyErr_SetString(PyExc_ValueError, "max_rows is too large");
        return NULL;
    }
    if (!self->result) return Py_BuildValue("(n[])", (Py_ssize_t)0);
    if (!connection_open(self)) return NULL;
    unsigned int count = self->field_count;
    Column *columns = calloc(count ? count : 1, sizeof(Column));
    if (!columns) return PyErr_NoMemory();
    for (unsigned int i = 0; i < count; i++) {
        columns[i].offsets = malloc(((size_t)max_rows + 1) * sizeof(int32_t));
        size_t hint = self->sizes[i];
        hint += hint / 8;
        if (hint > (size_t)max_bytes + 4096) hint = (size_t)max_bytes + 4096;
        if (hint) {
            columns[i].data.bytes = malloc(hint);
            columns[i].data.capacity = columns[i].data.bytes ? hint : 0;
        }
        if (!columns[i].offsets || (hint && !columns[i].data.bytes)) {
            free_columns(columns, count);
            return PyErr_NoMemory();
        }
        columns[i].offsets[0] = 0;
    }
    Py_ssize_t rows = 0;
    int ended = 0, status;
    Py_BEGIN_ALLOW_THREADS
    status = fetch_rows(self, columns, max_rows, (size_t)max_bytes, &rows, &ended);
    Py_END_ALLOW_THREADS
    if (status != FETCH_OK) {
        free_columns(columns, count);
        release_result(self, 0);
        if (status == FETCH_NO_MEMORY) return PyErr_NoMemory();
        return scan_error(CR_UNKNOWN_ERROR, "a column of one fetch exceeds 2 GiB");
    }
    if (ended) {
        unsigned int code = mysql_errno(self->mysql);
        release_result(self, code == 0);
        if (code) {
            free_columns(columns, count);
            return server_error(self);
        }
    }
    for (unsigned int i = 0; i < count; i++) {
        if (!ended) self->sizes[i] = columns[i].data.length; /* the next fetch's likely size */
        if (rows < max_rows / 2) { /* a short last fetch holds no unused offsets */
            int32_t *fitted = realloc(columns[i].offsets, ((size_t)rows + 1) * sizeof(int32_t));
            if (fitted) columns[i].offsets = fitted;
        }
    }
    PyObject *buffers = column_buffers(columns, count, rows, checked);
    free_columns(columns, count);
    if (!buffers) return NULL;
    return Py_BuildValue("(nN)", rows, buffers);
}

static PyObject *TextScan_fetch(TextScan *self, PyObject *args) {
    Py_ssize_t max_rows, max_bytes;
    Py_buffer checked = {.buf = NULL, .len = 0};
    if (!PyArg_ParseTuple(args, "nn|y*", &max_rows, &max_bytes, &checked)) return NULL;
    PyObject *result = fetch_checked(self, max_rows, max_bytes, &checked);
    if (checked.obj) PyBuffer_Release(&checked);
    return result;
}

static PyObject *TextScan_field_names(TextScan *self, PyObject *noargs) {
    if (!self->result) return PyList_New(0);
    MYSQL_FIELD *fields = mysql_fetch_fields(self->result);
    PyObject *names = PyList_New(self->field_count);
    if (!names) return NULL;
    for (unsigned int i = 0; i < self->field_count; i++) {
        PyObject *name = PyUnicode_DecodeUTF8(fields[i].name, fields[i].name_length, "replace");
        if (!name) {
            Py_DECREF(names);
            return NULL;
        }
        PyList_SET_ITEM(names, i, name);
    }
    return names;
}

static PyObject *TextScan_abandon(TextScan *self, PyObject *noargs) {
    release_result(self, 0);
    Py_RETURN_NONE;
}

static PyMethodDef TextScan_methods[] = {
    {"execute", (PyCFunction)TextScan_execute, METH_VARARGS,
     "execute(query: bytes) -> field count. Starts streaming the query's result."},
    {"fetch", (PyCFunction)TextScan_fetch, METH_VARARGS,
     "fetch(max_rows, max_bytes, checked=b'') -> (rows, [(validity|None, offsets, data,\n"
     "ascii), ...]), each buffer a read-only Buffer (the buffer protocol); ascii: the\n"
     "column is one ``checked`` names (a nonzero byte at its index) and every byte of\n"
     "its values is below 0x80.\n"
     "Zero rows: the result is complete (and released)."},
    {"field_names", (PyCFunction)TextScan_field_names, METH_NOARGS,
     "The open result's column names."},
    {"abandon", (PyCFunction)TextScan_abandon, METH_NOARGS,
     "Release an unfinished result without reading it: the connection must then be closed."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TextScanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reader._textscan.TextScan",
    .tp_basicsize = sizeof(TextScan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Streams one query at a time of a MySQLdb connection into Arrow binary buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TextScan_init,
    .tp_dealloc = (destructor)TextScan_dealloc,
    .tp_methods = TextScan_methods,
};

static PyObject *client_version(PyObject *module, PyObject *noargs) {
    return PyLong_FromUnsignedLong(mysql_get_client_version());
}

static PyMethodDef module_methods[] = {
    {"client_version", client_version, METH_NOARGS,
     "mysql_get_client_version() of the libmariadb this module is linked with."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef textscan_module = {
    PyModuleDef_HEAD_INIT, "reader._textscan",
    "A SELECT's text result as Arrow binary buffers, over a borrowed MySQLdb connection.",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__textscan(void) {
    if (PyType_Ready(&TextScanType) < 0 || PyType_Ready(&BufferType) < 0) return NULL;
    PyObject *module = PyModule_Create(&textscan_module);
    if (!module) return NULL;
    ScanError = PyErr_NewException("reader._textscan.ScanError", PyExc_RuntimeError, NULL);
    if (!ScanError || PyModule_AddObjectRef(module, "ScanError", ScanError) < 0 ||
        PyModule_AddObjectRef(module, "TextScan", (PyObject *)&TextScanType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
