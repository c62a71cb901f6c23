/*
 * The binlog dump stream's two hot walks, twins of Python code in cdc_source/binlog:
 *
 * - split_events: the MySQL packets of the raw stream into events, headers parsed and
 *   CRC32s checked (events.EventReader.events_from_stream; its Python path frames the
 *   packets in Python and parses each event with events.split_header);
 * - count_rows: the rows of a rows event, found by walking the images' lengths without
 *   decoding a value (cdc_source.binlog.row_count.count_rows).
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
 *             Python handles.
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

static PyObject *split_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    int checksum;
    if (!PyArg_ParseTuple(args, "y*np", &view, &start, &checksum)) return NULL;
    PyObject *events = NULL, *result = NULL;
    if (start < 0 || start > view.len) {
        PyErr_SetString(FramingError, "split_events: start outside the buffer");
        goto done;
    }
    events = PyList_New(0);
    if (!events) goto done;
    const uint8_t *p = (const uint8_t *)view.buf;
    size_t len = (size_t)view.len, pos = (size_t)start;
    int status = 0;
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
        PyObject *body;
        if (type == 15) {
            body = PyBytes_FromStringAndSize((const char *)ev, (Py_ssize_t)evlen);
        } else {
            size_t body_end = evlen;
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
            body = PyBytes_FromStringAndSize((const char *)ev + 19, (Py_ssize_t)(body_end - 19));
        }
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
        if (type == 15) break;  /* it may change the checksum of the events after it */
    }
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
    const uint8_t *p = (const uint8_t *)data.buf;
    const uint8_t *sz = (const uint8_t *)sizes.buf;
    size_t columns = (size_t)sizes.len / 4, bitmap = (columns + 7) / 8;
    size_t pos = (size_t)start, stop = (size_t)end;
    Py_ssize_t count = 0;
    if (columns == 0 && pos < stop) {  /* an image of no column would never advance */
        PyErr_SetString(FramingError, "row data for a table of no columns");
        goto done;
    }
    while (pos < stop) {
        for (int image = 0; image < images; image++) {
            if (image == 1 && json_bitmap >= 0) {
                uint64_t options;
                if (lenenc(p, &pos, stop, &options) < 0) goto done;
                if (options & 1) pos += (size_t)json_bitmap;
                if (pos > stop) goto overrun;
            }
            if (bitmap > stop - pos) {
                PyErr_Format(FramingError, "a row image starts %zu bytes before the end",
                             stop - pos);
                goto done;
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
                        goto done;
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
    result = PyLong_FromSsize_t(count);
    goto done;
overrun:
    PyErr_SetString(FramingError, "row images overrun their event");
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&sizes);
    return result;
}

static PyMethodDef module_methods[] = {
    {"split_events", split_events, METH_VARARGS,
     "split_events(buffer, start, checksum) -> (events, consumed, status)"},
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
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
