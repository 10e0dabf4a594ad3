/* neuron_monitor._native: six hot per-report steps of the daemon and two of the Prometheus exporter in C, each the
 * fast twin of a careful Python function that stays the reference (see docs/performance.md, "The compiled helper").
 *
 *   vcpu_usage(prev: bytes, cur: bytes) -> dict | None
 *       The vcpu_usage group's body from two raw /proc/stat samples (groups/vcpu_usage/collector.py:
 *       usage_body_native, twin usage_body_careful).
 *   deltas(cur, prev, positions, often: int[, limits, dt, tops]) -> list[int] | int | None
 *       One device's counter deltas for a DeltaTracker (neuron/deltas.py: device_deltas_native, twin
 *       device_deltas_careful), by the project's counter rule (util/counters.py): a counter that went back was
 *       reset and counts its new value. With ``limits`` (array("d"): rate and burst of each position), ``dt``
 *       and ``tops`` (array("Q"): the largest value of each position; 2^64-1 marks a 64-bit field that may
 *       wrap), the index of the first reading the rule refuses instead (neuron/plausible.py).
 *   cores(deltas, n, dt, limit, keys, first, group, name0, name1, reuse=None) -> dict | None
 *       neuroncore_counters' ``neuroncores_in_use`` for one device, every core busy (groups/neuroncore_counters/
 *       collector.py: cores_native, twin cores_careful): a Trn2 device's logical cores (LNC=2, ``group``,
 *       ``name0``, ``name1`` the breakdown's names), or with all three None a device whose cores are not grouped
 *       (LNC=1: Trn1, Inf2). With ``reuse`` (the previous dict of the same application) of the same shape, its
 *       values are replaced in place and it is returned: no dict is made.
 *   summary(deltas, counters, positions, exec_names, err_names, pct_names, pct_values) -> dict | None
 *       execution_stats' body for one device whose every core completed executions, rare counts changed or not
 *       (groups/execution_stats/collector.py: summary_native, twin summary_careful).
 *   application(cur, prev, mem_prev, dt, kit, reuse) -> (in_use, summary, busy, memory same) | None
 *       One application's neuroncore_counters, execution_stats and memory_used step in one call
 *       (groups/application.py: collect_application_native, twin collect_application_careful): the three delta
 *       steps (deltas_core), ``cores`` (cores_from) and ``summary`` (summary_from) on the same reading.
 *   pid_usage(data, utime, stime, dt, ticks) -> (body, utime, stime) | None
 *       neuron_runtime_vcpu_usage's body from one raw /proc/PID/stat sample and the previous times
 *       (groups/neuron_runtime_vcpu_usage/collector.py: usage_native, twin usage_careful). round() as Python's: the
 *       correctly rounded decimal string of the value, read back (what float.__round__ does).
 *
 *   add_counts(totals, head, values, scale, most, limit, keyed) -> True | None
 *       The Prometheus exporter's ledger additions of one count (exporters/prometheus/counting.py:
 *       add_counts_native, twin add_counts_plain): every value a plain amount within its family's limit and every
 *       key short enough, or nothing is added.
 *
 *   thin_report(line, system, runtime) -> bytes | None
 *       A report line with the values the exporter's counting never reads replaced by null, the whole line checked
 *       on the way (exporters/prometheus/counting.py: thin_native; twin: the line decoded whole).
 *
 * Every input is hostile. Nothing is read outside the buffers given; every number is bounds-checked; anything
 * this code does not fully understand returns None, and the caller then runs the careful Python twin, which
 * decides (and words any error). Python objects are built here (dicts, ints, floats) and the report is still
 * encoded by orjson, so the report's bytes are orjson's either way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h> /* qsort: Python.h includes it only outside the limited API */
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------- */
/* The stable ABI: setup.py builds this file with Py_LIMITED_API = 3.10 (the oldest supported Python), so that one
 * abi3 wheel serves every CPython from 3.10 on. Under the limited API the access macros below are the functions of
 * the same meaning (the same borrowed/stolen references), and the buffer protocol, which joined the stable ABI in
 * 3.11, is a copy: a view of an array.array or a memoryview is its tobytes(), with its typecode or format and
 * itemsize. Built without Py_LIMITED_API (a plain compile), every name below is CPython's own.
 * tests/deploy/test_abi3.py compiles this file with -DPy_LIMITED_API=0x030A0000 -Werror. */
#ifdef Py_LIMITED_API
#define PyTuple_GET_SIZE(o) PyTuple_Size(o)
#define PyTuple_GET_ITEM(o, i) PyTuple_GetItem((o), (i))
#define PyList_GET_SIZE(o) PyList_Size(o)
#define PyList_GET_ITEM(o, i) PyList_GetItem((o), (i))
#define PyList_SET_ITEM(o, i, v) ((void)PyList_SetItem((o), (i), (v)))
#define PyFloat_AS_DOUBLE(o) PyFloat_AsDouble(o)
#define PyBytes_GET_SIZE(o) PyBytes_Size(o)
#define PyBytes_AS_STRING(o) PyBytes_AsString(o)
#define PyDict_GET_SIZE(o) PyDict_Size(o)
#ifndef Py_SETREF
#define Py_SETREF(dst, src)                                                                                        \
    do {                                                                                                           \
        PyObject **nm_ref_ = (PyObject **)&(dst);                                                                  \
        PyObject *nm_old_ = *nm_ref_;                                                                              \
        *nm_ref_ = (PyObject *)(src);                                                                              \
        Py_DECREF(nm_old_);                                                                                        \
    } while (0)
#define Py_XSETREF(dst, src)                                                                                       \
    do {                                                                                                           \
        PyObject **nm_ref_ = (PyObject **)&(dst);                                                                  \
        PyObject *nm_old_ = *nm_ref_;                                                                              \
        *nm_ref_ = (PyObject *)(src);                                                                              \
        Py_XDECREF(nm_old_);                                                                                       \
    } while (0)
#endif
#if Py_LIMITED_API + 0 < 0x030B0000
typedef struct {
    void *buf;
    PyObject *obj; /* the bytes copy */
    Py_ssize_t len, itemsize;
    int ndim;
    char *format;
    char fmt[2];
} nm_buffer;
#define Py_buffer nm_buffer
#define PyBUF_FORMAT 0x0004
#define PyBUF_C_CONTIGUOUS 0x0038
#define PyObject_GetBuffer nm_get_buffer
#define PyBuffer_Release nm_buffer_release

/* The attribute names nm_get_buffer looks up, interned once (PyInit__native): no str is made per lookup. */
static PyObject *nm_typecode, *nm_format, *nm_itemsize, *nm_tobytes;

/* A copy of an array.array's or a memoryview's items; -1 with an exception for anything else. */
static int nm_get_buffer(PyObject *obj, nm_buffer *view, int flags) {
    (void)flags;
    memset(view, 0, sizeof(*view));
    PyObject *code = PyObject_GetAttr(obj, nm_typecode); /* array.array */
    if (code == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        code = PyObject_GetAttr(obj, nm_format); /* memoryview */
        if (code == NULL) return -1;
    }
    Py_ssize_t size = 0;
    const char *text = PyUnicode_Check(code) ? PyUnicode_AsUTF8AndSize(code, &size) : NULL;
    if (text == NULL || size != 1) {
        Py_DECREF(code);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "not a one-letter typecode");
        return -1;
    }
    view->fmt[0] = text[0];
    Py_DECREF(code);
    PyObject *itemsize = PyObject_GetAttr(obj, nm_itemsize);
    if (itemsize == NULL) return -1;
    view->itemsize = PyLong_AsSsize_t(itemsize);
    Py_DECREF(itemsize);
    if (view->itemsize <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "bad itemsize");
        return -1;
    }
    PyObject *bytes = PyObject_CallMethodObjArgs(obj, nm_tobytes, NULL);
    if (bytes == NULL) return -1;
    if (!PyBytes_Check(bytes)) {
        Py_DECREF(bytes);
        PyErr_SetString(PyExc_TypeError, "tobytes() did not return bytes");
        return -1;
    }
    view->obj = bytes;
    view->buf = PyBytes_AsString(bytes);
    view->len = PyBytes_Size(bytes);
    view->ndim = 1;
    view->format = view->fmt;
    return 0;
}

static void nm_buffer_release(nm_buffer *view) { Py_CLEAR(view->obj); }
#endif
#endif

/* ---------------------------------------------------------------------------------------------------------- */
/* /proc/stat                                                                                                  */

/* Time columns above this (2^44 clock ticks: 5,500 years at 100 Hz) are left to the careful twin, so that
 * delta * 20000 + total stays far inside 64 bits. */
#define STAT_VALUE_MAX (UINT64_C(1) << 44)
/* ctxt and cpu ids above this are left to the careful twin too. */
#define STAT_COUNT_MAX (UINT64_C(1) << 62)
#define FIELDS 8
#define SHARES 7
#define SHARE_STEPS 10000 /* shares are q / 100 for q in 0..10000 */
#define ID_KEYS 4096      /* str(cpu id) kept for ids below this */

static PyObject *share_keys[SHARES];             /* "user", "nice", ... (interned) */
static PyObject *share_floats[SHARE_STEPS + 1];  /* q / 100, made on first use, shared (floats are immutable) */
static PyObject *id_keys[ID_KEYS];               /* str(id), made on first use */
static PyObject *key_average, *key_usage, *key_ctxt;

typedef struct {
    uint64_t total[FIELDS]; /* the aggregate "cpu" row's first 8 columns */
    uint64_t ctxt;
    Py_ssize_t cpus;
    uint64_t *ids;  /* cpus entries */
    uint64_t *rows; /* FIELDS per cpu */
} stat_sample;

static void stat_free(stat_sample *s) {
    PyMem_Free(s->ids);
    PyMem_Free(s->rows);
    s->ids = s->rows = NULL;
}

/* Digits at p[*at..end) up to a space, a newline or end: value in *out (at most max), *at moves past the digits.
 * 0 on success, -1 when there is no digit or the value exceeds max. */
static int read_number(const char *p, Py_ssize_t end, Py_ssize_t *at, uint64_t max, uint64_t *out) {
    Py_ssize_t i = *at;
    uint64_t v = 0;
    if (i >= end || p[i] < '0' || p[i] > '9') return -1;
    while (i < end && p[i] >= '0' && p[i] <= '9') {
        v = v * 10 + (uint64_t)(p[i] - '0');
        if (v > max) return -1;
        i++;
    }
    *at = i;
    *out = v;
    return 0;
}

/* Numbers of one row at p[at..line_end): " n n n ..." (each preceded by exactly one space, nothing after the
 * last). Stores at most `keep` of them in out; returns how many there were, -1 when the row is not that. */
static Py_ssize_t read_row(const char *p, Py_ssize_t at, Py_ssize_t line_end, uint64_t *out, Py_ssize_t keep) {
    Py_ssize_t count = 0;
    while (at < line_end) {
        uint64_t v;
        if (p[at] != ' ') return -1;
        at++;
        if (read_number(p, line_end, &at, STAT_VALUE_MAX, &v) < 0) return -1;
        if (count < keep) out[count] = v;
        count++;
    }
    return count;
}

/* The kernel's /proc/stat layout only: "cpu" + spaces + at least 8 columns, then "cpuN" rows of the same column
 * count (single spaces), then "\nintr ", and a "\nctxt N" line somewhere. 0 on success (free with stat_free),
 * -1 for anything else (nothing to free), -2 on a memory error (exception set). */
static int stat_parse(const char *p, Py_ssize_t len, stat_sample *s) {
    memset(s, 0, sizeof(*s));
    const char *intr = memmem(p, (size_t)len, "\nintr ", 6);
    if (intr == NULL) return -1;
    Py_ssize_t end = intr - p; /* the block is p[0..end); p[end] is the newline before "intr" */
    Py_ssize_t rows = 0;
    for (Py_ssize_t i = 0; i < end; i++) rows += p[i] == '\n';
    if (rows == 0) return -1; /* no vCPU row */
    /* the aggregate row */
    const char *nl = memchr(p, '\n', (size_t)end);
    Py_ssize_t line_end = nl ? nl - p : end;
    if (line_end < 4 || memcmp(p, "cpu ", 4) != 0) return -1;
    Py_ssize_t at = 3;
    while (at + 1 < line_end && p[at + 1] == ' ') at++; /* "cpu  1 2 ..." (the kernel prints two spaces) */
    Py_ssize_t columns = read_row(p, at, line_end, s->total, FIELDS);
    if (columns < FIELDS) return -1;
    /* one row per vCPU */
    s->ids = PyMem_Malloc((size_t)rows * sizeof(uint64_t));
    s->rows = PyMem_Malloc((size_t)rows * FIELDS * sizeof(uint64_t));
    if (s->ids == NULL || s->rows == NULL) {
        stat_free(s);
        PyErr_NoMemory();
        return -2;
    }
    Py_ssize_t row = 0;
    at = line_end;
    while (at < end) { /* p[at] == '\n' */
        Py_ssize_t start = at + 1;
        nl = memchr(p + start, '\n', (size_t)(end - start));
        line_end = nl ? nl - p : end;
        if (row >= rows || line_end - start < 4 || memcmp(p + start, "cpu", 3) != 0) goto refuse;
        Py_ssize_t i = start + 3;
        if (read_number(p, line_end, &i, STAT_COUNT_MAX, &s->ids[row]) < 0) goto refuse;
        if (read_row(p, i, line_end, s->rows + row * FIELDS, FIELDS) != columns) goto refuse;
        row++;
        at = line_end;
    }
    if (row != rows) goto refuse;
    s->cpus = rows;
    /* context switches: the first "\nctxt " line, digits to its newline or the end */
    const char *c = memmem(p, (size_t)len, "\nctxt ", 6);
    if (c == NULL) goto refuse;
    at = (c - p) + 6;
    if (read_number(p, len, &at, STAT_COUNT_MAX, &s->ctxt) < 0 || (at < len && p[at] != '\n')) goto refuse;
    return 0;
refuse:
    stat_free(s);
    return -1;
}

static PyObject *share_float(uint64_t q) {
    if (q > SHARE_STEPS) {
        PyErr_SetString(PyExc_SystemError, "share out of range");
        return NULL;
    }
    if (share_floats[q] == NULL) {
        share_floats[q] = PyFloat_FromDouble((double)q / 100.0);
        if (share_floats[q] == NULL) return NULL;
    }
    return Py_NewRef(share_floats[q]);
}

/* The share dicts made so far, by their 7 values (as the careful twin's SharesMemo in
 * groups/vcpu_usage/collector.py: at 0.1 s the same shares recur across vCPUs and reports, and bodies are never
 * mutated, so one dict serves them all). Open addressing; emptied when half full. */
#define MEMO_SLOTS 2048
typedef struct {
    uint16_t q[SHARES];
    PyObject *dict; /* NULL: free slot */
} memo_slot;
static memo_slot memo[MEMO_SLOTS];
static int memo_used;

static void memo_clear(void) {
    for (int i = 0; i < MEMO_SLOTS; i++) Py_CLEAR(memo[i].dict);
    memo_used = 0;
}

/* shares_of in groups/vcpu_usage/collector.py: each field's share of the total in percent, rounded half-up to 2
 * decimals: (d * 20000 + total) // (2 * total) / 100, a field that went back counting 0. d[i] are |values| <= 2^44. */
static PyObject *shares_dict(const int64_t d[FIELDS]) {
    uint64_t u[FIELDS], total = 0;
    uint16_t q[SHARES];
    for (int i = 0; i < FIELDS; i++) {
        u[i] = d[i] > 0 ? (uint64_t)d[i] : 0;
        total += u[i];
    }
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < SHARES; i++) {
        q[i] = (uint16_t)(total ? (u[i] * 20000 + total) / (2 * total) : 0); /* <= 10000 */
        h = (h ^ q[i]) * 1099511628211ULL;
    }
    size_t slot = (size_t)(h ^ (h >> 29)) & (MEMO_SLOTS - 1);
    while (memo[slot].dict != NULL) {
        if (memcmp(memo[slot].q, q, sizeof(q)) == 0) return Py_NewRef(memo[slot].dict);
        slot = (slot + 1) & (MEMO_SLOTS - 1);
    }
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (int i = 0; i < SHARES; i++) {
        PyObject *f = share_float(q[i]);
        if (f == NULL || PyDict_SetItem(out, share_keys[i], f) < 0) {
            Py_XDECREF(f);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(f);
    }
    if (memo_used >= MEMO_SLOTS / 2) { /* keep probes short: start over (slot is then free too) */
        memo_clear();
        slot = (size_t)(h ^ (h >> 29)) & (MEMO_SLOTS - 1);
    }
    memcpy(memo[slot].q, q, sizeof(q));
    memo[slot].dict = Py_NewRef(out);
    memo_used++;
    return out;
}

static PyObject *id_key(uint64_t id) {
    if (id >= ID_KEYS) return PyUnicode_FromFormat("%llu", (unsigned long long)id);
    if (id_keys[id] == NULL) {
        id_keys[id] = PyUnicode_FromFormat("%llu", (unsigned long long)id);
        if (id_keys[id] == NULL) return NULL;
    }
    return Py_NewRef(id_keys[id]);
}

static PyObject *usage_body(const stat_sample *prev, const stat_sample *cur) {
    int64_t d[FIELDS];
    PyObject *body = NULL, *usage = NULL, *item = NULL;
    for (int i = 0; i < FIELDS; i++) d[i] = (int64_t)cur->total[i] - (int64_t)prev->total[i];
    body = PyDict_New();
    if (body == NULL) goto fail;
    item = shares_dict(d);
    if (item == NULL || PyDict_SetItem(body, key_average, item) < 0) goto fail;
    Py_CLEAR(item);
    usage = PyDict_New();
    if (usage == NULL) goto fail;
    for (Py_ssize_t j = 0; j < cur->cpus; j++) {
        const uint64_t *a = prev->rows + j * FIELDS, *b = cur->rows + j * FIELDS;
        for (int i = 0; i < FIELDS; i++) d[i] = (int64_t)b[i] - (int64_t)a[i];
        PyObject *key = id_key(cur->ids[j]);
        if (key == NULL) goto fail;
        item = shares_dict(d);
        if (item == NULL || PyDict_SetItem(usage, key, item) < 0) {
            Py_DECREF(key);
            goto fail;
        }
        Py_DECREF(key);
        Py_CLEAR(item);
    }
    if (PyDict_SetItem(body, key_usage, usage) < 0) goto fail;
    Py_CLEAR(usage);
    item = PyLong_FromUnsignedLongLong(cur->ctxt > prev->ctxt ? cur->ctxt - prev->ctxt : 0);
    if (item == NULL || PyDict_SetItem(body, key_ctxt, item) < 0) goto fail;
    Py_DECREF(item);
    return body;
fail:
    Py_XDECREF(item);
    Py_XDECREF(usage);
    Py_XDECREF(body);
    return NULL;
}

/* The newest sample parsed as ``cur`` (a strong reference, so that identity with a later ``prev`` means the same
 * immutable bytes) and its parse: the next call's ``prev`` is then not parsed again. */
static PyObject *last_raw;
static stat_sample last_parsed;

static PyObject *native_vcpu_usage(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "vcpu_usage(prev: bytes, cur: bytes)");
        return NULL;
    }
    stat_sample own_prev, cur;
    const stat_sample *prev = &last_parsed;
    int cached = last_raw != NULL && args[0] == last_raw;
    int rc;
    if (!cached) {
        rc = stat_parse(PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), &own_prev);
        if (rc == -2) return NULL;
        if (rc < 0) Py_RETURN_NONE;
        prev = &own_prev;
    }
    rc = stat_parse(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &cur);
    if (rc < 0) {
        if (!cached) stat_free(&own_prev);
        if (rc == -2) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out;
    if (prev->cpus != cur.cpus || memcmp(prev->ids, cur.ids, (size_t)cur.cpus * sizeof(uint64_t))) {
        out = Py_NewRef(Py_None); /* a vCPU went offline or came back: the careful twin pairs them */
    } else {
        out = usage_body(prev, &cur);
    }
    if (!cached) stat_free(&own_prev);
    stat_free(&last_parsed); /* prev is not used from here on */
    Py_XSETREF(last_raw, Py_NewRef(args[1]));
    last_parsed = cur;
    return out;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* DeltaTracker (neuron/deltas.py): one device's deltas                                                        */

/* A buffer of native unsigned 64-bit integers (array("Q")), or -1 (buffer released, None returned by caller). */
static int get_u64(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return -1;
    }
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "Q") != 0 || view->ndim != 1) {
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#define DELTAS_OK (-1)
#define DELTAS_DECLINE (-2)

/* The delta step of native_deltas on raw arrays: c and p (n values each), count positions `at`, the first `often`
 * frequent. Writes the deltas to out[0..*take) and returns DELTAS_OK; with bound and top (rate, burst and top of
 * each position), the index of the first reading the counter rule refuses instead; DELTAS_DECLINE when a position
 * is out of range. out has room for count values. */
static Py_ssize_t deltas_core(const uint64_t *c, const uint64_t *p, Py_ssize_t n, const uint32_t *at,
                              Py_ssize_t count, Py_ssize_t often, const double *bound, const uint64_t *top, double dt,
                              uint64_t *out, Py_ssize_t *take) {
    for (Py_ssize_t k = 0; k < count; k++) {
        if ((Py_ssize_t)at[k] >= n) return DELTAS_DECLINE;
    }
    Py_ssize_t want = often; /* the rare counters' deltas only when one of them changed */
    for (Py_ssize_t k = often; k < count; k++) {
        if (c[at[k]] != p[at[k]]) {
            want = count;
            break;
        }
    }
    for (Py_ssize_t k = 0; k < want; k++) {
        uint64_t a = c[at[k]], b = p[at[k]], d = a >= b ? a - b : a;
        if (bound != NULL) {
            double most = bound[2 * k] * dt + bound[2 * k + 1], ceiling = (double)top[k];
            if (most > ceiling) most = ceiling;
            uint64_t limit = most >= 18446744073709551616.0 ? UINT64_MAX : (most > 0.0 ? (uint64_t)most : 0);
            int refused = a > top[k];
            if (!refused && a < b) {
                uint64_t across = a - b; /* modulo 2^64: the step across the top */
                if (top[k] == UINT64_MAX && across <= limit && across <= ((uint64_t)1 << 60))
                    d = across; /* a wrap, proven */
            }
            if (refused || d > limit) return k;
        }
        out[k] = d;
    }
    *take = want;
    return DELTAS_OK;
}

/* One device's deltas cur - prev at positions[0..often), and at every position when one of the rare ones
 * (positions[often..]) changed, by the counter rule of util/counters.py: a counter that went back was reset and
 * counts its new value. With limits, dt and tops, the index of the first reading the rule refuses instead: a value
 * above its top, a step above min(rate * dt + burst, top) (compared as integers: the bound's floor), or a drop
 * that is neither a proven wrap (a position whose top is 2^64-1: the step across the top within the bound and
 * within 2^60) nor a reset within the bound. None when the arrays are not array("Q") of one length or a position
 * is out of range (device_deltas_careful in neuron/deltas.py then computes). */
static PyObject *native_deltas(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "deltas(cur, prev, positions, often[, limits, dt, tops])");
        return NULL;
    }
    Py_ssize_t often = PyLong_AsSsize_t(args[3]);
    if (often == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    double dt = 0.0;
    if (nargs == 7) {
        if (!PyFloat_CheckExact(args[5])) Py_RETURN_NONE;
        dt = PyFloat_AS_DOUBLE(args[5]);
        if (!(dt >= 0.0) || !isfinite(dt)) Py_RETURN_NONE;
    }
    Py_buffer cur, prev, pos, lim = {0}, tops = {0};
    if (get_u64(args[0], &cur) < 0) Py_RETURN_NONE;
    if (get_u64(args[1], &prev) < 0) {
        PyBuffer_Release(&cur);
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(args[2], &pos, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&cur);
        PyBuffer_Release(&prev);
        Py_RETURN_NONE;
    }
    const double *bound = NULL; /* rate, burst of each position */
    const uint64_t *top = NULL; /* the largest value of each position */
    if (nargs == 7) {
        if (PyObject_GetBuffer(args[4], &lim, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear();
            PyBuffer_Release(&pos);
            PyBuffer_Release(&prev);
            PyBuffer_Release(&cur);
            Py_RETURN_NONE;
        }
        if (get_u64(args[6], &tops) < 0) {
            PyBuffer_Release(&lim);
            PyBuffer_Release(&pos);
            PyBuffer_Release(&prev);
            PyBuffer_Release(&cur);
            Py_RETURN_NONE;
        }
        bound = lim.buf;
        top = tops.buf;
    }
    PyObject *out = NULL;
    uint64_t *d = NULL;
    Py_ssize_t n = cur.len / 8, count = pos.len / 4, take = 0, rc;
    if (prev.len != cur.len || pos.itemsize != 4 || pos.format == NULL || strcmp(pos.format, "I") != 0 ||
        often < 0 || often > count ||
        (bound != NULL && (lim.itemsize != 8 || lim.format == NULL || strcmp(lim.format, "d") != 0 ||
                           lim.len != 16 * count || tops.len != 8 * count))) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    d = PyMem_Malloc((size_t)(count > 0 ? count : 1) * sizeof(uint64_t));
    if (d == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    rc = deltas_core(cur.buf, prev.buf, n, pos.buf, count, often, bound, top, dt, d, &take);
    if (rc == DELTAS_DECLINE) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (rc >= 0) {
        out = PyLong_FromSsize_t(rc);
        goto done;
    }
    out = PyList_New(take);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < take; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(d[k]);
        if (v == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, k, v);
    }
done:
    PyMem_Free(d);
    if (bound != NULL) {
        PyBuffer_Release(&tops);
        PyBuffer_Release(&lim);
    }
    PyBuffer_Release(&pos);
    PyBuffer_Release(&prev);
    PyBuffer_Release(&cur);
    return out;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* neuroncore_counters: one LNC=2 device, every core busy                                                      */

static PyObject *key_util, *key_flops;

#define EXACT_MAX (UINT64_C(1) << 53) /* values above this are left to the careful twins (inexact as doubles) */

/* d[key] = value (a new reference, stolen); -1 on failure. */
static int set_new(PyObject *d, PyObject *key, PyObject *value) {
    if (value == NULL) return -1;
    int rc = PyDict_SetItem(d, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *util_dict(double u) {
    PyObject *d = PyDict_New();
    if (d != NULL && set_new(d, key_util, PyFloat_FromDouble(u)) < 0) Py_CLEAR(d);
    return d;
}

/* out[key] = {"neuroncore_utilization": mean, "flops": flops, group: {name0: {..: u0}, name1: {..: u1}}} */
static int core_entry(PyObject *out, PyObject *key, double u0, double u1, long long flops, PyObject *group,
                      PyObject *name0, PyObject *name1) {
    PyObject *e = PyDict_New(), *b = PyDict_New();
    int rc = -1;
    if (e != NULL && b != NULL && set_new(e, key_util, PyFloat_FromDouble((u0 + u1) / 2)) == 0 &&
        set_new(e, key_flops, PyLong_FromLongLong(flops)) == 0 && set_new(b, name0, util_dict(u0)) == 0 &&
        set_new(b, name1, util_dict(u1)) == 0 && PyDict_SetItem(e, group, b) == 0 && PyDict_SetItem(out, key, e) == 0)
        rc = 0;
    Py_XDECREF(e);
    Py_XDECREF(b);
    return rc;
}

/* k is the key want (the same object, or an equal str). */
static int same_key(PyObject *k, PyObject *want) {
    return k == want || (PyUnicode_CheckExact(k) && PyUnicode_CheckExact(want) && PyUnicode_Compare(k, want) == 0);
}

/* The next item of dict d at *pos is (want, a dict of `size` entries): that dict, or NULL (no exception). */
static PyObject *next_dict(PyObject *d, Py_ssize_t *pos, PyObject *want, Py_ssize_t size) {
    PyObject *k, *v;
    if (!PyDict_Next(d, pos, &k, &v) || !same_key(k, want) || !PyDict_CheckExact(v) || PyDict_GET_SIZE(v) != size)
        return NULL;
    return v;
}

/* 1 when `d` has exactly the shape core_entry gives `count` cores keyed keys[first..]: the same keys in the same
 * order, each {util, flops, group: {name0: {util}, name1: {util}}}; 0 otherwise. */
static int cores_shape(PyObject *d, PyObject *keys, Py_ssize_t first, Py_ssize_t count, PyObject *group,
                       PyObject *name0, PyObject *name1) {
    if (!PyDict_CheckExact(d) || PyDict_GET_SIZE(d) != count) return 0;
    Py_ssize_t pos = 0;
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *e = next_dict(d, &pos, PyTuple_GET_ITEM(keys, first + j), 3), *k, *v, *b;
        Py_ssize_t at = 0, in = 0;
        if (e == NULL || !PyDict_Next(e, &at, &k, &v) || !same_key(k, key_util) || !PyDict_Next(e, &at, &k, &v) ||
            !same_key(k, key_flops) || (b = next_dict(e, &at, group, 2)) == NULL || next_dict(b, &in, name0, 1) == NULL ||
            next_dict(b, &in, name1, 1) == NULL)
            return 0;
    }
    return 1;
}

/* 1 when `d` has exactly the shape cores1 gives `count` cores keyed keys[first..]: {util, flops} each. */
static int cores1_shape(PyObject *d, PyObject *keys, Py_ssize_t first, Py_ssize_t count) {
    if (!PyDict_CheckExact(d) || PyDict_GET_SIZE(d) != count) return 0;
    Py_ssize_t pos = 0;
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *e = next_dict(d, &pos, PyTuple_GET_ITEM(keys, first + j), 2), *k, *v;
        Py_ssize_t at = 0;
        if (e == NULL || !PyDict_Next(e, &at, &k, &v) || !same_key(k, key_util) || !PyDict_Next(e, &at, &k, &v) ||
            !same_key(k, key_flops))
            return 0;
    }
    return 1;
}

/* LNC=1 (cores not grouped): {key: {"neuroncore_utilization": u, "flops": f}} for the n cores, each u and f already
 * computed; `reuse` updated in place when it has exactly that shape. */
static PyObject *cores1(const double *u, const long long *flops, Py_ssize_t n, PyObject *keys, Py_ssize_t first,
                        PyObject *reuse) {
    if (reuse != Py_None && cores1_shape(reuse, keys, first, n)) {
        Py_ssize_t pos = 0;
        PyObject *k, *e;
        for (Py_ssize_t j = 0; PyDict_Next(reuse, &pos, &k, &e); j++) {
            /* keys that are there already keep their places: the shape and order stay as checked */
            if (set_new(e, key_util, PyFloat_FromDouble(u[j])) < 0 ||
                set_new(e, key_flops, PyLong_FromLongLong(flops[j])) < 0)
                return NULL;
        }
        return Py_NewRef(reuse);
    }
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *e = PyDict_New();
        int rc = e != NULL && set_new(e, key_util, PyFloat_FromDouble(u[j])) == 0 &&
                         set_new(e, key_flops, PyLong_FromLongLong(flops[j])) == 0 &&
                         PyDict_SetItem(out, PyTuple_GET_ITEM(keys, first + j), e) == 0
                     ? 0
                     : -1;
        Py_XDECREF(e);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* {key: {"neuroncore_utilization": u, "flops": f, group: {name0: {"neuroncore_utilization": u0}, name1: ...}}}
 * Arguments are checked in full before anything is built or changed; None outside the usual case (one LNC=2
 * device, cores in pairs, each busy, a period with a length, deltas up to 2^53, no MAC count above `limit`).
 * With `group`, `name0` and `name1` all None: one LNC=1 device, every core busy (`cores1`).
 * With `reuse` (the dict an earlier call returned for the same application), its values are replaced in
 * place when it has exactly the shape this call would build (the same keys in the same order), and reuse itself
 * is returned: no dict is made or freed. */
static PyObject *cores_from(const uint64_t *v, Py_ssize_t n, double dt, double limit, PyObject *keys,
                            Py_ssize_t first, PyObject *group, PyObject *name0, PyObject *name1, PyObject *reuse);

static PyObject *native_cores(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "cores(deltas, n, dt, limit, keys, first, group, name0, name1, reuse=None)");
        return NULL;
    }
    PyObject *deltas = args[0], *keys = args[4], *group = args[6], *name0 = args[7], *name1 = args[8];
    PyObject *reuse = nargs == 10 ? args[9] : Py_None;
    int single = group == Py_None && name0 == Py_None && name1 == Py_None; /* LNC=1: no logical cores */
    if (!PyList_CheckExact(deltas) || !PyLong_CheckExact(args[1]) || !PyFloat_CheckExact(args[2]) ||
        !PyFloat_CheckExact(args[3]) || !PyTuple_CheckExact(keys) || !PyLong_CheckExact(args[5]) ||
        (!single && (!PyUnicode_CheckExact(group) || !PyUnicode_CheckExact(name0) || !PyUnicode_CheckExact(name1))))
        Py_RETURN_NONE;
    Py_ssize_t n = PyLong_AsSsize_t(args[1]), first = PyLong_AsSsize_t(args[5]);
    if ((n == -1 || first == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    double dt = PyFloat_AS_DOUBLE(args[2]), limit = PyFloat_AS_DOUBLE(args[3]);
    Py_ssize_t entries = single ? n : n / 2;
    if (n <= 0 || (!single && n % 2) || n > 64 || PyList_GET_SIZE(deltas) != 2 * n || first < 0 ||
        first > PyTuple_GET_SIZE(keys) - entries || !(dt > 0.0) || !(limit >= 0.0))
        Py_RETURN_NONE;
    uint64_t v[128];
    for (Py_ssize_t k = 0; k < 2 * n; k++) {
        PyObject *item = PyList_GET_ITEM(deltas, k);
        if (!PyLong_CheckExact(item)) Py_RETURN_NONE;
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || x < 0) {
            if (x == -1 && PyErr_Occurred()) PyErr_Clear();
            Py_RETURN_NONE;
        }
        v[k] = (uint64_t)x;
    }
    return cores_from(v, n, dt, limit, keys, first, group, name0, name1, reuse);
}

/* native_cores on raw deltas v (2n: TIME_IN_USE of each core, then MAC_COUNT), its other arguments checked by the
 * caller (n in 1..64, even unless single; keys a tuple with room for the entries from first; dt > 0, limit >= 0):
 * the dict, or None outside the usual case. */
static PyObject *cores_from(const uint64_t *v, Py_ssize_t n, double dt, double limit, PyObject *keys,
                            Py_ssize_t first, PyObject *group, PyObject *name0, PyObject *name1, PyObject *reuse) {
    int single = group == Py_None && name0 == Py_None && name1 == Py_None; /* LNC=1: no logical cores */
    Py_ssize_t entries = single ? n : n / 2;
    for (Py_ssize_t k = 0; k < 2 * n; k++) {
        if (v[k] > EXACT_MAX) Py_RETURN_NONE;
        if (k < n && v[k] == 0) Py_RETURN_NONE; /* a core not busy: cores_careful decides which cores are in use */
        if (k >= n && (double)v[k] > limit) Py_RETURN_NONE; /* a damaged MAC counter: cores_careful */
    }
    for (Py_ssize_t j = 0; j < entries; j++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, first + j))) Py_RETURN_NONE;
    }
    double scale = dt * 1e4, u[64];
    long long flops[64];
    if (single) { /* cores_careful's LNC=1 entries: each core's own utilization and int(2 * macs / dt) */
        for (Py_ssize_t k = 0; k < n; k++) {
            double u0 = (double)v[k] / scale, f0 = 2.0 * (double)v[n + k] / dt;
            u[k] = u0 >= 100.0 ? 100.0 : u0;
            if (!(f0 < 9.0e18)) Py_RETURN_NONE; /* cannot happen under limit; kept safe */
            flops[k] = (long long)f0;
        }
        return cores1(u, flops, n, keys, first, reuse);
    }
    for (Py_ssize_t k = 0; k < n; k += 2) {
        double u0 = (double)v[k] / scale, u1 = (double)v[k + 1] / scale;
        u[k] = u0 >= 100.0 ? 100.0 : u0;
        u[k + 1] = u1 >= 100.0 ? 100.0 : u1;
        double f0 = 2.0 * (double)v[n + k] / dt, f1 = 2.0 * (double)v[n + k + 1] / dt;
        if (!(f0 < 9.0e18) || !(f1 < 9.0e18)) Py_RETURN_NONE; /* cannot happen under limit; kept safe */
        flops[k / 2] = (long long)f0 + (long long)f1;
    }
    if (reuse != Py_None && cores_shape(reuse, keys, first, n / 2, group, name0, name1)) {
        Py_ssize_t pos = 0;
        PyObject *k, *e;
        for (Py_ssize_t j = 0; PyDict_Next(reuse, &pos, &k, &e); j++) {
            PyObject *b = PyDict_GetItemWithError(e, group);
            PyObject *e0 = b != NULL ? PyDict_GetItemWithError(b, name0) : NULL;
            PyObject *e1 = b != NULL ? PyDict_GetItemWithError(b, name1) : NULL;
            /* a key that is there already keeps its place: the shape and order stay as checked */
            if (e0 == NULL || e1 == NULL || set_new(e, key_util, PyFloat_FromDouble((u[2 * j] + u[2 * j + 1]) / 2)) < 0 ||
                set_new(e, key_flops, PyLong_FromLongLong(flops[j])) < 0 ||
                set_new(e0, key_util, PyFloat_FromDouble(u[2 * j])) < 0 ||
                set_new(e1, key_util, PyFloat_FromDouble(u[2 * j + 1])) < 0) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "cores: reused dict changed shape");
                return NULL;
            }
        }
        return Py_NewRef(reuse);
    }
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k += 2) {
        if (core_entry(out, PyTuple_GET_ITEM(keys, first + k / 2), u[k], u[k + 1], flops[k / 2], group, name0,
                       name1) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* execution_stats: one device, every core completed executions (rare counts changed or not)                   */

static PyObject *key_errors, *key_execs, *key_latency, *key_total_lat, *key_device_lat;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* percentiles() of groups/execution_stats/collector.py: nearest-rank picks of the sorted samples (in seconds), or
 * None without any. */
static PyObject *percentile_dict(double *samples, Py_ssize_t m, PyObject *names, const double *pct) {
    if (m == 0) return Py_NewRef(Py_None);
    qsort(samples, (size_t)m, sizeof(double), cmp_double);
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        double rank = ceil(pct[i] / 100.0 * (double)m) - 1; /* max(0, math.ceil(p / 100.0 * n) - 1) */
        Py_ssize_t at = rank > 0 ? (Py_ssize_t)rank : 0;
        if (at >= m) at = m - 1; /* p <= 100 never gets here; kept safe */
        if (set_new(d, PyTuple_GET_ITEM(names, i), PyFloat_FromDouble(samples[at])) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

/* execution_stats' body for one device (summary_native in groups/execution_stats/collector.py): each count of the
 * execution and error summaries summed over the device's cores (the rare ones 0 when none of them changed), and
 * the percentiles over the cores of the device and total latencies the counters hold at `positions` (microseconds,
 * given in seconds; a core's 0 is no sample). None unless every core completed executions, every value is at most
 * 2^53 and the arguments have the expected types and sizes: summary_careful then decides. */
/* native_summary on raw values: d (len: n ``completed`` counts, then when a rare count changed every other count's
 * row of n), the reading's counters c (clen values) and the latency positions at (2n: device, then total), the
 * names and percentiles checked by the caller (n_exec in 1..32, n_err <= 32, at most 16 percentiles). */
static PyObject *summary_from(const uint64_t *d, Py_ssize_t len, Py_ssize_t n, const uint64_t *c, Py_ssize_t clen,
                              const uint32_t *at, PyObject *exec_names, PyObject *err_names, PyObject *pct_names,
                              const double *pct) {
    Py_ssize_t n_exec = PyTuple_GET_SIZE(exec_names), n_err = PyTuple_GET_SIZE(err_names);
    PyObject *out = NULL, *item = NULL;
    double device_lat[64], total_lat[64];
    uint64_t totals[64] = {0};
    Py_ssize_t md = 0, mt = 0;
    if (n < 1 || n > 64 || (len != n && len != n * (n_exec + n_err))) Py_RETURN_NONE;
    Py_ssize_t rows = len / n;
    for (Py_ssize_t k = 0; k < len; k++) {
        uint64_t x = d[k];
        /* a ``completed`` of 0: a core did not execute (summary_careful) */
        if (x < (k < n ? 1u : 0u) || x > EXACT_MAX) Py_RETURN_NONE;
        totals[k / n] += x; /* at most 64 values up to 2^53 each: no overflow */
    }
    for (Py_ssize_t k = 0; k < 2 * n; k++) { /* the device latency of each core, then the total latency */
        if ((Py_ssize_t)at[k] >= clen || c[at[k]] > EXACT_MAX) Py_RETURN_NONE;
        uint64_t v = c[at[k]];
        if (v == 0) continue; /* never executed: no sample */
        if (k < n) device_lat[md++] = (double)v / 1e6;
        else total_lat[mt++] = (double)v / 1e6;
    }
    out = PyDict_New();
    if (out == NULL) return NULL;
    item = PyDict_New();
    if (item == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n_err; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(rows > 1 ? totals[n_exec + i] : 0);
        if (set_new(item, PyTuple_GET_ITEM(err_names, i), v) < 0) goto fail;
    }
    if (PyDict_SetItem(out, key_errors, item) < 0) goto fail;
    Py_SETREF(item, PyDict_New());
    if (item == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n_exec; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(i == 0 || rows > 1 ? totals[i] : 0);
        if (set_new(item, PyTuple_GET_ITEM(exec_names, i), v) < 0) goto fail;
    }
    if (PyDict_SetItem(out, key_execs, item) < 0) goto fail;
    Py_SETREF(item, PyDict_New());
    if (item == NULL || set_new(item, key_total_lat, percentile_dict(total_lat, mt, pct_names, pct)) < 0 ||
        set_new(item, key_device_lat, percentile_dict(device_lat, md, pct_names, pct)) < 0 ||
        PyDict_SetItem(out, key_latency, item) < 0)
        goto fail;
    Py_DECREF(item);
    return out;
fail:
    Py_XDECREF(item);
    Py_XDECREF(out);
    return NULL;
}

/* The names and percentiles of summary(): 0 with pct filled, -1 when they are not as expected (None then). */
static int summary_names(PyObject *exec_names, PyObject *err_names, PyObject *pct_names, PyObject *pct_values,
                         double pct[16]) {
    if (!PyTuple_CheckExact(exec_names) || !PyTuple_CheckExact(err_names) || !PyTuple_CheckExact(pct_names) ||
        !PyTuple_CheckExact(pct_values) || PyTuple_GET_SIZE(exec_names) < 1 ||
        PyTuple_GET_SIZE(pct_names) != PyTuple_GET_SIZE(pct_values) || PyTuple_GET_SIZE(pct_names) > 16 ||
        PyTuple_GET_SIZE(err_names) > 32 || PyTuple_GET_SIZE(exec_names) > 32)
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pct_values); i++) {
        PyObject *p = PyTuple_GET_ITEM(pct_values, i);
        if (!PyFloat_CheckExact(p) || !(PyFloat_AS_DOUBLE(p) >= 0.0 && PyFloat_AS_DOUBLE(p) <= 100.0)) return -1;
        pct[i] = PyFloat_AS_DOUBLE(p);
    }
    return 0;
}

/* execution_stats' body for one device (summary_native in groups/execution_stats/collector.py): each count of the
 * execution and error summaries summed over the device's cores (the rare ones 0 when none of them changed), and
 * the percentiles over the cores of the device and total latencies the counters hold at `positions` (microseconds,
 * given in seconds; a core's 0 is no sample). None unless every core completed executions, every value is at most
 * 2^53 and the arguments have the expected types and sizes: summary_careful then decides. */
static PyObject *native_summary(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "summary(deltas, counters, positions, exec_names, err_names, pct_names, "
                                         "pct_values)");
        return NULL;
    }
    PyObject *deltas = args[0];
    double pct[16];
    if (!PyList_CheckExact(deltas) || summary_names(args[3], args[4], args[5], args[6], pct) < 0) Py_RETURN_NONE;
    /* deltas: the ``completed`` of each of the n cores, then (when a rare count changed) every other count's, one
       row of n per count: rows is 1 or the number of counts. positions: 2n (device, then total latencies). */
    Py_ssize_t len = PyList_GET_SIZE(deltas);
    if (len > 64 * 64) Py_RETURN_NONE;
    uint64_t d[64 * 64];
    for (Py_ssize_t k = 0; k < len; k++) {
        PyObject *x_obj = PyList_GET_ITEM(deltas, k);
        if (!PyLong_CheckExact(x_obj)) Py_RETURN_NONE;
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(x_obj, &overflow);
        if (overflow || x < 0) {
            if (x == -1 && PyErr_Occurred()) PyErr_Clear();
            Py_RETURN_NONE;
        }
        d[k] = (uint64_t)x;
    }
    Py_buffer cur, pos;
    if (get_u64(args[1], &cur) < 0) Py_RETURN_NONE;
    if (PyObject_GetBuffer(args[2], &pos, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&cur);
        Py_RETURN_NONE;
    }
    PyObject *out;
    Py_ssize_t n = pos.len / 8;
    if (pos.itemsize != 4 || pos.format == NULL || strcmp(pos.format, "I") != 0 || pos.len != 8 * n)
        out = Py_NewRef(Py_None);
    else
        out = summary_from(d, len, n, cur.buf, cur.len / 8, pos.buf, args[3], args[4], args[5], pct);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&cur);
    return out;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* One application's data-block groups in one call (groups/application.py: collect_application_native)         */

/* A bytes object of `count` items of `size` bytes, aligned for them: its data, or NULL. count < 0: any count. */
static const void *kit_array(PyObject *b, Py_ssize_t size, Py_ssize_t *count) {
    if (!PyBytes_CheckExact(b)) return NULL;
    Py_ssize_t len = PyBytes_GET_SIZE(b);
    const char *p = PyBytes_AS_STRING(b);
    if (p == NULL || len % size || ((uintptr_t)p % (uintptr_t)size) || (*count >= 0 && len != *count * size))
        return NULL;
    *count = len / size;
    return p;
}

/* A small int of a kit, or -1. */
static Py_ssize_t kit_size(PyObject *o, Py_ssize_t most) {
    if (!PyLong_CheckExact(o)) return -1;
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    return v >= 0 && v <= most ? v : -1;
}

#define KIT_ITEMS 23
#define APP_MAX 4096 /* positions of one group's pick at most (64 cores x 64 counters) */

/* application(cur, prev, mem_prev, dt, kit, reuse) -> (neuroncores_in_use, execution summary, busy flags, memory
 * same) | None
 *
 * The per-application part of neuroncore_counters, execution_stats and memory_used for one device whose three
 * delta trackers all look back at the same reading ``prev`` (the usual case: the three groups collected together
 * at the previous report): the three delta steps by the counter rule (as deltas() with limits: any reading the
 * rule refuses declines), neuroncores_in_use as cores() (``reuse`` updated in place when it has the same shape),
 * the execution summary as summary(), memory_used's busy flag per core, and whether the device memory counters
 * equal those of ``mem_prev`` (the reading memory_used's cached body was made from; None: no cached body).
 * ``kit`` holds what does not change between calls (built by groups/application.py: positions, rates, bursts and
 * tops as bytes of uint32, double and uint64, the core keys and names). None whenever any of the three would
 * decline, so that nothing is changed and each group's own path runs; only ``reuse`` is changed, and only when
 * everything else has succeeded. */
static PyObject *native_application(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "application(cur, prev, mem_prev, dt, kit, reuse)");
        return NULL;
    }
    PyObject *kit = args[4], *reuse = args[5];
    if (!PyFloat_CheckExact(args[3]) || !PyTuple_CheckExact(kit) || PyTuple_GET_SIZE(kit) != KIT_ITEMS ||
        (reuse != Py_None && !PyDict_CheckExact(reuse)))
        Py_RETURN_NONE;
    double dt = PyFloat_AS_DOUBLE(args[3]);
    if (!(dt > 0.0) || !isfinite(dt)) Py_RETURN_NONE; /* no period: the groups' own paths */
    PyObject *it[KIT_ITEMS];
    for (Py_ssize_t i = 0; i < KIT_ITEMS; i++) it[i] = PyTuple_GET_ITEM(kit, i);
    Py_ssize_t n = kit_size(it[12], 64), es_often = kit_size(it[4], APP_MAX), first = kit_size(it[15], PY_SSIZE_T_MAX);
    if (n < 1 || es_often < 0 || first < 0 || !PyFloat_CheckExact(it[13]) || !PyTuple_CheckExact(it[14])) Py_RETURN_NONE;
    PyObject *keys = it[14], *group = it[16], *name0 = it[17], *name1 = it[18];
    int single = group == Py_None && name0 == Py_None && name1 == Py_None;
    if ((!single && (!PyUnicode_CheckExact(group) || !PyUnicode_CheckExact(name0) || !PyUnicode_CheckExact(name1) ||
                     n % 2)) ||
        first > PyTuple_GET_SIZE(keys) - (single ? n : n / 2))
        Py_RETURN_NONE;
    double pct[16];
    if (summary_names(it[19], it[20], it[21], it[22], pct) < 0) Py_RETURN_NONE;
    Py_ssize_t nc_count = 2 * n, es_count = -1, mu_count = n, lat_count = 2 * n, mem_count = -1;
    Py_ssize_t nc_lim_count = 2 * nc_count, mu_lim_count = 2 * mu_count;
    const uint32_t *nc_at = kit_array(it[0], 4, &nc_count), *es_at = kit_array(it[3], 4, &es_count);
    const uint32_t *mu_at = kit_array(it[7], 4, &mu_count), *lat_at = kit_array(it[10], 4, &lat_count);
    const uint32_t *mem_at = kit_array(it[11], 4, &mem_count);
    const double *nc_lim = kit_array(it[1], 8, &nc_lim_count), *mu_lim = kit_array(it[8], 8, &mu_lim_count);
    const uint64_t *nc_top = kit_array(it[2], 8, &nc_count), *mu_top = kit_array(it[9], 8, &mu_count);
    if (nc_at == NULL || es_at == NULL || mu_at == NULL || lat_at == NULL || mem_at == NULL || nc_lim == NULL ||
        mu_lim == NULL || nc_top == NULL || mu_top == NULL || es_count > APP_MAX || es_often > es_count)
        Py_RETURN_NONE;
    Py_ssize_t es_lim_count = 2 * es_count;
    const double *es_lim = kit_array(it[5], 8, &es_lim_count);
    const uint64_t *es_top = kit_array(it[6], 8, &es_count);
    if (es_lim == NULL || es_top == NULL) Py_RETURN_NONE;

    Py_buffer cur, prev, mem = {0};
    PyObject *mem_obj = args[2];
    int own_mem = mem_obj != Py_None && mem_obj != args[0] && mem_obj != args[1];
    if (get_u64(args[0], &cur) < 0) Py_RETURN_NONE;
    if (get_u64(args[1], &prev) < 0) {
        PyBuffer_Release(&cur);
        Py_RETURN_NONE;
    }
    if (own_mem && get_u64(mem_obj, &mem) < 0) {
        PyBuffer_Release(&prev);
        PyBuffer_Release(&cur);
        Py_RETURN_NONE;
    }
    PyObject *out = NULL, *summary = NULL, *busy = NULL, *cores = NULL;
    const uint64_t *c = cur.buf, *p = prev.buf;
    Py_ssize_t len = cur.len / 8, take, es_take;
    uint64_t nc_d[128], mu_d[64], es_d[APP_MAX];
    int same = 0;
    if (prev.len != cur.len || len % n) goto decline;
    /* the three delta steps: anything the rule refuses (or a position out of range) is left to the groups */
    if (deltas_core(c, p, len, nc_at, nc_count, nc_count, nc_lim, nc_top, dt, nc_d, &take) != DELTAS_OK) goto decline;
    if (deltas_core(c, p, len, mu_at, mu_count, mu_count, mu_lim, mu_top, dt, mu_d, &take) != DELTAS_OK) goto decline;
    if (deltas_core(c, p, len, es_at, es_count, es_often, es_lim, es_top, dt, es_d, &es_take) != DELTAS_OK)
        goto decline;
    /* memory_used: are the device memory counters those of the cached body's reading? */
    if (mem_obj != Py_None) {
        const uint64_t *m = mem_obj == args[0] ? c : mem_obj == args[1] ? p : mem.buf;
        Py_ssize_t mlen = mem_obj == args[0] || mem_obj == args[1] ? len : mem.len / 8;
        same = mlen == len;
        for (Py_ssize_t k = 0; same && k < mem_count; k++) {
            if ((Py_ssize_t)mem_at[k] >= len) goto decline;
            same = c[mem_at[k]] == m[mem_at[k]];
        }
    }
    summary = summary_from(es_d, es_take, n, c, len, lat_at, it[19], it[20], it[21], pct);
    if (summary == NULL) goto done;
    if (summary == Py_None) goto decline;
    busy = PyTuple_New(n);
    if (busy == NULL) goto done;
    for (Py_ssize_t k = 0; k < n; k++) PyTuple_SetItem(busy, k, PyBool_FromLong(mu_d[k] != 0));
    /* last: the only step that may change something (reuse, in place) */
    cores = cores_from(nc_d, n, dt, PyFloat_AS_DOUBLE(it[13]) * dt, keys, first, group, name0, name1, reuse);
    if (cores == NULL) goto done;
    if (cores == Py_None) goto decline;
    out = PyTuple_New(4);
    if (out == NULL) goto done;
    PyTuple_SetItem(out, 0, cores);
    PyTuple_SetItem(out, 1, summary);
    PyTuple_SetItem(out, 2, busy);
    PyTuple_SetItem(out, 3, PyBool_FromLong(same));
    cores = summary = busy = NULL;
    goto done;
decline:
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(cores);
    Py_XDECREF(summary);
    Py_XDECREF(busy);
    if (own_mem) PyBuffer_Release(&mem);
    PyBuffer_Release(&prev);
    PyBuffer_Release(&cur);
    return out;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* neuron_runtime_vcpu_usage: one application's CPU share                                                      */

static PyObject *key_period, *key_vcpu, *key_user, *key_system;

/* round(x, ndigits) for a finite x, as float.__round__: the decimal string correctly rounded to ndigits after the
 * point (_Py_dg_dtoa mode 3, as round), converted back correctly rounded. NULL with an exception on failure. */
static PyObject *round_float(double x, int ndigits) {
    if (x == 0.0) return PyFloat_FromDouble(x);
    char *text = PyOS_double_to_string(x, 'f', ndigits, 0, NULL);
    if (text == NULL) return NULL;
    double rounded = PyOS_string_to_double(text, NULL, NULL);
    PyMem_Free(text);
    if (rounded == -1.0 && PyErr_Occurred()) return NULL;
    return PyFloat_FromDouble(rounded);
}

/* Fields 14, 15 and 22 (utime, stime, starttime) of /proc/PID/stat as parse_pid_stat (host/procfs.py) reads them:
 * after the last ')' and one space, single-space separated fields without other whitespace, the three wanted ones
 * plain digits (at most 2^53). 0 on success, -1 for anything else. */
static int pid_stat_times(const char *p, Py_ssize_t len, uint64_t *utime, uint64_t *stime) {
    const char *close = memrchr(p, ')', (size_t)len);
    if (close == NULL) return -1;
    Py_ssize_t at = (close - p) + 1;
    if (at >= len || p[at] != ' ') return -1;
    at++;
    for (int field = 3; field <= 22; field++) { /* field 3 (state) starts at `at` */
        Py_ssize_t start = at;
        while (at < len && p[at] != ' ' && p[at] != '\n') {
            unsigned char ch = (unsigned char)p[at];
            if (ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f') return -1; /* other whitespace: the twin */
            at++;
        }
        if (at == start) return -1; /* an empty field (two spaces) or the end: the twin */
        if (field == 14 || field == 15) {
            Py_ssize_t i = start;
            uint64_t v;
            if (read_number(p, at, &i, EXACT_MAX, &v) < 0 || i != at) return -1;
            *(field == 14 ? utime : stime) = v;
        }
        if (field == 22) {
            Py_ssize_t i = start;
            uint64_t v;
            if (read_number(p, at, &i, EXACT_MAX, &v) < 0 || i != at) return -1; /* starttime: int() must take it */
            return 0;
        }
        if (at >= len || p[at] != ' ') return -1; /* a newline before field 22: truncated */
        at++;
    }
    return -1;
}

/* (neuron_runtime_vcpu_usage body, utime, stime) from one /proc/PID/stat sample and the previous utime and stime
 * (usage_native in groups/neuron_runtime_vcpu_usage/collector.py); None for anything usage_careful must decide. */
static PyObject *native_pid_usage(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "pid_usage(data: bytes, utime, stime, dt, ticks)");
        return NULL;
    }
    if (!PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2]) || !PyFloat_CheckExact(args[3]) ||
        !PyLong_CheckExact(args[4]))
        Py_RETURN_NONE;
    int overflow;
    long long base_u = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow || base_u < 0 || (uint64_t)base_u > EXACT_MAX) goto decline;
    long long base_s = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (overflow || base_s < 0 || (uint64_t)base_s > EXACT_MAX) goto decline;
    long long ticks = PyLong_AsLongLongAndOverflow(args[4], &overflow);
    if (overflow || ticks <= 0 || ticks > 1000000) goto decline;
    double dt = PyFloat_AS_DOUBLE(args[3]);
    if (!(dt > 0.0) || !isfinite(dt)) goto decline;
    uint64_t utime, stime;
    if (pid_stat_times(PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), &utime, &stime) < 0) goto decline;
    /* round(max(now - before, 0) / CLOCK_TICKS / dt * 100.0, 2): int / int is one correctly rounded division of
     * the two exact doubles (both below 2^53), then float arithmetic as written */
    double du = utime > (uint64_t)base_u ? (double)(utime - (uint64_t)base_u) : 0.0;
    double ds = stime > (uint64_t)base_s ? (double)(stime - (uint64_t)base_s) : 0.0;
    double user = du / (double)ticks / dt * 100.0, system = ds / (double)ticks / dt * 100.0;
    if (!isfinite(user) || !isfinite(system)) goto decline;
    PyObject *body = PyDict_New(), *usage = PyDict_New();
    PyObject *out = NULL;
    if (body != NULL && usage != NULL && set_new(body, key_period, round_float(dt, 9)) == 0 &&
        set_new(usage, key_user, round_float(user, 2)) == 0 && set_new(usage, key_system, round_float(system, 2)) == 0 &&
        PyDict_SetItem(body, key_vcpu, usage) == 0)
        out = Py_BuildValue("(OKK)", body, (unsigned long long)utime, (unsigned long long)stime);
    Py_XDECREF(body);
    Py_XDECREF(usage);
    return out;
decline:
    if (PyErr_Occurred()) PyErr_Clear();
    Py_RETURN_NONE;
}

/* ---- the Prometheus exporter's counting (exporters/prometheus/counting.py) --------------------------------- */

/* A number the ledger adds as it is: an exact float, or an exact int (not a bool) of at most 2^53 in size, which
 * Python compares and multiplies as the same double. 0 and the value in *out, or -1 (anything else). */
static int plain_amount(PyObject *o, double *out) {
    if (PyFloat_CheckExact(o)) {
        *out = PyFloat_AsDouble(o);
        return 0;
    }
    if (PyLong_CheckExact(o)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || x == -1) { /* -1: maybe an error; either way the twin decides */
            if (PyErr_Occurred()) PyErr_Clear();
            return -1;
        }
        if (x > (long long)EXACT_MAX || x < -(long long)EXACT_MAX) return -1;
        *out = (double)x;
        return 0;
    }
    return -1;
}

/* totals[counter] = totals.get(counter, 0.0) + value * scale, the product rounded on its own (never fused). */
static int add_total(PyObject *totals, PyObject *counter, double value, double scale) {
    volatile double product = value * scale; /* volatile: no fused multiply-add, Python rounds twice */
    PyObject *old = PyDict_GetItemWithError(totals, counter), *sum;
    if (old == NULL) {
        if (PyErr_Occurred()) return -1;
        sum = PyFloat_FromDouble(0.0 + product);
    } else if (PyFloat_CheckExact(old)) {
        sum = PyFloat_FromDouble(PyFloat_AsDouble(old) + product);
    } else { /* never put there by the ledger; added as Python adds */
        PyObject *p = PyFloat_FromDouble(product);
        sum = p != NULL ? PyNumber_Add(old, p) : NULL;
        Py_XDECREF(p);
    }
    if (sum == NULL) return -1;
    int rc = PyDict_SetItem(totals, counter, sum);
    Py_DECREF(sum);
    return rc;
}

/* add_counts(totals, head, values, scale, most, limit, keyed) -> True | None: one PromCount's values added to a
 * subject's totals (counting.py: add_counts_native, twin add_counts_plain), each under head + (key,) when keyed,
 * else all under head. None, with totals untouched, unless every value is a plain amount in 0..most and, when
 * keyed and limit > 0, every key a str of at most limit characters: the twin counts the bad values and cuts the
 * long keys. */
static PyObject *native_add_counts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "add_counts(totals, head, values, scale, most, limit, keyed)");
        return NULL;
    }
    PyObject *totals = args[0], *head = args[1], *values = args[2];
    if (!PyDict_CheckExact(totals) || !PyTuple_CheckExact(head) || !PyDict_CheckExact(values) ||
        !PyFloat_CheckExact(args[3]) || !PyLong_CheckExact(args[5]))
        Py_RETURN_NONE;
    double scale = PyFloat_AsDouble(args[3]), most;
    if (plain_amount(args[4], &most) < 0 || !isfinite(scale)) Py_RETURN_NONE;
    int overflow;
    long long limit = PyLong_AsLongLongAndOverflow(args[5], &overflow);
    if (overflow || (limit == -1 && PyErr_Occurred())) goto decline;
    int keyed = PyObject_IsTrue(args[6]);
    if (keyed < 0) goto decline;
    Py_ssize_t pos = 0, n = PyTuple_Size(head);
    PyObject *key, *value;
    double v;
    while (PyDict_Next(values, &pos, &key, &value)) { /* first every value and key checked: all or nothing */
        if (plain_amount(value, &v) < 0 || !(v >= 0.0 && v <= most)) goto decline;
        if (keyed && (!PyUnicode_CheckExact(key) || (limit > 0 && PyUnicode_GetLength(key) > limit))) goto decline;
    }
    pos = 0;
    while (PyDict_Next(values, &pos, &key, &value)) {
        plain_amount(value, &v);
        if (!keyed) {
            if (add_total(totals, head, v, scale) < 0) return NULL;
            continue;
        }
        PyObject *counter = PyTuple_New(n + 1);
        if (counter == NULL) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyTuple_GetItem(head, i);
            Py_INCREF(item);
            PyTuple_SetItem(counter, i, item);
        }
        Py_INCREF(key);
        PyTuple_SetItem(counter, n, key);
        int rc = add_total(totals, counter, v, scale);
        Py_DECREF(counter);
        if (rc < 0) return NULL;
    }
    Py_RETURN_TRUE;
decline:
    if (PyErr_Occurred()) PyErr_Clear();
    Py_RETURN_NONE;
}

/* thin_report(line, system, runtime) -> bytes | None: the report line with the values counting never reads
 * replaced by null (counting.py: thin_native; its twin decodes the line whole). ``system`` and ``runtime`` are
 * rules for the groups of system_data and of each runtime's report: tuples of (group name, steps), each step a
 * (names, negate) pair that a member's key matches when it is among the names (or, negated, when it is not: an
 * empty negated step matches every key); the value a rule's last step matches is replaced, an earlier step's
 * value (an object) is descended into. Names are bytes. The whole line is checked on the way, and None is
 * returned for anything this scanner does not fully understand, so the twin (orjson) decides: a line that is not
 * one JSON object, a non-ASCII byte, a control character in a string, an escaped surrogate, an escape in a key,
 * a number over 40 characters or with an exponent of three digits or more (which orjson may read as infinity and
 * refuse), nesting deeper than 64. So every line given a thin version is one orjson takes, with the same keys
 * everywhere and the same values in every place the rules leave. */

#define THIN_DEPTH 64
enum thin_kind { T_PLAIN, T_TOP, T_SYSTEM, T_RUNTIMES, T_ENTRY, T_RT_REPORT, T_RULE };

typedef struct {
    enum thin_kind kind;
    PyObject *steps; /* T_RULE: the rule's steps, and the one the object's members are matched against */
    Py_ssize_t step;
} thin_mode;

static const thin_mode THIN_PLAIN = {T_PLAIN, NULL, 0};

typedef struct {
    const unsigned char *p, *end;
    PyObject *system, *runtime;
    Py_ssize_t *spans; /* pairs of offsets: the values to replace */
    Py_ssize_t nspans, cap;
    const unsigned char *start;
} thin_scan;

static void thin_ws(thin_scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n')) s->p++;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string at s->p (the opening quote): raw and len give its bytes between the quotes, escaped whether it has escapes. */
static int thin_string(thin_scan *s, const unsigned char **raw, Py_ssize_t *len, int *escaped) {
    const unsigned char *p = s->p + 1, *end = s->end;
    *escaped = 0;
    *raw = p;
    for (;;) {
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        if (p >= end || *p < 0x20 || *p >= 0x80) return -1;
        if (*p == '"') break;
        *escaped = 1; /* a backslash */
        if (p + 1 >= end) return -1;
        unsigned char c = p[1];
        if (c == 'u') {
            if (p + 6 > end) return -1;
            int v = 0;
            for (int i = 2; i < 6; i++) {
                int h = hexval(p[i]);
                if (h < 0) return -1;
                v = v * 16 + h;
            }
            if (v >= 0xD800 && v <= 0xDFFF) return -1; /* surrogates: left to orjson */
            p += 6;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
            p += 2;
        } else {
            return -1;
        }
    }
    *len = p - *raw;
    s->p = p + 1;
    return 0;
}

static int thin_number(thin_scan *s) {
    const unsigned char *p = s->p, *end = s->end, *begin = p;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return -1;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const unsigned char *digits = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == digits || p - digits > 2) return -1;
    }
    if (p - begin > 40) return -1;
    s->p = p;
    return 0;
}

static int name_in(PyObject *names, const unsigned char *raw, Py_ssize_t len) {
    if (names == NULL) return 0;
    Py_ssize_t n = PyTuple_Size(names);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyTuple_GetItem(names, i);
        if (PyBytes_Size(b) == len && memcmp(PyBytes_AsString(b), raw, (size_t)len) == 0) return 1;
    }
    return 0;
}

static int thin_mark(thin_scan *s, const unsigned char *from, const unsigned char *to) {
    if (s->nspans + 2 > s->cap) {
        Py_ssize_t cap = s->cap ? s->cap * 2 : 64;
        Py_ssize_t *spans = PyMem_Realloc(s->spans, (size_t)cap * sizeof(Py_ssize_t));
        if (spans == NULL) return -1;
        s->spans = spans;
        s->cap = cap;
    }
    s->spans[s->nspans++] = from - s->start;
    s->spans[s->nspans++] = to - s->start;
    return 0;
}

static int thin_value(thin_scan *s, thin_mode mode, int depth);

/* The steps of the rule for group ``key`` in ``rules``, or NULL. */
static PyObject *rule_for(PyObject *rules, const unsigned char *key, Py_ssize_t len) {
    Py_ssize_t n = PyTuple_Size(rules);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rule = PyTuple_GetItem(rules, i), *name = PyTuple_GetItem(rule, 0);
        if (PyBytes_Size(name) == len && memcmp(PyBytes_AsString(name), key, (size_t)len) == 0)
            return PyTuple_GetItem(rule, 1);
    }
    return NULL;
}

/* The mode of a member's value, from the object's mode and the member's key; *null_it when it is replaced. */
static thin_mode member_mode(thin_scan *s, thin_mode mode, const unsigned char *key, Py_ssize_t len, int *null_it) {
    thin_mode out = THIN_PLAIN;
    *null_it = 0;
    switch (mode.kind) {
    case T_TOP:
        if (len == 11 && memcmp(key, "system_data", 11) == 0) out.kind = T_SYSTEM;
        if (len == 19 && memcmp(key, "neuron_runtime_data", 19) == 0) out.kind = T_RUNTIMES;
        return out;
    case T_SYSTEM:
    case T_RT_REPORT:
        out.steps = rule_for(mode.kind == T_SYSTEM ? s->system : s->runtime, key, len);
        if (out.steps != NULL) out.kind = T_RULE;
        return out;
    case T_ENTRY:
        if (len == 6 && memcmp(key, "report", 6) == 0) out.kind = T_RT_REPORT;
        return out;
    case T_RULE: {
        PyObject *step = PyTuple_GetItem(mode.steps, mode.step);
        int negate = PyTuple_GetItem(step, 1) == Py_True;
        if (name_in(PyTuple_GetItem(step, 0), key, len) == negate) return out; /* not matched: left as it is */
        if (mode.step + 1 == PyTuple_Size(mode.steps)) {
            *null_it = 1;
            return out;
        }
        out.kind = T_RULE;
        out.steps = mode.steps;
        out.step = mode.step + 1;
        return out;
    }
    default:
        return out;
    }
}

static int thin_object(thin_scan *s, thin_mode mode, int depth) {
    s->p++; /* '{' */
    thin_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 0;
    }
    for (;;) {
        if (s->p >= s->end || *s->p != '"') return -1;
        const unsigned char *key;
        Py_ssize_t len;
        int escaped, null_it;
        if (thin_string(s, &key, &len, &escaped) < 0) return -1;
        thin_mode inner = THIN_PLAIN;
        null_it = 0;
        if (mode.kind != T_PLAIN) {
            if (escaped) return -1; /* a key spelled with escapes: compared by orjson's reading only */
            inner = member_mode(s, mode, key, len, &null_it);
        }
        thin_ws(s);
        if (s->p >= s->end || *s->p != ':') return -1;
        s->p++;
        thin_ws(s);
        const unsigned char *from = s->p;
        if (thin_value(s, inner, depth + 1) < 0) return -1;
        if (null_it && thin_mark(s, from, s->p) < 0) return -2;
        thin_ws(s);
        if (s->p >= s->end) return -1;
        if (*s->p == '}') {
            s->p++;
            return 0;
        }
        if (*s->p != ',') return -1;
        s->p++;
        thin_ws(s);
    }
}

static int thin_array(thin_scan *s, thin_mode mode, int depth) {
    s->p++; /* '[' */
    thin_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 0;
    }
    for (;;) {
        thin_mode each = THIN_PLAIN; /* only neuron_runtime_data's entries are read by their place */
        if (mode.kind == T_RUNTIMES) each.kind = T_ENTRY;
        int rc = thin_value(s, each, depth + 1);
        if (rc < 0) return rc;
        thin_ws(s);
        if (s->p >= s->end) return -1;
        if (*s->p == ']') {
            s->p++;
            return 0;
        }
        if (*s->p != ',') return -1;
        s->p++;
        thin_ws(s);
    }
}

static int thin_literal(thin_scan *s, const char *word, Py_ssize_t len) {
    if (s->end - s->p < len || memcmp(s->p, word, (size_t)len) != 0) return -1;
    s->p += len;
    return 0;
}

/* One value at s->p (no leading space): 0, -1 (not understood: decline) or -2 (no memory). */
static int thin_value(thin_scan *s, thin_mode mode, int depth) {
    if (depth > THIN_DEPTH || s->p >= s->end) return -1;
    const unsigned char *raw;
    Py_ssize_t len;
    int escaped;
    switch (*s->p) {
    case '{':
        return thin_object(s, mode.kind == T_RUNTIMES ? THIN_PLAIN : mode, depth);
    case '[':
        return thin_array(s, mode, depth);
    case '"':
        return thin_string(s, &raw, &len, &escaped);
    case 't':
        return thin_literal(s, "true", 4);
    case 'f':
        return thin_literal(s, "false", 5);
    case 'n':
        return thin_literal(s, "null", 4);
    default:
        return thin_number(s);
    }
}

/* Rules as thin_report takes them: ((name: bytes, ((names: tuple of bytes, negate: bool), ...)), ...). */
static int rules_ok(PyObject *rules) {
    if (!PyTuple_CheckExact(rules)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_Size(rules); i++) {
        PyObject *rule = PyTuple_GetItem(rules, i);
        if (!PyTuple_CheckExact(rule) || PyTuple_Size(rule) != 2 || !PyBytes_CheckExact(PyTuple_GetItem(rule, 0)))
            return 0;
        PyObject *steps = PyTuple_GetItem(rule, 1);
        if (!PyTuple_CheckExact(steps) || PyTuple_Size(steps) < 1) return 0;
        for (Py_ssize_t j = 0; j < PyTuple_Size(steps); j++) {
            PyObject *step = PyTuple_GetItem(steps, j);
            if (!PyTuple_CheckExact(step) || PyTuple_Size(step) != 2 || !PyBool_Check(PyTuple_GetItem(step, 1)))
                return 0;
            PyObject *names = PyTuple_GetItem(step, 0);
            if (!PyTuple_CheckExact(names)) return 0;
            for (Py_ssize_t k = 0; k < PyTuple_Size(names); k++)
                if (!PyBytes_CheckExact(PyTuple_GetItem(names, k))) return 0;
        }
    }
    return 1;
}

static PyObject *native_thin_report(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "thin_report(line, system, runtime)");
        return NULL;
    }
    if (!rules_ok(args[1]) || !rules_ok(args[2])) Py_RETURN_NONE;
    thin_scan s = {0};
    s.start = (const unsigned char *)PyBytes_AsString(args[0]);
    s.p = s.start;
    s.end = s.start + PyBytes_Size(args[0]);
    s.system = args[1];
    s.runtime = args[2];
    thin_ws(&s);
    int rc = -1;
    if (s.p < s.end && *s.p == '{') {
        thin_mode top = {T_TOP, NULL, 0};
        rc = thin_value(&s, top, 0);
        if (rc == 0) {
            thin_ws(&s);
            if (s.p != s.end) rc = -1;
        }
    }
    PyObject *out = NULL;
    if (rc == 0) {
        Py_ssize_t size = s.end - s.start;
        for (Py_ssize_t i = 0; i < s.nspans; i += 2) size -= s.spans[i + 1] - s.spans[i] - 4;
        out = PyBytes_FromStringAndSize(NULL, size);
        if (out != NULL) {
            char *w = PyBytes_AsString(out);
            Py_ssize_t at = 0;
            for (Py_ssize_t i = 0; i < s.nspans; i += 2) {
                memcpy(w, s.start + at, (size_t)(s.spans[i] - at));
                w += s.spans[i] - at;
                memcpy(w, "null", 4);
                w += 4;
                at = s.spans[i + 1];
            }
            memcpy(w, s.start + at, (size_t)(s.end - s.start - at));
        }
    } else if (rc == -2) {
        PyErr_NoMemory();
    } else {
        out = Py_None;
        Py_INCREF(out);
    }
    PyMem_Free(s.spans);
    return out;
}

/* ---------------------------------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"vcpu_usage", (PyCFunction)(void (*)(void))native_vcpu_usage, METH_FASTCALL,
     "vcpu_usage(prev, cur): the vcpu_usage body from two /proc/stat samples, or None."},
    {"deltas", (PyCFunction)(void (*)(void))native_deltas, METH_FASTCALL,
     "deltas(cur, prev, positions, often[, limits, dt]): one device's counter deltas, the index of the first "
     "implausible one, or None."},
    {"cores", (PyCFunction)(void (*)(void))native_cores, METH_FASTCALL,
     "cores(deltas, n, dt, limit, keys, first, group, name0, name1, reuse=None): neuroncores_in_use of one device "
     "(reuse updated in place when it has the same shape), or None."},
    {"summary", (PyCFunction)(void (*)(void))native_summary, METH_FASTCALL,
     "summary(deltas, counters, positions, exec_names, err_names, pct_names, pct_values): execution_stats' body "
     "of one device, or None."},
    {"application", (PyCFunction)(void (*)(void))native_application, METH_FASTCALL,
     "application(cur, prev, mem_prev, dt, kit, reuse): (neuroncores_in_use, execution summary, busy flags, memory "
     "same) of one application's device, or None."},
    {"pid_usage", (PyCFunction)(void (*)(void))native_pid_usage, METH_FASTCALL,
     "pid_usage(data, utime, stime, dt, ticks): (neuron_runtime_vcpu_usage body, utime, stime), or None."},
    {"add_counts", (PyCFunction)(void (*)(void))native_add_counts, METH_FASTCALL,
     "add_counts(totals, head, values, scale, most, limit, keyed): one count's values added to a subject's "
     "totals (True), or None with totals untouched."},
    {"thin_report", (PyCFunction)(void (*)(void))native_thin_report, METH_FASTCALL,
     "thin_report(line, system, runtime): the line with the values the rules name replaced by null, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    static const char *names[SHARES] = {"user", "nice", "system", "idle", "io_wait", "irq", "soft_irq"};
    for (int i = 0; i < SHARES; i++) {
        if (share_keys[i] == NULL && (share_keys[i] = PyUnicode_InternFromString(names[i])) == NULL) return NULL;
    }
    if (key_average == NULL && (key_average = PyUnicode_InternFromString("average_usage")) == NULL) return NULL;
    if (key_usage == NULL && (key_usage = PyUnicode_InternFromString("usage_data")) == NULL) return NULL;
    if (key_util == NULL && (key_util = PyUnicode_InternFromString("neuroncore_utilization")) == NULL) return NULL;
    if (key_flops == NULL && (key_flops = PyUnicode_InternFromString("flops")) == NULL) return NULL;
    static const struct {
        PyObject **key;
        const char *name;
    } more[] = {{&key_errors, "error_summary"}, {&key_execs, "execution_summary"}, {&key_latency, "latency_stats"},
                {&key_total_lat, "total_latency"}, {&key_device_lat, "device_latency"},
                {&key_period, "period"}, {&key_vcpu, "vcpu_usage"}, {&key_user, "user"}, {&key_system, "system"}};
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
        if (*more[i].key == NULL && (*more[i].key = PyUnicode_InternFromString(more[i].name)) == NULL) return NULL;
    }
    if (key_ctxt == NULL && (key_ctxt = PyUnicode_InternFromString("context_switch_count")) == NULL) return NULL;
#if defined(Py_LIMITED_API) && Py_LIMITED_API + 0 < 0x030B0000
    static const struct {
        PyObject **name;
        const char *text;
    } attrs[] = {{&nm_typecode, "typecode"}, {&nm_format, "format"}, {&nm_itemsize, "itemsize"}, {&nm_tobytes, "tobytes"}};
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        if (*attrs[i].name == NULL && (*attrs[i].name = PyUnicode_InternFromString(attrs[i].text)) == NULL) return NULL;
    }
#endif
    return PyModule_Create(&module);
}
