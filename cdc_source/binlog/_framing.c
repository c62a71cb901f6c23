/*
 * The binlog dump stream's two hot walks, twins of Python code in cdc_source/binlog:
 *
 * - split_events: the MySQL packets of the raw stream into events, headers parsed and
 *   CRC32s checked (events.EventReader.events_from_stream; its Python path frames the
 *   packets in Python and parses each event with events.split_header);
 * - count_rows: the rows of a rows event, found by walking the images' lengths without
 *   decoding a value (cdc_source.binlog.row_count.count_rows);
 * - PlainEvents: the driver's plain events, which split_events folds into runs instead of
 *   handing each to Python (cdc_source.binlog.plain_events; its twin is the event path).
 *
 * Every read is bounds-checked against the end of the buffer or the event's row data.
 * Bad bytes raise FramingError (a ValueError) naming where; nothing reads or writes
 * outside a buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *FramingError;

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A length-encoded integer at p[*pos], read only below stop. */
static int lenenc(const uint8_t *p, size_t *pos, size_t stop, uint64_t *out) {
    if (*pos >= stop) {
        PyErr_Format(FramingError, "row image needs 1 bytes at offset %zu, past %zu", *pos, stop);
        return -1;
    }
    uint8_t first = p[(*pos)++];
    int n = first < 0xFB ? 0 : first == 0xFC ? 2 : first == 0xFD ? 3 : first == 0xFE ? 8 : -1;
    if (n < 0) { PyErr_Format(FramingError, "invalid length-encoded integer %#x", first); return -1; }
    if (n == 0) { *out = first; return 0; }
    if ((size_t)n > stop - *pos) {
        PyErr_Format(FramingError, "row image needs %d bytes at offset %zu, past %zu",
                     n, *pos, stop);
        return -1;
    }
    *out = le(p + *pos, n);
    *pos += (size_t)n;
    return 0;
}

/* ---- packet and event splitting ----------------------------------------------------
 *
 * split_events(buffer, start, checksum) walks the MySQL packets of a binlog dump in
 * buffer[start:] and returns (events, consumed, status):
 *   events    [(type, timestamp, flags, end_pos, body, server_id), ...] for each whole event,
 *             up to and including a FORMAT_DESCRIPTION;
 *             body excludes the 19-byte header and, with checksum, the CRC32, which is
 *             verified. A FORMAT_DESCRIPTION event comes back whole (header and all) for
 *             Python to parse: it declares its own checksum algorithm.
 *   consumed  bytes of buffer[start:] used
 *   status    0: needs more bytes; 1: the EOF packet was read; 2: the next packet is an
 *             error packet or a payload split over several packets (>= 16 MiB), which
 *             Python handles; 3 (with plain): stopped after an event Python registers,
 *             more may be buffered.
 * With plain (a PlainEvents), the plain events among those Python would keep (past
 * ``after``, where the last kept event ended) and ending at or before ``stop`` are folded:
 * each run of them is one item (PLAIN_RUN, 0, 0, end of its last event, None, its rows)
 * in its place. Nothing is folded after a ROTATE.
 * A malformed event raises ValueError naming its end position.
 */
/* CRC32 (the binlog's checksum, zlib's polynomial) eight bytes at a time: table k holds
 * the CRC of a byte followed by k zero bytes, so one step folds eight input bytes with
 * eight lookups instead of eight dependent ones. Bytes are assembled explicitly, so the
 * result does not depend on the host's byte order. */
static uint32_t crc_tables[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tables[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_tables[k][i] = (crc_tables[k - 1][i] >> 8) ^ crc_tables[0][crc_tables[k - 1][i] & 0xFF];
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t low = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24);
        uint32_t high = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                        (uint32_t)p[7] << 24;
        c = crc_tables[7][low & 0xFF] ^ crc_tables[6][(low >> 8) & 0xFF] ^
            crc_tables[5][(low >> 16) & 0xFF] ^ crc_tables[4][low >> 24] ^
            crc_tables[3][high & 0xFF] ^ crc_tables[2][(high >> 8) & 0xFF] ^
            crc_tables[1][(high >> 16) & 0xFF] ^ crc_tables[0][high >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_tables[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- the driver's plain events -------------------------------------------------------
 *
 * A PlainEvents tells split_events which events the driver's listeners need not see one
 * by one (cdc_source.binlog.plain_events says when that holds). Each event type has a
 * mode:
 *   0  never plain;
 *   1  always plain (no listener wants the type);
 *   2  a TABLE_MAP, plain when its body is the one registered for its table id;
 *   3  a rows event, plain when its body starts with the header registered for its type,
 *      table id and flags, and the table entry that header was registered with is still
 *      the one of the table id; its rows are counted where that entry says the table is
 *      captured;
 *   4  a QUERY, plain when its statement is BEGIN (MySQL's start of a transaction after
 *      its GTID event).
 * A table entry is (body, captured, sizes, json_bitmap): the TABLE_MAP's body, whether the
 * table's rows count, count_rows' sizes and the JSON bitmap's bytes of a partial update.
 * A rows header is (header, table key, table entry, images, partial), keyed by the event
 * type byte followed by the body's table id and flags. What is registered is bounded by
 * its owner (the driver's row count forgets it all with its table maps).
 */
static Py_ssize_t count_images(const uint8_t *p, size_t pos, size_t stop, int images,
                               const uint8_t *sz, size_t columns, Py_ssize_t json_bitmap);

typedef struct {
    PyObject_HEAD
    uint8_t modes[256];
    int id_width;       /* bytes of a table id at the start of a body: 6, or 4 */
    int query_header;   /* bytes of a QUERY event's post-header (13 since MySQL 5.0) */
    PyObject *tables;   /* dict: table id -> table entry */
    PyObject *headers;  /* dict: type, table id and flags (bytes) -> rows header */
} PlainEvents;

static int not_ready(PlainEvents *self) {
    if (self->tables && self->headers) return 0;
    PyErr_SetString(PyExc_ValueError, "PlainEvents not initialized");
    return 1;
}

/* The headers' key of a rows event of ``type`` whose body starts with ``body``. */
static PyObject *header_key(PlainEvents *self, int type, const uint8_t *body) {
    uint8_t key[9];
    size_t n = (size_t)self->id_width + 2;
    key[0] = (uint8_t)type;
    memcpy(key + 1, body, n);
    return PyBytes_FromStringAndSize((const char *)key, (Py_ssize_t)(n + 1));
}

/* A table id width of 4 or 6 and a QUERY post-header of 13 bytes or more, from a
 * FORMAT_DESCRIPTION: what was registered under the format before is forgotten (the
 * row count's own cache of headers holds them per format too). */
static int set_format(PlainEvents *self, int id_width, int query_header) {
    if ((id_width != 4 && id_width != 6) || query_header < 13 || query_header > 255) {
        PyErr_SetString(PyExc_ValueError,
                        "PlainEvents: a table id width of 4 or 6, a QUERY post-header of 13-255");
        return -1;
    }
    self->query_header = query_header;
    self->id_width = id_width;
    PyDict_Clear(self->tables);
    PyDict_Clear(self->headers);
    return 0;
}

static int plain_init(PlainEvents *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) return -1;
    memset(self->modes, 0, 256);
    self->id_width = 6;
    self->query_header = 13;
    Py_XSETREF(self->tables, PyDict_New());
    Py_XSETREF(self->headers, PyDict_New());
    return self->tables && self->headers ? 0 : -1;
}

/* set_modes(modes): 256 bytes, each 0-4, by event type */
static PyObject *plain_set_modes(PlainEvents *self, PyObject *arg) {
    Py_buffer modes;
    if (PyObject_GetBuffer(arg, &modes, PyBUF_SIMPLE) < 0) return NULL;
    int bad = modes.len != 256;
    for (Py_ssize_t i = 0; !bad && i < 256; i++) bad = ((const uint8_t *)modes.buf)[i] > 4;
    if (!bad) memcpy(self->modes, modes.buf, 256);
    PyBuffer_Release(&modes);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "PlainEvents.set_modes: 256 modes of 0-4");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* set_format(id_width, query_header): what the FORMAT_DESCRIPTION says, modes kept */
static PyObject *plain_set_format(PlainEvents *self, PyObject *args) {
    int id_width, query_header;
    if (!PyArg_ParseTuple(args, "ii", &id_width, &query_header)) return NULL;
    if (not_ready(self) || set_format(self, id_width, query_header) < 0) return NULL;
    Py_RETURN_NONE;
}

static void plain_dealloc(PlainEvents *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->tables);
    Py_CLEAR(self->headers);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int plain_traverse(PlainEvents *self, visitproc visit, void *arg) {
    Py_VISIT(self->tables);
    Py_VISIT(self->headers);
    return 0;
}

static int plain_clear_refs(PlainEvents *self) {
    Py_CLEAR(self->tables);
    Py_CLEAR(self->headers);
    return 0;
}

/* table(table_id, body, captured, sizes, json_bitmap): the TABLE_MAP ``body`` of the table
 * id, and how its rows count. The same entry again keeps the one registered, which rows
 * headers point to. */
static PyObject *plain_table(PlainEvents *self, PyObject *args) {
    unsigned long long table_id;
    PyObject *body, *sizes;
    int captured;
    Py_ssize_t json_bitmap;
    if (!PyArg_ParseTuple(args, "KSpSn", &table_id, &body, &captured, &sizes, &json_bitmap))
        return NULL;
    if (PyBytes_GET_SIZE(sizes) % 4 != 0 || json_bitmap < -1) {
        PyErr_SetString(PyExc_ValueError, "PlainEvents.table: sizes of 4 bytes a column");
        return NULL;
    }
    if (not_ready(self)) return NULL;
    PyObject *key = PyLong_FromUnsignedLongLong(table_id);
    PyObject *entry = Py_BuildValue("(OOOn)", body, captured ? Py_True : Py_False, sizes, json_bitmap);
    int failed = !key || !entry;
    if (!failed) {
        PyObject *known = PyDict_GetItemWithError(self->tables, key);
        int same = known ? PyObject_RichCompareBool(known, entry, Py_EQ) : 0;
        failed = same < 0 || (!known && PyErr_Occurred()) ||
                 (!same && PyDict_SetItem(self->tables, key, entry) < 0);
    }
    Py_XDECREF(key);
    Py_XDECREF(entry);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

/* rows_header(event_type, header, table_id, images, partial): a rows event of the type
 * whose body starts with ``header`` (the table id, flags and what follows up to the row
 * data) is one of the table id's registered table, with ``images`` images a row (2 for an
 * update). Nothing is registered where the table is not. */
static PyObject *plain_rows_header(PlainEvents *self, PyObject *args) {
    int type, images, partial;
    PyObject *header;
    unsigned long long table_id;
    if (!PyArg_ParseTuple(args, "iSKip", &type, &header, &table_id, &images, &partial))
        return NULL;
    if (type < 0 || type > 255 || images < 1 || images > 2) {
        PyErr_SetString(PyExc_ValueError, "PlainEvents.rows_header: a type of 0-255, 1 or 2 images");
        return NULL;
    }
    if (not_ready(self)) return NULL;
    if (PyBytes_GET_SIZE(header) < self->id_width + 2 ||
        le((const uint8_t *)PyBytes_AS_STRING(header), self->id_width) != table_id) {
        PyErr_SetString(PyExc_ValueError, "PlainEvents.rows_header: a header of its table id and flags");
        return NULL;
    }
    PyObject *table_key = PyLong_FromUnsignedLongLong(table_id);
    if (!table_key) return NULL;
    PyObject *entry = PyDict_GetItemWithError(self->tables, table_key);
    if (!entry) {
        Py_DECREF(table_key);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;  /* no table registered: such events stay one by one */
    }
    PyObject *key = header_key(self, type, (const uint8_t *)PyBytes_AS_STRING(header));
    PyObject *value = key ? Py_BuildValue("(OOOii)", header, table_key, entry, images, partial) : NULL;
    int failed = !value || PyDict_SetItem(self->headers, key, value) < 0;
    Py_DECREF(table_key);
    Py_XDECREF(key);
    Py_XDECREF(value);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

static PyObject *plain_clear(PlainEvents *self, PyObject *unused) {
    if (self->tables) PyDict_Clear(self->tables);
    if (self->headers) PyDict_Clear(self->headers);
    Py_RETURN_NONE;
}

/* Whether a QUERY event's body holds the statement BEGIN: post-header (thread id 4, exec
 * time 4, schema length 1, error code 2, status-vars length 2, then what a later server
 * adds), status vars, schema and its NUL, then the statement to the end. */
static int is_begin(PlainEvents *self, const uint8_t *body, size_t n) {
    size_t header = (size_t)self->query_header;
    if (n < header) return 0;
    size_t status_len = (size_t)le(body + 11, 2), schema_len = body[8];
    size_t start = header + status_len + schema_len + 1;
    return start <= n && n - start == 5 && memcmp(body + start, "BEGIN", 5) == 0;
}

/* The rows of a plain event (>= 0), -1 where the event is not plain, -2 with an error set
 * (FramingError where a plain event's row data is malformed). */
static Py_ssize_t plain_rows(PlainEvents *self, int type, const uint8_t *body, size_t n,
                             uint32_t end_pos) {
    int mode = self->modes[type];
    if (mode == 0) return -1;
    if (mode == 1) return 0;
    if (mode == 4) return is_begin(self, body, n) ? 0 : -1;
    if (!self->tables || !self->headers) return -1;
    if (mode == 2) {
        if (n < (size_t)self->id_width) return -1;
        PyObject *key = PyLong_FromUnsignedLongLong(le(body, self->id_width));
        if (!key) return -2;
        PyObject *entry = PyDict_GetItemWithError(self->tables, key);
        Py_DECREF(key);
        if (!entry) return PyErr_Occurred() ? -2 : -1;
        PyObject *known = PyTuple_GET_ITEM(entry, 0);
        if ((size_t)PyBytes_GET_SIZE(known) != n || memcmp(PyBytes_AS_STRING(known), body, n) != 0)
            return -1;
        return 0;
    }
    if (n < (size_t)self->id_width + 2) return -1;
    PyObject *key = header_key(self, type, body);
    if (!key) return -2;
    PyObject *known = PyDict_GetItemWithError(self->headers, key);
    Py_DECREF(key);
    if (!known) return PyErr_Occurred() ? -2 : -1;
    PyObject *header = PyTuple_GET_ITEM(known, 0);
    size_t header_len = (size_t)PyBytes_GET_SIZE(header);
    if (n < header_len || memcmp(PyBytes_AS_STRING(header), body, header_len) != 0) return -1;
    PyObject *entry = PyDict_GetItemWithError(self->tables, PyTuple_GET_ITEM(known, 1));
    if (entry != PyTuple_GET_ITEM(known, 2)) return PyErr_Occurred() ? -2 : -1;
    if (PyTuple_GET_ITEM(entry, 1) != Py_True) return 0;
    int images = (int)PyLong_AsLong(PyTuple_GET_ITEM(known, 3));
    int partial = (int)PyLong_AsLong(PyTuple_GET_ITEM(known, 4));
    PyObject *sizes = PyTuple_GET_ITEM(entry, 2);
    Py_ssize_t json_bitmap = partial ? PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 3)) : -1;
    if (PyErr_Occurred()) return -2;
    Py_ssize_t rows = count_images(body, header_len, n, images,
                                   (const uint8_t *)PyBytes_AS_STRING(sizes),
                                   (size_t)PyBytes_GET_SIZE(sizes) / 4, json_bitmap);
    if (rows < 0) {
        PyObject *type_, *value, *tb;
        PyErr_Fetch(&type_, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *said = text ? PyUnicode_AsUTF8(text) : NULL;
        if (!said) PyErr_Clear();
        PyErr_Format(FramingError, "%s in rows event type %d ending at %u",
                     said ? said : "malformed row data", type, end_pos);
        Py_XDECREF(text);
        Py_XDECREF(type_);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -2;
    }
    return rows;
}

/* Whether an event that is not plain will be registered by Python once handed (1), so
 * that split_events stops after it: a TABLE_MAP of a plain mode, and a rows event of a
 * plain mode whose table is registered (its header will be). 0 otherwise, -1 on error. */
static int registers_after(PlainEvents *self, int type, const uint8_t *body, size_t n) {
    int mode = self->modes[type];
    if (mode == 2) return 1;
    if (mode != 3 || n < (size_t)self->id_width || !self->tables) return 0;
    PyObject *key = PyLong_FromUnsignedLongLong(le(body, self->id_width));
    if (!key) return -1;
    PyObject *entry = PyDict_GetItemWithError(self->tables, key);
    Py_DECREF(key);
    if (!entry) return PyErr_Occurred() ? -1 : 0;
    return 1;
}

/* rows(event_type, body) -> the rows of the event where it is plain, else None: the
 * decision split_events makes, for one event (tests and fuzzing). */
static PyObject *plain_rows_of(PlainEvents *self, PyObject *args) {
    int type;
    Py_buffer body;
    if (!PyArg_ParseTuple(args, "iy*", &type, &body)) return NULL;
    PyObject *result = NULL;
    if (type < 0 || type > 255) {
        PyErr_SetString(PyExc_ValueError, "PlainEvents.rows: a type of 0-255");
    } else {
        Py_ssize_t rows = plain_rows(self, type, (const uint8_t *)body.buf, (size_t)body.len, 0);
        if (rows >= 0) result = PyLong_FromSsize_t(rows);
        else if (rows == -1) result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&body);
    return result;
}

static PyMethodDef plain_methods[] = {
    {"set_modes", (PyCFunction)plain_set_modes, METH_O, "set_modes(modes)"},
    {"set_format", (PyCFunction)plain_set_format, METH_VARARGS,
     "set_format(id_width, query_header)"},
    {"table", (PyCFunction)plain_table, METH_VARARGS,
     "table(table_id, body, captured, sizes, json_bitmap)"},
    {"rows_header", (PyCFunction)plain_rows_header, METH_VARARGS,
     "rows_header(event_type, header, table_id, images, partial)"},
    {"clear", (PyCFunction)plain_clear, METH_NOARGS, "forget every table and header"},
    {"rows", (PyCFunction)plain_rows_of, METH_VARARGS,
     "rows(event_type, body) -> rows where the event is plain, else None"},
    {NULL}
};

static PyTypeObject PlainEventsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc_source.binlog._framing.PlainEvents",
    .tp_basicsize = sizeof(PlainEvents),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "PlainEvents(): which events split_events folds into runs (set_modes, table, rows_header)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plain_init,
    .tp_dealloc = (destructor)plain_dealloc,
    .tp_traverse = (traverseproc)plain_traverse,
    .tp_clear = (inquiry)plain_clear_refs,
    .tp_methods = plain_methods,
};

#define PLAIN_RUN 256  /* the type of a run of plain events in split_events' list */

/* Appends (PLAIN_RUN, 0, 0, end_pos, None, rows) for the plain events folded so far. */
static int flush_plain(PyObject *events, uint32_t end_pos, Py_ssize_t rows) {
    PyObject *item = Py_BuildValue("(iiikOn)", PLAIN_RUN, 0, 0, (unsigned long)end_pos,
                                   Py_None, rows);
    if (!item) return -1;
    int failed = PyList_Append(events, item) < 0;
    Py_DECREF(item);
    return failed ? -1 : 0;
}

static PyObject *split_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    int checksum;
    PyObject *plain_arg = Py_None;
    unsigned long after = 0, stop = 0;
    if (!PyArg_ParseTuple(args, "y*np|Okk", &view, &start, &checksum, &plain_arg, &after, &stop))
        return NULL;
    PyObject *events = NULL, *result = NULL;
    PlainEvents *plain = NULL;
    if (plain_arg != Py_None) {
        if (!PyObject_TypeCheck(plain_arg, &PlainEventsType)) {
            PyErr_SetString(PyExc_TypeError, "split_events: plain must be a PlainEvents or None");
            goto done;
        }
        plain = (PlainEvents *)plain_arg;
    }
    if (start < 0 || start > view.len) {
        PyErr_SetString(FramingError, "split_events: start outside the buffer");
        goto done;
    }
    events = PyList_New(0);
    if (!events) goto done;
    const uint8_t *p = (const uint8_t *)view.buf;
    size_t len = (size_t)view.len, pos = (size_t)start;
    int status = 0;
    /* plain events folded and not yet handed: their rows and where the last one ends;
     * last_end is where the last event Python keeps ends (EventReader.next_start) */
    int folding = plain != NULL, pending = 0;
    Py_ssize_t pending_rows = 0;
    uint32_t pending_end = 0;
    uint64_t last_end = after;
    while (len - pos >= 4) {
        size_t plen = (size_t)p[pos] | (size_t)p[pos + 1] << 8 | (size_t)p[pos + 2] << 16;
        if (len - pos - 4 < plen) break;  /* the packet is not all here yet */
        const uint8_t *payload = p + pos + 4;
        if (plen == 0xFFFFFF || plen == 0 || payload[0] == 0xFF) { status = 2; break; }
        if (payload[0] == 0xFE && plen < 9) { pos += 4 + plen; status = 1; break; }
        if (payload[0] != 0x00) { status = 2; break; }
        const uint8_t *ev = payload + 1;
        size_t evlen = plen - 1;
        if (evlen < 19) {
            PyErr_Format(FramingError, "an event of %zu bytes", evlen);
            goto done;
        }
        uint32_t ts = (uint32_t)le(ev, 4);
        int type = ev[4];
        uint32_t server_id = (uint32_t)le(ev + 5, 4);
        uint32_t size = (uint32_t)le(ev + 9, 4);
        uint32_t end_pos = (uint32_t)le(ev + 13, 4);
        int flags = (int)le(ev + 17, 2);
        if (size != evlen) {
            PyErr_Format(FramingError, "event type %d ending at %u says %u bytes, has %zu",
                         type, end_pos, size, evlen);
            goto done;
        }
        size_t body_start = 0, body_end = evlen;  /* a FORMAT_DESCRIPTION goes whole */
        if (type != 15) {
            body_start = 19;
            if (checksum) {
                if (evlen < 23) {
                    PyErr_Format(FramingError, "event type %d ending at %u too short for "
                                 "its checksum", type, end_pos);
                    goto done;
                }
                body_end -= 4;
                if (crc32_of(ev, body_end) != (uint32_t)le(ev + body_end, 4)) {
                    PyErr_Format(FramingError, "CRC32 mismatch in event type %d ending at %u",
                                 type, end_pos);
                    goto done;
                }
            }
        }
        if (plain) {
            /* an event Python keeps (EventReader._keep): no artificial one, none sent again */
            int kept = !(flags & 0x20) && end_pos > last_end;
            if (folding && kept && type != 15 && end_pos <= stop) {
                Py_ssize_t rows = plain_rows(plain, type, ev + 19, body_end - 19, end_pos);
                if (rows == -2) goto done;
                if (rows >= 0) {
                    pending = 1;
                    pending_rows += rows;
                    pending_end = end_pos;
                    last_end = end_pos;
                    pos += 4 + plen;
                    continue;
                }
                /* Python registers what this event tells, so that the like of it folds
                 * from the next call on: stop after it */
                int registers = registers_after(plain, type, ev + 19, body_end - 19);
                if (registers < 0) goto done;
                if (registers) status = 3;
            }
            if (pending) {
                if (flush_plain(events, pending_end, pending_rows) < 0) goto done;
                pending = 0;
                pending_rows = 0;
            }
            if (type == 4) folding = 0;  /* a ROTATE: Python sets where the next file starts */
            else if (kept && type != 27 && type != 41) last_end = end_pos;  /* not a heartbeat */
        }
        PyObject *body = PyBytes_FromStringAndSize((const char *)ev + body_start,
                                                   (Py_ssize_t)(body_end - body_start));
        if (!body) goto done;
        /* (type, timestamp, flags, end position, body, server id), built item by item
         * rather than from a format string parsed again for every event */
        PyObject *item = PyTuple_New(6);
        if (!item) { Py_DECREF(body); goto done; }
        PyTuple_SET_ITEM(item, 4, body);  /* the tuple owns body from here */
        PyObject *fields[5] = {PyLong_FromLong(type), PyLong_FromUnsignedLong(ts),
                               PyLong_FromLong(flags), PyLong_FromUnsignedLong(end_pos),
                               PyLong_FromUnsignedLong(server_id)};
        static const int slots[5] = {0, 1, 2, 3, 5};
        int failed = 0;
        for (int i = 0; i < 5; i++) {
            if (!fields[i]) failed = 1;
            else PyTuple_SET_ITEM(item, slots[i], fields[i]);
        }
        if (failed || PyList_Append(events, item) < 0) { Py_DECREF(item); goto done; }
        Py_DECREF(item);
        pos += 4 + plen;
        if (type == 15 || status == 3) break;  /* a FORMAT_DESCRIPTION may change the
                                                   checksum of the events after it */
    }
    if (pending && flush_plain(events, pending_end, pending_rows) < 0) goto done;
    result = Py_BuildValue("(Oni)", events, (Py_ssize_t)(pos - (size_t)start), status);
done:
    Py_XDECREF(events);
    PyBuffer_Release(&view);
    return result;
}

/* ---- counting rows without decoding ------------------------------------------------
 *
 * count_rows(data, start, end, images, sizes, json_bitmap) -> rows in data[start:end],
 * the C twin of cdc_source.binlog.row_count.count_rows (the driver sizes stream batches
 * by row changes): images is 2 for an update, else 1; sizes holds 4 bytes per column,
 * little-endian: the size of a fixed-size value, or 0x80000000 | the bytes of a length
 * prefix; json_bitmap is -1, or for a partial update the bytes of the JSON bitmap after
 * value_options. Bytes that do not end exactly at end raise FramingError.
 */
/* The rows in p[pos:stop]: count_rows' walk, shared with the plain events' count.
 * Returns -1 with FramingError set where the bytes do not end exactly at stop. */
static Py_ssize_t count_images(const uint8_t *p, size_t pos, size_t stop, int images,
                               const uint8_t *sz, size_t columns, Py_ssize_t json_bitmap) {
    size_t bitmap = (columns + 7) / 8;
    Py_ssize_t count = 0;
    if (columns == 0 && pos < stop) {  /* an image of no column would never advance */
        PyErr_SetString(FramingError, "row data for a table of no columns");
        return -1;
    }
    while (pos < stop) {
        for (int image = 0; image < images; image++) {
            if (image == 1 && json_bitmap >= 0) {
                uint64_t options;
                if (lenenc(p, &pos, stop, &options) < 0) return -1;
                if (options & 1) {
                    if ((size_t)json_bitmap > stop - pos) goto overrun;
                    pos += (size_t)json_bitmap;
                }
            }
            if (bitmap > stop - pos) {
                PyErr_Format(FramingError, "a row image starts %zu bytes before the end",
                             stop - pos);
                return -1;
            }
            const uint8_t *nulls = p + pos;
            pos += bitmap;
            for (size_t i = 0; i < columns; i++) {
                if (nulls[i >> 3] & (1u << (i & 7))) continue;
                uint32_t s = (uint32_t)le(sz + 4 * i, 4);
                uint64_t step;  /* 64 bits: a 4-byte length plus its prefix cannot wrap */
                if (s & 0x80000000u) {
                    int prefix = (int)(s & 0xFF);
                    if (prefix < 1 || prefix > 4) {
                        PyErr_Format(FramingError, "count_rows: a %d-byte length prefix", prefix);
                        return -1;
                    }
                    if ((size_t)prefix > stop - pos) goto overrun;
                    step = (uint64_t)prefix + le(p + pos, prefix);
                } else {
                    step = s;
                }
                if (step > (uint64_t)(stop - pos)) goto overrun;
                pos += (size_t)step;
            }
        }
        count++;
    }
    return count;
overrun:
    PyErr_SetString(FramingError, "row images overrun their event");
    return -1;
}

static PyObject *count_rows(PyObject *self, PyObject *args) {
    Py_buffer data, sizes;
    Py_ssize_t start, end, json_bitmap;
    int images;
    if (!PyArg_ParseTuple(args, "y*nniy*n", &data, &start, &end, &images, &sizes, &json_bitmap))
        return NULL;
    PyObject *result = NULL;
    if (start < 0 || end < start || end > data.len || images < 1 || images > 2 ||
        sizes.len % 4 != 0) {
        PyErr_Format(FramingError, "count_rows: row data bounds %zd..%zd outside %zd bytes",
                     start, end, data.len);
        goto done;
    }
    Py_ssize_t count = count_images((const uint8_t *)data.buf, (size_t)start, (size_t)end,
                                    images, (const uint8_t *)sizes.buf,
                                    (size_t)sizes.len / 4, json_bitmap);
    if (count >= 0) result = PyLong_FromSsize_t(count);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&sizes);
    return result;
}

static PyMethodDef module_methods[] = {
    {"split_events", split_events, METH_VARARGS,
     "split_events(buffer, start, checksum, plain=None, after=0, stop=0) -> (events, consumed, status)"},
    {"count_rows", count_rows, METH_VARARGS,
     "count_rows(data, start, end, images, sizes, json_bitmap) -> rows"},
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_framing", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__framing(void) {
    crc_init();
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    FramingError = PyErr_NewException("cdc_source.binlog._framing.FramingError",
                                      PyExc_ValueError, NULL);
    if (!FramingError) goto fail;
    Py_INCREF(FramingError);
    if (PyModule_AddObject(m, "FramingError", FramingError) < 0) {
        Py_DECREF(FramingError);
        goto fail;
    }
    if (PyType_Ready(&PlainEventsType) < 0) goto fail;
    Py_INCREF(&PlainEventsType);
    if (PyModule_AddObject(m, "PlainEvents", (PyObject *)&PlainEventsType) < 0) {
        Py_DECREF(&PlainEventsType);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
