/*
 * A SELECT's result as Arrow columns, read in C over libmariadb, by two scans:
 * TextScan reads the text protocol, StatementScan (below, where libmariadb has a result
 * callback) a prepared statement's binary protocol.
 *
 * The connection is mysqlclient's (MySQLdb), borrowed through its
 * _get_native_connection() capsule: connecting, TLS, timeouts and errors of the
 * handshake stay mysqlclient's. A TextScan only runs one query at a time with
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
#include <stddef.h>
#include <stdio.h>
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

/* 1 if the borrowed connection ``owner`` is still open, 0 with ScanError set if not. */
static int connection_open(PyObject *owner) {
    PyObject *closed = PyObject_GetAttrString(owner, "closed");
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

/* The MYSQL handle of the MySQLdb connection ``owner``, or NULL with an exception set. */
static MYSQL *borrowed_connection(PyObject *owner) {
    PyObject *capsule = PyObject_CallMethod(owner, "_get_native_connection", NULL);
    if (!capsule) return NULL;
    MYSQL *mysql = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    Py_DECREF(capsule);
    return mysql;
}

/* What every scan object begins with (TextScan and StatementScan alike): the MySQLdb
 * connection it borrows, kept alive by the reference, and its handle. */
typedef struct {
    PyObject_HEAD
    PyObject *owner;
    MYSQL *mysql;
} Borrower;

_Static_assert(offsetof(TextScan, owner) == offsetof(Borrower, owner) &&
                   offsetof(TextScan, mysql) == offsetof(Borrower, mysql),
               "TextScan begins as a Borrower");

/* tp_init of both scans: ``Scan(connection)``. */
static int scan_init(PyObject *object, PyObject *args, PyObject *kwargs) {
    Borrower *self = (Borrower *)object;
    PyObject *owner;
    if (!PyArg_ParseTuple(args, "O", &owner)) return -1;
    if (self->owner) { /* its result or statement belongs to that connection */
        PyErr_SetString(PyExc_TypeError, "a scan is initialized once");
        return -1;
    }
    MYSQL *mysql = borrowed_connection(owner);
    if (!mysql) return -1;
    Py_INCREF(owner);
    Py_XSETREF(self->owner, owner);
    self->mysql = mysql;
    return 0;
}

/* A fetch's bounds, or -1 with ValueError set. */
static int check_fetch_bounds(Py_ssize_t max_rows, Py_ssize_t max_bytes) {
    if (max_rows <= 0 || max_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "max_rows and max_bytes must be positive");
        return -1;
    }
    if (max_rows > PY_SSIZE_T_MAX / 8 - 8) {
        PyErr_SetString(PyExc_ValueError, "max_rows is too large");
        return -1;
    }
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
    if (!connection_open(self->owner)) return NULL;
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

/* One fetched column as a (validity or None, offsets, data, ascii) tuple, the first
 * three Buffers, ascii True where ``asked`` and every byte is ASCII; the column's memory
 * moves into its Buffers. */
static PyObject *column_tuple(Column *c, Py_ssize_t rows, int asked) {
    if (!c->data.bytes) { /* no value had a byte: Arrow still wants a buffer */
        c->data.bytes = malloc(1);
        if (!c->data.bytes) return PyErr_NoMemory();
    } else if (c->data.capacity - c->data.length > c->data.length / 4 + 4096) {
        char *fitted = realloc(c->data.bytes, c->data.length ? c->data.length : 1);
        if (fitted) c->data.bytes = fitted; /* (else the larger block is kept) */
    }
    PyObject *ascii = asked && all_ascii(c->data.bytes, c->data.length) ? Py_True : Py_False;
    PyObject *validity = c->validity ? buffer_of((char **)&c->validity, (rows + 7) / 8)
                                     : (Py_INCREF(Py_None), Py_None);
    PyObject *offsets =
        buffer_of((char **)&c->offsets, (Py_ssize_t)((rows + 1) * sizeof(int32_t)));
    PyObject *data = buffer_of(&c->data.bytes, (Py_ssize_t)c->data.length);
    PyObject *tuple =
        (validity && offsets && data) ? PyTuple_Pack(4, validity, offsets, data, ascii) : NULL;
    Py_XDECREF(validity);
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    return tuple;
}

/* 1 if ``checked`` (a nonzero byte at a column's index) asks for column ``i``. */
static int ascii_asked(const Py_buffer *checked, unsigned int i) {
    return (Py_ssize_t)i < checked->len && ((const char *)checked->buf)[i];
}

/* The fetched columns as a list of column_tuple()s. */
static PyObject *column_buffers(Column *columns, unsigned int count, Py_ssize_t rows,
                                const Py_buffer *checked) {
    PyObject *list = PyList_New(count);
    if (!list) return NULL;
    for (unsigned int i = 0; i < count; i++) {
        PyObject *tuple = column_tuple(&columns[i], rows, ascii_asked(checked, i));
        if (!tuple) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, tuple);
    }
    return list;
}

enum { FETCH_OK, FETCH_NO_MEMORY, FETCH_TOO_LARGE, FETCH_MALFORMED };

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

/* Appends ``length`` bytes to a column's data (the caller sets the row's offset and
 * counts the bytes). */
static inline int append_value(Column *c, const char *from, size_t length) {
    size_t start = c->data.length;
    if (length > (size_t)INT32_MAX - start) return FETCH_TOO_LARGE;
    if (!length) return FETCH_OK; /* an empty value: the column may have no buffer yet */
    if (grow(&c->data, start + length) < 0) return FETCH_NO_MEMORY;
    if (length <= 16) {
        copy_short(c->data.bytes + start, from, length);
    } else {
        memcpy(c->data.bytes + start, from, length);
    }
    c->data.length = start + length;
    return FETCH_OK;
}

/* A column's buffers for a fetch of up to ``max_rows`` rows: its offsets, and its data
 * at the size ``previous`` (its previous fetch's bytes) suggests, within ``max_bytes``;
 * -1 when memory ran out (the caller frees what was allocated). */
static int start_text_column(Column *c, size_t previous, Py_ssize_t max_rows,
                             Py_ssize_t max_bytes) {
    c->offsets = malloc(((size_t)max_rows + 1) * sizeof(int32_t));
    if (!c->offsets) return -1;
    c->offsets[0] = 0;
    size_t hint = previous + previous / 8;
    if (hint > (size_t)max_bytes + 4096) hint = (size_t)max_bytes + 4096;
    if (hint) {
        c->data.bytes = malloc(hint);
        if (!c->data.bytes) return -1;
        c->data.capacity = hint;
    }
    return 0;
}

/* A short fetch (under half of ``max_rows``) keeps no unused offsets. */
static void fit_offsets(Column *c, Py_ssize_t rows, Py_ssize_t max_rows) {
    if (rows >= max_rows / 2 || !c->offsets) return;
    int32_t *fitted = realloc(c->offsets, ((size_t)rows + 1) * sizeof(int32_t));
    if (fitted) c->offsets = fitted;
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
            if (row[i]) {
                if (c->validity) c->validity[rows / 8] |= (uint8_t)(1u << (rows % 8));
                int status = append_value(c, row[i], lengths[i]);
                if (status != FETCH_OK) return status;
                bytes += lengths[i];
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
    if (check_fetch_bounds(max_rows, max_bytes) < 0) return NULL;
    if (!self->result) return Py_BuildValue("(n[])", (Py_ssize_t)0);
    if (!connection_open(self->owner)) return NULL;
    unsigned int count = self->field_count;
    Column *columns = calloc(count ? count : 1, sizeof(Column));
    if (!columns) return PyErr_NoMemory();
    for (unsigned int i = 0; i < count; i++) {
        if (start_text_column(&columns[i], self->sizes[i], max_rows, max_bytes) < 0) {
            free_columns(columns, count);
            return PyErr_NoMemory();
        }
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
        fit_offsets(&columns[i], rows, max_rows);
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
    .tp_init = scan_init,
    .tp_dealloc = (destructor)TextScan_dealloc,
    .tp_methods = TextScan_methods,
};

/* ---- The binary protocol: a statement's rows, values as the server stores them -------
 *
 * A StatementScan prepares each query (literals inlined, no parameters) and streams its
 * result in the binary protocol, unbuffered (mysql_stmt_fetch without
 * mysql_stmt_store_result). The server then sends integers and doubles as their bytes
 * instead of printing them, which costs it a third less CPU on a table of typed columns.
 * libmariadb converts nothing: a result callback (STMT_ATTR_CB_RESULT, with no result
 * bound) is handed each value's bytes in the row packet, and take_value parses them:
 *
 * - integers (TINY, SHORT, YEAR, INT24, LONG, LONGLONG) into a column of 64-bit values,
 *   signed or unsigned as the field's flag says;
 * - DOUBLE (and FLOAT, widened exactly) into a column of doubles;
 * - DATE, DATETIME, TIMESTAMP and TIME into the text the text protocol would have sent
 *   (YYYY-MM-DD[ HH:MM:SS], [-]HH:MM:SS, the field's decimals as fraction digits), so
 *   they are typed as the text scan's are;
 * - every other value (strings, DECIMAL, BIT, JSON, ENUM, SET, blobs), length-encoded in
 *   the packet, copied into a binary column as the text scan copies it.
 *
 * Safety: libmariadb keeps the packet in its network buffer but not its length, so every
 * read is bounded by that buffer's end (net.buff_end): a value whose length would reach
 * past it, a temporal value of a length the protocol does not have, or a type the scan
 * does not know, ends the fetch with an error, never a read outside the buffer. A packet
 * cut short within the buffer is not seen as such by this bound (its last values would
 * be read from the buffer's older bytes); libmariadb 3.3.20 checks a row's values
 * against the packet itself (MYSQL_DATA_MALFORMED), an error here too. A scan is used
 * by one thread at a time (a second call meanwhile is an error), and a result whose
 * fetch failed cannot be fetched further.
 */
#if defined(MARIADB_PACKAGE_VERSION_ID) && MARIADB_PACKAGE_VERSION_ID >= 30100
#define HAVE_RESULT_CALLBACK 1
#endif

#ifdef HAVE_RESULT_CALLBACK

enum { VALUE_TEXT, VALUE_SIGNED, VALUE_UNSIGNED, VALUE_DOUBLE, VALUE_DATE, VALUE_DATETIME,
       VALUE_TIME };

typedef struct {
    uint8_t kind;
    uint8_t width;    /* the packet's bytes of a SIGNED, UNSIGNED or DOUBLE value */
    uint8_t decimals; /* a temporal value's fraction digits in its text, 0..6 */
} FieldShape;

typedef struct {
    PyObject_HEAD
    PyObject *owner; /* the MySQLdb connection object */
    MYSQL *mysql;
    MYSQL_STMT *stmt;
    int reading;   /* a result is open and being read */
    int unread;    /* a result was left unread (an error, abandon()): the connection must go */
    int failed;    /* a fetch failed: later fetches of that result raise */
    int busy;      /* a call runs without the GIL */
    unsigned int field_count;
    FieldShape *shapes;
    size_t *sizes; /* per field: the data bytes its previous fetch held (a capacity hint) */
    /* One fetch, filled by take_value: */
    Column *columns;
    uint64_t **values; /* per fixed-width field, one value per row; NULL for the others */
    Py_ssize_t row;
    Py_ssize_t max_rows;
    size_t bytes;
    int failure; /* FETCH_OK, or why the fetch stopped */
} StatementScan;

_Static_assert(offsetof(StatementScan, owner) == offsetof(Borrower, owner) &&
                   offsetof(StatementScan, mysql) == offsetof(Borrower, mysql),
               "StatementScan begins as a Borrower");

static int is_fixed(uint8_t kind) {
    return kind == VALUE_SIGNED || kind == VALUE_UNSIGNED || kind == VALUE_DOUBLE;
}

/* How the binary protocol sends a field of ``field``'s type; 0, or -1 for a type the
 * scan does not take. */
static int field_shape(const MYSQL_FIELD *field, FieldShape *shape) {
    int is_unsigned = (field->flags & UNSIGNED_FLAG) != 0;
    shape->decimals = field->decimals > 6 ? 6 : (uint8_t)field->decimals;
    shape->width = 0;
    switch (field->type) {
    case MYSQL_TYPE_TINY:
        shape->width = 1;
        break;
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_YEAR:
        shape->width = 2;
        break;
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONG:
        shape->width = 4;
        break;
    case MYSQL_TYPE_LONGLONG:
        shape->width = 8;
        break;
    case MYSQL_TYPE_FLOAT:
        shape->kind = VALUE_DOUBLE;
        shape->width = 4;
        return 0;
    case MYSQL_TYPE_DOUBLE:
        shape->kind = VALUE_DOUBLE;
        shape->width = 8;
        return 0;
    case MYSQL_TYPE_DATE:
        shape->kind = VALUE_DATE;
        return 0;
    case MYSQL_TYPE_DATETIME:
    case MYSQL_TYPE_TIMESTAMP:
        shape->kind = VALUE_DATETIME;
        return 0;
    case MYSQL_TYPE_TIME:
        shape->kind = VALUE_TIME;
        return 0;
    case MYSQL_TYPE_NULL:
    case MYSQL_TYPE_NEWDATE:
    case MYSQL_TYPE_TIMESTAMP2:
    case MYSQL_TYPE_DATETIME2:
    case MYSQL_TYPE_TIME2:
        return -1; /* never in a result's metadata for a column */
    default: /* strings, DECIMAL, BIT, JSON, ENUM, SET, blobs: length-encoded bytes */
        shape->kind = VALUE_TEXT;
        return 0;
    }
    shape->kind = is_unsigned ? VALUE_UNSIGNED : VALUE_SIGNED;
    return 0;
}

/* "00".."99": two digits a step, in place of a division per digit. */
static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* ``value`` (below 10 ** digits) as exactly ``digits`` decimal digits. */
static char *put_digits(char *to, unsigned long value, int digits) {
    int i = digits;
    while (i >= 2) {
        i -= 2;
        memcpy(to + i, DIGIT_PAIRS + 2 * (value % 100), 2);
        value /= 100;
    }
    if (i) to[0] = (char)('0' + value % 10);
    return to + digits;
}

/* ``.`` and the fraction's first ``decimals`` digits of ``micros``, as the server prints
 * a temporal value of that many decimals (none for 0). */
static char *put_fraction(char *to, unsigned long micros, int decimals) {
    if (!decimals) return to;
    static const unsigned long scale[7] = {1000000, 100000, 10000, 1000, 100, 10, 1};
    *to++ = '.';
    return put_digits(to, micros / scale[decimals], decimals);
}

static uint32_t read_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A DATE, DATETIME, TIMESTAMP or TIME value (``length`` bytes at ``p``) as the text
 * protocol's text, into ``text``; its length, or -1 for a length the protocol has not. */
static int temporal_text(const FieldShape *shape, const unsigned char *p, size_t length,
                         char *text) {
    char *to = text;
    if (shape->kind == VALUE_TIME) {
        if (length != 0 && length != 8 && length != 12) return -1;
        int negative = length ? p[0] != 0 : 0;
        unsigned long days = length ? read_u32(p + 1) : 0;
        unsigned long hours = days * 24 + (length ? p[5] : 0);
        unsigned long micros = length == 12 ? read_u32(p + 8) : 0;
        if (days > 34 || micros > 999999) return -1; /* TIME spans 838:59:59 at most */
        if (negative) *to++ = '-';
        to = put_digits(to, hours, hours >= 100 ? 3 : 2);
        *to++ = ':';
        to = put_digits(to, length ? p[6] : 0, 2);
        *to++ = ':';
        to = put_digits(to, length ? p[7] : 0, 2);
        to = put_fraction(to, micros, shape->decimals);
        return (int)(to - text);
    }
    if (length != 0 && length != 4 && length != 7 && length != 11) return -1;
    if (shape->kind == VALUE_DATE && length > 4) return -1;
    unsigned long year = length ? (unsigned long)(p[0] | p[1] << 8) : 0;
    unsigned long micros = length == 11 ? read_u32(p + 7) : 0;
    if (year > 9999 || micros > 999999) return -1;
    to = put_digits(to, year, 4);
    *to++ = '-';
    to = put_digits(to, length ? p[2] : 0, 2);
    *to++ = '-';
    to = put_digits(to, length ? p[3] : 0, 2);
    if (shape->kind == VALUE_DATETIME) {
        *to++ = ' ';
        to = put_digits(to, length >= 7 ? p[4] : 0, 2);
        *to++ = ':';
        to = put_digits(to, length >= 7 ? p[5] : 0, 2);
        *to++ = ':';
        to = put_digits(to, length >= 7 ? p[6] : 0, 2);
        to = put_fraction(to, micros, shape->decimals);
    }
    return (int)(to - text);
}

/* A length-encoded integer at ``*p`` (bounded by ``end``), the position after it in
 * ``*p``; -1 if it runs past ``end`` or is not a length (251, NULL, has no place here). */
static int read_length(const unsigned char **p, const unsigned char *end, uint64_t *length) {
    const unsigned char *at = *p;
    if (at >= end) return -1;
    unsigned char first = *at++;
    size_t size = first < 251 ? 0 : first == 252 ? 2 : first == 253 ? 3 : first == 254 ? 8 : 9;
    if (size == 9 || (size_t)(end - at) < size) return -1;
    uint64_t value = first < 251 ? first : 0;
    for (size_t i = 0; i < size; i++) value |= (uint64_t)at[i] << (8 * i);
    *p = at + size;
    *length = value;
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define FROM_LITTLE_16(x) __builtin_bswap16(x)
#define FROM_LITTLE_32(x) __builtin_bswap32(x)
#define FROM_LITTLE_64(x) __builtin_bswap64(x)
#else
#define FROM_LITTLE_16(x) (x)
#define FROM_LITTLE_32(x) (x)
#define FROM_LITTLE_64(x) (x)
#endif

/* A fixed-width little-endian value at ``p`` as 64 bits (in the host's order, as Arrow
 * holds them): sign-extended for SIGNED, a double's bits for DOUBLE (a FLOAT widened). */
static inline uint64_t fixed_value(const FieldShape *shape, const unsigned char *p) {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    int is_signed = shape->kind == VALUE_SIGNED;
    switch (shape->width) {
    case 1:
        u8 = p[0];
        return is_signed ? (uint64_t)(int64_t)(int8_t)u8 : u8;
    case 2:
        memcpy(&u16, p, 2);
        u16 = FROM_LITTLE_16(u16);
        return is_signed ? (uint64_t)(int64_t)(int16_t)u16 : u16;
    case 4:
        memcpy(&u32, p, 4);
        u32 = FROM_LITTLE_32(u32);
        if (shape->kind == VALUE_DOUBLE) {
            float single;
            memcpy(&single, &u32, 4);
            double value = (double)single;
            memcpy(&u64, &value, 8);
            return u64;
        }
        return is_signed ? (uint64_t)(int64_t)(int32_t)u32 : u32;
    default:
        memcpy(&u64, p, 8);
        return FROM_LITTLE_64(u64);
    }
}

/* One value of one row (``row`` NULL: SQL NULL), parsed from the packet and advanced
 * past; libmariadb calls it for each field of each row, in order. */
static inline int parse_value(StatementScan *self, unsigned int index, unsigned char **row) {
    const FieldShape *shape = &self->shapes[index];
    Column *c = &self->columns[index];
    Py_ssize_t at = self->row;
    if (!row) {
        if (!c->validity && start_validity(c, self->max_rows, at) < 0) return FETCH_NO_MEMORY;
        if (is_fixed(shape->kind)) {
            self->values[index][at] = 0;
        } else {
            c->offsets[at + 1] = (int32_t)c->data.length;
        }
        return FETCH_OK;
    }
    if (c->validity) c->validity[at / 8] |= (uint8_t)(1u << (at % 8));
    const unsigned char *p = *row;
    const unsigned char *end = (const unsigned char *)self->stmt->mysql->net.buff_end;
    if (!end || p > end) return FETCH_MALFORMED;
    if (is_fixed(shape->kind)) {
        if ((size_t)(end - p) < shape->width) return FETCH_MALFORMED;
        self->values[index][at] = fixed_value(shape, p);
        *row = (unsigned char *)p + shape->width;
        return FETCH_OK;
    }
    int status;
    if (shape->kind == VALUE_TEXT) {
        uint64_t length;
        if (p < end && *p < 251) { /* a length in one byte: most values */
            length = *p++;
        } else if (read_length(&p, end, &length) < 0) {
            return FETCH_MALFORMED;
        }
        if (length > (uint64_t)(end - p)) return FETCH_MALFORMED;
        status = append_value(c, (const char *)p, (size_t)length);
        self->bytes += length;
        p += length;
    } else {
        if (p >= end) return FETCH_MALFORMED;
        size_t length = *p++;
        if ((size_t)(end - p) < length) return FETCH_MALFORMED;
        char text[40];
        int written = temporal_text(shape, p, length, text);
        if (written < 0) return FETCH_MALFORMED;
        status = append_value(c, text, (size_t)written);
        self->bytes += (size_t)written;
        p += length;
    }
    c->offsets[at + 1] = (int32_t)c->data.length;
    *row = (unsigned char *)p;
    return status;
}

static void take_value(void *data, unsigned int index, unsigned char **row) {
    StatementScan *self = data;
    if (self->failure != FETCH_OK) return;
    if (!self->columns || index >= self->field_count) {
        self->failure = FETCH_MALFORMED;
        return;
    }
    self->failure = parse_value(self, index, row);
}

/* The statement's error, or its connection's (a lost connection is the connection's). */
static PyObject *statement_error(StatementScan *self) {
    if (mysql_stmt_errno(self->stmt)) {
        return scan_error(mysql_stmt_errno(self->stmt), mysql_stmt_error(self->stmt));
    }
    if (mysql_errno(self->mysql)) return scan_error(mysql_errno(self->mysql), mysql_error(self->mysql));
    return scan_error(CR_UNKNOWN_ERROR, "the statement failed without an error");
}

static void StatementScan_dealloc(StatementScan *self) {
    /* mysql_close() detaches the statement (stmt->mysql NULL): closing it then frees it
     * and sends nothing. On a connection still open with a result unread, libmariadb
     * reads the rest of the result first, without the GIL here (the source closes the
     * connection before it drops a scan, so this is the rare case). */
    if (self->stmt) {
        if ((self->reading || self->unread) && self->stmt->mysql) {
            Py_BEGIN_ALLOW_THREADS
            mysql_stmt_close(self->stmt);
            Py_END_ALLOW_THREADS
        } else {
            mysql_stmt_close(self->stmt);
        }
    }
    free(self->shapes);
    free(self->sizes);
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Reads the executed statement's field shapes; -1 with an exception set. */
static int read_shapes(StatementScan *self) {
    unsigned int count = mysql_stmt_field_count(self->stmt);
    if (!count || !self->stmt->fields) {
        scan_error(CR_UNKNOWN_ERROR, "the statement returned no result set");
        return -1;
    }
    FieldShape *shapes = calloc(count, sizeof(FieldShape));
    if (!shapes) {
        PyErr_NoMemory();
        return -1;
    }
    for (unsigned int i = 0; i < count; i++) {
        if (field_shape(&self->stmt->fields[i], &shapes[i]) < 0) {
            free(shapes);
            char message[120];
            snprintf(message, sizeof message,
                     "column %u of the result has type %d, which the binary protocol scan "
                     "does not read",
                     i, (int)self->stmt->fields[i].type);
            scan_error(CR_UNKNOWN_ERROR, message);
            return -1;
        }
    }
    if (count != self->field_count || !self->sizes) { /* another shape: no hints yet */
        free(self->sizes);
        self->sizes = calloc(count, sizeof(size_t));
        if (!self->sizes) {
            free(shapes);
            PyErr_NoMemory();
            return -1;
        }
    }
    free(self->shapes);
    self->shapes = shapes;
    self->field_count = count;
    return 0;
}

static PyObject *StatementScan_execute(StatementScan *self, PyObject *args) {
    const char *query;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "y#", &query, &length)) return NULL;
    if (!self->owner) return scan_error(CR_UNKNOWN_ERROR, "StatementScan is not initialized");
    if (!connection_open(self->owner)) return NULL;
    if (self->busy) return scan_error(CR_COMMANDS_OUT_OF_SYNC, "the scan is in use");
    if (self->reading || self->unread) {
        return scan_error(CR_COMMANDS_OUT_OF_SYNC, "a result is still open");
    }
    if (self->stmt && !self->stmt->mysql) { /* mysql_reset_connection(), a reconnect */
        return scan_error(CR_SERVER_LOST, "the statement's connection was reset");
    }
    if (!self->stmt) {
        self->stmt = mysql_stmt_init(self->mysql);
        if (!self->stmt) return scan_error(mysql_errno(self->mysql), mysql_error(self->mysql));
    }
    int failed;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    failed = mysql_stmt_prepare(self->stmt, query, (unsigned long)length);
    if (!failed) {
        mysql_stmt_attr_set(self->stmt, STMT_ATTR_CB_USER_DATA, self);
        mysql_stmt_attr_set(self->stmt, STMT_ATTR_CB_RESULT, (const void *)take_value);
        failed = mysql_stmt_execute(self->stmt);
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (failed) return statement_error(self);
    self->reading = 1;
    self->failed = 0;
    if (read_shapes(self) < 0) {
        self->reading = 0;
        self->unread = 1; /* the connection must go (see abandon) */
        return NULL;
    }
    return PyLong_FromUnsignedLong(self->field_count);
}

static void free_fetch(StatementScan *self) {
    if (self->values) {
        for (unsigned int i = 0; i < self->field_count; i++) free(self->values[i]);
        free(self->values);
        self->values = NULL;
    }
    free_columns(self->columns, self->field_count);
    self->columns = NULL;
}

static int start_fetch(StatementScan *self, Py_ssize_t max_rows, Py_ssize_t max_bytes) {
    unsigned int count = self->field_count;
    self->columns = calloc(count, sizeof(Column));
    self->values = calloc(count, sizeof(uint64_t *));
    if (!self->columns || !self->values) return -1;
    for (unsigned int i = 0; i < count; i++) {
        if (is_fixed(self->shapes[i].kind)) {
            self->values[i] = malloc((size_t)max_rows * sizeof(uint64_t));
            if (!self->values[i]) return -1;
            continue;
        }
        if (start_text_column(&self->columns[i], self->sizes[i], max_rows, max_bytes) < 0) {
            return -1;
        }
    }
    self->row = 0;
    self->max_rows = max_rows;
    self->bytes = 0;
    self->failure = FETCH_OK;
    return 0;
}

/* Rows into the fetch's columns, without the GIL; returns 1 at the result's end, 0 when
 * a bound was reached, -1 for an error of libmariadb's (the statement's errno), or of a
 * row libmariadb found malformed (MYSQL_DATA_MALFORMED, where it checks rows: the fetch's
 * failure). */
static int fetch_statement_rows(StatementScan *self, size_t max_bytes) {
    while (self->row < self->max_rows && self->bytes < max_bytes) {
        int status = mysql_stmt_fetch(self->stmt);
        if (status == MYSQL_NO_DATA) return 1;
        if (status == 1) return -1;
        if (status != 0 && self->failure == FETCH_OK) self->failure = FETCH_MALFORMED;
        if (self->failure != FETCH_OK) return 0;
        self->row++;
    }
    return 0;
}

static const char *const VALUE_TYPES[] = {"binary", "int64", "uint64", "float64"};

/* The fetch as a list of (type, validity or None, first, second, ascii): type "binary"
 * with offsets and data (ascii as the text scan's), or "int64", "uint64" or "float64"
 * with the values and None. */
static PyObject *statement_buffers(StatementScan *self, Py_ssize_t rows,
                                   const Py_buffer *checked) {
    PyObject *list = PyList_New(self->field_count);
    if (!list) return NULL;
    for (unsigned int i = 0; i < self->field_count; i++) {
        uint8_t kind = self->shapes[i].kind;
        Column *c = &self->columns[i];
        PyObject *tuple;
        if (is_fixed(kind)) {
            PyObject *validity = c->validity ? buffer_of((char **)&c->validity, (rows + 7) / 8)
                                             : (Py_INCREF(Py_None), Py_None);
            PyObject *values = buffer_of((char **)&self->values[i],
                                         (Py_ssize_t)((size_t)rows * sizeof(uint64_t)));
            tuple = (validity && values) ? Py_BuildValue("(sOOOO)", VALUE_TYPES[kind], validity,
                                                         values, Py_None, Py_False)
                                         : NULL;
            Py_XDECREF(validity);
            Py_XDECREF(values);
        } else {
            PyObject *text = column_tuple(c, rows, ascii_asked(checked, i));
            tuple = text ? Py_BuildValue("(sOOOO)", VALUE_TYPES[0], PyTuple_GET_ITEM(text, 0),
                                         PyTuple_GET_ITEM(text, 1), PyTuple_GET_ITEM(text, 2),
                                         PyTuple_GET_ITEM(text, 3))
                         : NULL;
            Py_XDECREF(text);
        }
        if (!tuple) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, tuple);
    }
    return list;
}

static PyObject *StatementScan_fetch(StatementScan *self, PyObject *args) {
    Py_ssize_t max_rows, max_bytes;
    Py_buffer checked = {.buf = NULL, .len = 0};
    if (!PyArg_ParseTuple(args, "nn|y*", &max_rows, &max_bytes, &checked)) return NULL;
    PyObject *result = NULL;
    if (check_fetch_bounds(max_rows, max_bytes) < 0) goto done;
    if (self->busy) {
        scan_error(CR_COMMANDS_OUT_OF_SYNC, "the scan is in use");
        goto done;
    }
    if (self->failed) {
        scan_error(CR_COMMANDS_OUT_OF_SYNC, "a fetch of this result failed: it cannot go on");
        goto done;
    }
    if (!self->reading) {
        result = Py_BuildValue("(n[])", (Py_ssize_t)0);
        goto done;
    }
    if (!connection_open(self->owner)) goto done;
    if (!self->stmt->mysql) {
        scan_error(CR_SERVER_LOST, "the statement's connection was reset");
        goto done;
    }
    if (start_fetch(self, max_rows, max_bytes) < 0) {
        free_fetch(self);
        self->reading = 0;
        self->unread = self->failed = 1;
        PyErr_NoMemory();
        goto done;
    }
    int outcome;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    outcome = fetch_statement_rows(self, (size_t)max_bytes);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    Py_ssize_t rows = self->row;
    if (outcome < 0 || self->failure != FETCH_OK) {
        int failure = self->failure;
        free_fetch(self);
        self->reading = 0; /* the connection must go: its result is unread */
        self->unread = self->failed = 1;
        if (outcome < 0) {
            statement_error(self);
        } else if (failure == FETCH_NO_MEMORY) {
            PyErr_NoMemory();
        } else if (failure == FETCH_TOO_LARGE) {
            scan_error(CR_UNKNOWN_ERROR, "a column of one fetch exceeds 2 GiB");
        } else {
            scan_error(CR_MALFORMED_PACKET, "a row of the binary protocol is malformed");
        }
        goto done;
    }
    if (outcome == 1) self->reading = 0; /* the result is complete */
    for (unsigned int i = 0; i < self->field_count; i++) {
        Column *c = &self->columns[i];
        if (self->reading) self->sizes[i] = c->data.length; /* the next fetch's likely size */
        fit_offsets(c, rows, max_rows);
        if (self->values[i] && rows && rows < max_rows / 2) { /* nor unused values */
            uint64_t *fitted = realloc(self->values[i], (size_t)rows * sizeof(uint64_t));
            if (fitted) self->values[i] = fitted;
        }
    }
    PyObject *buffers = statement_buffers(self, rows, &checked);
    free_fetch(self);
    if (buffers) result = Py_BuildValue("(nN)", rows, buffers);
done:
    if (checked.obj) PyBuffer_Release(&checked);
    return result;
}

static PyObject *StatementScan_abandon(StatementScan *self, PyObject *noargs) {
    if (self->reading) self->unread = 1; /* nothing more is read: the connection must go */
    self->reading = 0;
    Py_RETURN_NONE;
}

static PyMethodDef StatementScan_methods[] = {
    {"execute", (PyCFunction)StatementScan_execute, METH_VARARGS,
     "execute(query: bytes) -> field count. Prepares the query and starts streaming its\n"
     "result in the binary protocol."},
    {"fetch", (PyCFunction)StatementScan_fetch, METH_VARARGS,
     "fetch(max_rows, max_bytes, checked=b'') -> (rows, [(type, validity|None, first,\n"
     "second, ascii), ...]): type 'binary' with offsets and data (a text column, ascii as\n"
     "TextScan.fetch's), or 'int64', 'uint64' or 'float64' with the values and None; each\n"
     "buffer a read-only Buffer. Zero rows: the result is complete."},
    {"abandon", (PyCFunction)StatementScan_abandon, METH_NOARGS,
     "Leave an unfinished result unread: the connection must then be closed."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StatementScanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reader._textscan.StatementScan",
    .tp_basicsize = sizeof(StatementScan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Streams one prepared query at a time of a MySQLdb connection, in the binary "
              "protocol, into Arrow buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = scan_init,
    .tp_dealloc = (destructor)StatementScan_dealloc,
    .tp_methods = StatementScan_methods,
};
#endif /* HAVE_RESULT_CALLBACK */

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
    "A SELECT's result as Arrow buffers (text or binary protocol), over a borrowed MySQLdb "
    "connection.",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__textscan(void) {
    if (PyType_Ready(&TextScanType) < 0 || PyType_Ready(&BufferType) < 0) return NULL;
#ifdef HAVE_RESULT_CALLBACK
    if (PyType_Ready(&StatementScanType) < 0) return NULL;
#endif
    PyObject *module = PyModule_Create(&textscan_module);
    if (!module) return NULL;
    ScanError = PyErr_NewException("reader._textscan.ScanError", PyExc_RuntimeError, NULL);
    if (!ScanError || PyModule_AddObjectRef(module, "ScanError", ScanError) < 0 ||
        PyModule_AddObjectRef(module, "TextScan", (PyObject *)&TextScanType) < 0
#ifdef HAVE_RESULT_CALLBACK
        || PyModule_AddObjectRef(module, "StatementScan", (PyObject *)&StatementScanType) < 0
#endif
    ) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
