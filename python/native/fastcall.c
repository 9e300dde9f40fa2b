/*
 * streambridge._native fast calls: the Python package's most frequent operations (stream
 * query, event record, stream wait, event query, and record+wait fused) as CPython
 * functions that call the driver's entry points directly.
 *
 * Why: every call through gopy's generated layer is a C-to-Go crossing (cgocallback),
 * about 130-160 ns on an H200 before any work; the driver call itself is 150-300 ns. With
 * the crossing, these calls cost 1.8-2.6x the fastest framework (bench/python_bench.py);
 * without it they cost what CuPy's and cuda.core's do.
 *
 * What stays in Go: loading the driver and resolving these entry points (the Go core hands
 * their addresses over, streams.Driver.Entry), validating every foreign handle, creating
 * and destroying streams and events, and everything else. These functions are only ever
 * given handles the Go core validated or made, by the package's own objects
 * (python/streambridge/_stream.py, _event.py), which stop using them when closed.
 *
 * Each call that enqueues work releases the GIL around the driver, as CuPy and cuda.core do:
 * an enqueue can block (a full launch queue), and a host callback waiting for the GIL on the
 * driver's thread must then be able to take it. The queries keep it: they never block, and
 * a release and re-take costs 60-80 ns (measured on the H200), a quarter of a query.
 *
 * Also here: the C cores of the stream and event objects (StreamCore, EventCore), whose
 * record and wait_event run these calls without a Python frame, and ExternalStream's
 * constructor for the common case, which calls Go's handle check directly.
 *
 * gopy builds this file into the extension with its generated code (scripts/build-native.sh);
 * sb_fastcall_module returns the module object.
 */
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

typedef int (*stream_fn)(uintptr_t);                           /* cuStreamQuery */
typedef int (*event_fn)(uintptr_t);                            /* cuEventQuery */
typedef int (*record_fn)(uintptr_t, uintptr_t);                /* cuEventRecord(event, stream) */
typedef int (*wait_fn)(uintptr_t, uintptr_t, unsigned int);    /* cuStreamWaitEvent(stream, event, flags) */
typedef int (*host_fn_launch)(uintptr_t, void (*)(void *), void *); /* cuLaunchHostFunc */
typedef int (*capturing_fn)(uintptr_t, int *);                 /* cuStreamIsCapturing */
typedef int (*launch_fn)(uintptr_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         uintptr_t, void **, void **);          /* cuLaunchKernel */

static stream_fn stream_query;
static event_fn event_query;
static record_fn event_record;
static wait_fn stream_wait_event;
static host_fn_launch launch_host_func;
static capturing_fn stream_is_capturing;
static launch_fn launch_kernel;

static int handle_of(PyObject *o, uintptr_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return 0;
    *out = (uintptr_t)v;
    return 1;
}

static int ready(void) {
    if (stream_query == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "streambridge fast calls used before init");
        return 0;
    }
    return 1;
}

/* The enqueues, with the GIL released around the driver (see the top of the file). */
static int record_nogil(uintptr_t e, uintptr_t s) {
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = event_record(e, s);
    Py_END_ALLOW_THREADS
    return r;
}

static int wait_nogil(uintptr_t s, uintptr_t e) {
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = stream_wait_event(s, e, 0);
    Py_END_ALLOW_THREADS
    return r;
}

static int launch_nogil(uintptr_t f, const unsigned dims[6], unsigned shared, uintptr_t s, void **params) {
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = launch_kernel(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], shared, s, params, NULL);
    Py_END_ALLOW_THREADS
    return r;
}

/* init(cuStreamQuery, cuEventRecord, cuStreamWaitEvent, cuEventQuery, cuLaunchHostFunc,
 * cuStreamIsCapturing, cuLaunchKernel): the addresses. */
static PyObject *fc_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t a[7];
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "init takes 7 entry point addresses");
        return NULL;
    }
    for (int i = 0; i < 7; i++) {
        if (!handle_of(args[i], &a[i]))
            return NULL;
        if (a[i] == 0) {
            PyErr_SetString(PyExc_ValueError, "init: an entry point address is 0");
            return NULL;
        }
    }
    stream_query = (stream_fn)a[0];
    event_record = (record_fn)a[1];
    stream_wait_event = (wait_fn)a[2];
    event_query = (event_fn)a[3];
    launch_host_func = (host_fn_launch)a[4];
    stream_is_capturing = (capturing_fn)a[5];
    launch_kernel = (launch_fn)a[6];
    Py_RETURN_NONE;
}

/* stream_query(stream) -> CUresult */
static PyObject *fc_stream_query(PyObject *self, PyObject *arg) {
    uintptr_t s;
    if (!ready() || !handle_of(arg, &s))
        return NULL;
    return PyLong_FromLong(stream_query(s)); /* never blocks: keeps the GIL */
}

/* event_query(event) -> CUresult */
static PyObject *fc_event_query(PyObject *self, PyObject *arg) {
    uintptr_t e;
    if (!ready() || !handle_of(arg, &e))
        return NULL;
    return PyLong_FromLong(event_query(e)); /* never blocks: keeps the GIL */
}

/* event_record(event, stream) -> CUresult */
static PyObject *fc_event_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t e, s;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "event_record takes (event, stream)");
        return NULL;
    }
    if (!ready() || !handle_of(args[0], &e) || !handle_of(args[1], &s))
        return NULL;
    return PyLong_FromLong(record_nogil(e, s));
}

/* stream_wait_event(stream, event) -> CUresult */
static PyObject *fc_stream_wait_event(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t s, e;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "stream_wait_event takes (stream, event)");
        return NULL;
    }
    if (!ready() || !handle_of(args[0], &s) || !handle_of(args[1], &e))
        return NULL;
    return PyLong_FromLong(wait_nogil(s, e));
}

/* record_and_wait(event, producer, waiter) -> CUresult: record event on producer, and if
 * that succeeded make waiter wait for it. A failed record returns its result negated, so
 * that the caller can name the call that failed. */
static PyObject *fc_record_and_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t e, from, to;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record_and_wait takes (event, producer, waiter)");
        return NULL;
    }
    if (!ready() || !handle_of(args[0], &e) || !handle_of(args[1], &from) || !handle_of(args[2], &to))
        return NULL;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = event_record(e, from);
    r = r != 0 ? -r : stream_wait_event(to, e, 0);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(r);
}

/*
 * Host callbacks into Python. The Go core enqueues them (cuLaunchHostFunc through its own
 * host-function table, pyshim.StreamLaunchCFunc), calling host_trampoline(userData) from the
 * driver's thread, which takes the GIL, calls fn(*args), and frees the call. An exception is
 * reported through sys.unraisablehook and kept in callback_errors for Python to collect; it
 * never reaches the driver's thread. The callable and its arguments are referenced from
 * host_call_prepare until the call ran.
 */
typedef struct {
    PyObject *fn;
    PyObject *args;
} host_call;

static PyObject *callback_errors; /* list of exceptions raised in host callbacks */

static void host_trampoline(void *ud) {
    host_call *hc = (host_call *)ud;
    if (!Py_IsInitialized())
        return; /* the interpreter is gone: nothing can run, and nothing is freed */
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_Call(hc->fn, hc->args, NULL);
    if (r == NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value != NULL) {
            if (tb != NULL)
                PyException_SetTraceback(value, tb);
            PyList_Append(callback_errors, value);
        }
        PyErr_Restore(type, value, tb);
        PyErr_WriteUnraisable(hc->fn);
    }
    Py_XDECREF(r);
    Py_DECREF(hc->fn);
    Py_DECREF(hc->args);
    PyMem_RawFree(hc);
    PyGILState_Release(g);
}

/* host_call_prepare(fn, args) -> userData: a call of fn(*args) for host_trampoline. */
static PyObject *fc_host_call_prepare(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyCallable_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "host_call_prepare takes (callable, tuple)");
        return NULL;
    }
    host_call *hc = PyMem_RawMalloc(sizeof *hc);
    if (hc == NULL)
        return PyErr_NoMemory();
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    hc->fn = args[0];
    hc->args = args[1];
    return PyLong_FromUnsignedLongLong((uintptr_t)hc);
}

/* host_call_discard(userData): frees a prepared call that was never enqueued. */
static PyObject *fc_host_call_discard(PyObject *self, PyObject *arg) {
    uintptr_t ud;
    if (!handle_of(arg, &ud) || ud == 0)
        return NULL;
    host_call *hc = (host_call *)ud;
    Py_DECREF(hc->fn);
    Py_DECREF(hc->args);
    PyMem_RawFree(hc);
    Py_RETURN_NONE;
}

/* launch_host_call(stream, userData) -> CUresult, or -1 while the stream is capturing
 * (a prepared call runs once and frees itself; a graph would replay it). */
static PyObject *fc_launch_host_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t s, ud;
    int status = 0;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "launch_host_call takes (stream, userData)");
        return NULL;
    }
    if (!ready() || !handle_of(args[0], &s) || !handle_of(args[1], &ud))
        return NULL;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = stream_is_capturing(s, &status);
    if (r == 0)
        r = status != 0 ? -1 : launch_host_func(s, host_trampoline, (void *)ud);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(r);
}

/* host_trampoline() -> the address of host_trampoline. */
static PyObject *fc_host_trampoline(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong((uintptr_t)&host_trampoline);
}

/* callback_errors() -> the exceptions raised in host callbacks since the last call. */
static PyObject *fc_callback_errors(PyObject *self, PyObject *unused) {
    PyObject *out = PyList_GetSlice(callback_errors, 0, PyList_GET_SIZE(callback_errors));
    if (out != NULL)
        PyList_SetSlice(callback_errors, 0, PyList_GET_SIZE(callback_errors), NULL);
    return out;
}

/* launch(function, stream, (gx, gy, gz), (bx, by, bz), shared, values) -> CUresult.
 * values: a tuple of the kernel's parameters, each up to 8 bytes little-endian in an int. */
#define MAX_PARAMS 256
static PyObject *fc_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t f, s, shared;
    unsigned dims[6];
    uint64_t vals[MAX_PARAMS];
    void *ptrs[MAX_PARAMS];
    if (nargs != 6 || !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) != 3 || !PyTuple_Check(args[3]) ||
        PyTuple_GET_SIZE(args[3]) != 3 || !PyTuple_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "launch takes (function, stream, (gx, gy, gz), (bx, by, bz), shared, values)");
        return NULL;
    }
    if (!ready() || !handle_of(args[0], &f) || !handle_of(args[1], &s) || !handle_of(args[4], &shared))
        return NULL;
    for (int i = 0; i < 6; i++) {
        uintptr_t d;
        if (!handle_of(PyTuple_GET_ITEM(args[2 + i / 3], i % 3), &d))
            return NULL;
        dims[i] = (unsigned)d;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args[5]);
    if (n > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "more than 256 kernel parameters");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uintptr_t v;
        if (!handle_of(PyTuple_GET_ITEM(args[5], i), &v))
            return NULL;
        vals[i] = v;
        ptrs[i] = &vals[i];
    }
    return PyLong_FromLong(launch_nogil(f, dims, (unsigned)shared, s, ptrs));
}

/* pyshim.CheckStream, exported by gopy's generated Go (the same function _sbnative's
 * pyshim_CheckStream calls): on failure it has set a RuntimeError and returns 0. */
extern long long pyshim_CheckStream(unsigned long long handle, long long device, long long convention);

/* check_stream(handle, device) -> device: pyshim.CheckStream under the runtime's reading of
 * 0/1/2, called without pybindgen's keyword parsing (about a third of a wrap's crossing).
 * The check itself stays in Go: it reads memory that may be unmapped, which only Go's fault
 * handling (debug.SetPanicOnFault) turns into an error. */
static PyObject *fc_check_stream(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t handle;
    long long device;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "check_stream takes a handle and a device");
        return NULL;
    }
    if (!handle_of(args[0], &handle))
        return NULL;
    device = PyLong_AsLongLong(args[1]);
    if (device == -1 && PyErr_Occurred())
        return NULL;
    long long got = pyshim_CheckStream(handle, device, 0);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLongLong(got);
}

/* The cores of streambridge's stream and event objects: _BaseStream (_stream.py) and Event
 * (_event.py) are Python subclasses of these. The fields the fast calls need live in the C
 * struct (Python code reads and writes them as _ptr, _fast, _device, _eptr), so the most
 * frequent methods (Stream.record, Stream.wait_event, Event.record) run here without a
 * Python frame or attribute lookups: on an H200 these were a third of such a call. Anything
 * but the common case (a fast stream and a fast event, passed positionally) goes to the
 * Python method of the same name with a leading underscore, which does everything else and
 * raises the typed errors; so does a failed driver call, which that method repeats and
 * reports. */
typedef struct {
    PyObject_HEAD
    unsigned long long ptr; /* the CUstream */
    long long device;       /* its device; -1 until known */
    char fast;              /* a stream object, open, and the fast calls are ready */
    PyObject *owner;        /* what a borrowed stream came from, kept alive with it; or NULL */
} StreamCore;

typedef struct {
    PyObject_HEAD
    unsigned long long eptr; /* the CUevent */
    char fast;               /* open, and the fast calls are ready */
} EventCore;

static PyTypeObject StreamCoreType, EventCoreType;
static PyObject *name_record, *name_wait_event;

static PyObject *stream_core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    StreamCore *s = (StreamCore *)type->tp_alloc(type, 0);
    if (s != NULL)
        s->device = -1;
    return (PyObject *)s;
}

/* The owner may refer back to the stream (a user's protocol object caching its wrapper). */
static int stream_core_traverse(StreamCore *s, visitproc visit, void *arg) {
    Py_VISIT(s->owner);
    return 0;
}

static int stream_core_clear(StreamCore *s) {
    Py_CLEAR(s->owner);
    return 0;
}

static void stream_core_dealloc(StreamCore *s) {
    PyObject_GC_UnTrack(s);
    Py_CLEAR(s->owner);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* callable(first, *args, **kw), or, with callable NULL, the method `name` of first, called
 * with a vectorcall's own arguments (nargs positional, then the values of kwnames). One
 * slot is kept before first, which PY_VECTORCALL_ARGUMENTS_OFFSET lets the callee use. */
static PyObject *call_with_first(PyObject *callable, PyObject *name, PyObject *first, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *small[10];
    Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject **buf = total + 2 <= 10 ? small : PyMem_Malloc((total + 2) * sizeof(PyObject *));
    if (buf == NULL)
        return PyErr_NoMemory();
    PyObject **call = buf + 1;
    call[0] = first;
    if (total > 0)
        memcpy(call + 1, args, total * sizeof(PyObject *));
    size_t nargsf = (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET;
    PyObject *r = callable != NULL ? PyObject_Vectorcall(callable, call, nargsf, kwnames)
                                   : PyObject_VectorcallMethod(name, call, nargsf, kwnames);
    if (buf != small)
        PyMem_Free(buf);
    return r;
}

/* The Python method `name` of self with the call's own arguments. */
static PyObject *slow(PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return call_with_first(NULL, name, self, args, nargs, kwnames);
}

/* The other object of a core method's common case: one positional argument of `type`, on
 * an object whose fast calls are on (self_fast); NULL for anything else. */
static PyObject *fast_arg(char self_fast, PyTypeObject *type, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
    if (!self_fast || nargs != 1 || kwnames != NULL || !PyObject_TypeCheck(args[0], type))
        return NULL;
    return args[0];
}

static PyObject *stream_core_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    StreamCore *s = (StreamCore *)self;
    EventCore *e = (EventCore *)fast_arg(s->fast, &EventCoreType, args, nargs, kwnames);
    if (e != NULL && e->fast && record_nogil(e->eptr, s->ptr) == 0)
        return Py_NewRef((PyObject *)e);
    return slow(self, name_record, args, nargs, kwnames);
}

static PyObject *stream_core_wait_event(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    StreamCore *s = (StreamCore *)self;
    EventCore *e = (EventCore *)fast_arg(s->fast, &EventCoreType, args, nargs, kwnames);
    if (e != NULL && e->fast && wait_nogil(s->ptr, e->eptr) == 0)
        Py_RETURN_NONE;
    return slow(self, name_wait_event, args, nargs, kwnames);
}

static PyObject *event_core_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    EventCore *e = (EventCore *)self;
    StreamCore *s = (StreamCore *)fast_arg(e->fast, &StreamCoreType, args, nargs, kwnames);
    if (s != NULL && s->fast && record_nogil(e->eptr, s->ptr) == 0)
        Py_RETURN_NONE;
    return slow(self, name_record, args, nargs, kwnames);
}

static PyMethodDef stream_core_methods[] = {
    {"record", (PyCFunction)(void (*)(void))stream_core_record, METH_FASTCALL | METH_KEYWORDS,
     "record($self, /, event=None, options=None)\n--\n\nRecord ``event`` (a new one if None, made with "
     "``options``) on the stream (cuEventRecord); return it."},
    {"wait_event", (PyCFunction)(void (*)(void))stream_core_wait_event, METH_FASTCALL | METH_KEYWORDS,
     "wait_event($self, /, event)\n--\n\nMake work submitted from now on wait for ``event`` (cuStreamWaitEvent)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef stream_core_members[] = {
    {"_ptr", T_ULONGLONG, offsetof(StreamCore, ptr), 0, "the CUstream"},
    {"_device", T_LONGLONG, offsetof(StreamCore, device), 0, "the device; -1 until known"},
    {"_fast", T_BOOL, offsetof(StreamCore, fast), 0, "a stream object, open, and fast calls are ready"},
    {"_owner", T_OBJECT, offsetof(StreamCore, owner), 0, "what a borrowed stream came from, kept alive with it"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef event_core_methods[] = {
    {"record", (PyCFunction)(void (*)(void))event_core_record, METH_FASTCALL | METH_KEYWORDS,
     "record($self, /, stream=None)\n--\n\nRecord on ``stream`` (cuEventRecord); None is the current "
     "streambridge stream, else the device's legacy default stream, as CuPy and PyTorch take it."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef event_core_members[] = {
    {"_eptr", T_ULONGLONG, offsetof(EventCore, eptr), 0, "the CUevent"},
    {"_fast", T_BOOL, offsetof(EventCore, fast), 0, "open, and fast calls are ready"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StreamCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.StreamCore",
    .tp_basicsize = sizeof(StreamCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C core of streambridge's streams (see fastcall.c).",
    .tp_new = stream_core_new,
    .tp_traverse = (traverseproc)stream_core_traverse,
    .tp_clear = (inquiry)stream_core_clear,
    .tp_dealloc = (destructor)stream_core_dealloc,
    .tp_free = PyObject_GC_Del,
    .tp_methods = stream_core_methods,
    .tp_members = stream_core_members,
};

static PyTypeObject EventCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.EventCore",
    .tp_basicsize = sizeof(EventCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C core of streambridge's events (see fastcall.c).",
    .tp_new = PyType_GenericNew,
    .tp_methods = event_core_methods,
    .tp_members = event_core_members,
};

/* ExternalStream(ptr, device_id=-1, ...): the common case, a stream object's handle with
 * CuPy's positional signature, made here: the check in Go (as check_stream), then the
 * instance with _ptr, _device and _fast set. A wrap is mostly Python object work around one
 * check; this halves that work (bench/python_bench.py, wrap). Everything else (keywords,
 * 0/1/2, any failure, fast calls off) goes to the Python initializer registered with
 * set_external_init, which raises the typed errors: a failure here is only ever retried
 * there, never reported from here. ExternalStream's first base is ExternalCore, whose
 * tp_new this is, so Python calls it directly (a __new__ in the class would be looked up
 * and called with cls prepended, on every wrap). */
static PyObject *external_init;

static PyObject *fc_set_external_init(PyObject *self, PyObject *init) {
    if (!PyCallable_Check(init)) {
        PyErr_SetString(PyExc_TypeError, "set_external_init takes the Python initializer");
        return NULL;
    }
    Py_INCREF(init);
    Py_XDECREF(external_init);
    external_init = init;
    Py_RETURN_NONE;
}

static int external_fast(PyObject *obj, PyObject *const *args, Py_ssize_t nargs) {
    if (stream_query == NULL || nargs < 1 || nargs > 2 || !PyLong_CheckExact(args[0]) ||
        (nargs == 2 && !PyLong_CheckExact(args[1])))
        return 0;
    unsigned long long ptr = PyLong_AsUnsignedLongLong(args[0]);
    long long device = nargs == 2 ? PyLong_AsLongLong(args[1]) : -1;
    if (PyErr_Occurred() || ptr <= 2 || device < -1) {
        PyErr_Clear();
        return 0;
    }
    long long got = pyshim_CheckStream(ptr, device, 0);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    StreamCore *s = (StreamCore *)obj;
    s->ptr = ptr;
    s->device = got;
    s->fast = 1;
    return 1;
}

static PyObject *external_core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (external_init == NULL) {
        PyErr_SetString(PyExc_TypeError, "ExternalCore is only a base of streambridge.ExternalStream");
        return NULL;
    }
    PyObject *obj = stream_core_new(type, NULL, NULL);
    if (obj == NULL)
        return NULL;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if ((kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0) &&
        external_fast(obj, &PyTuple_GET_ITEM(args, 0), nargs))
        return obj;
    /* The initializer, bound to obj, with the call's own arguments. */
    PyObject *init = PyMethod_New(external_init, obj);
    PyObject *r = init == NULL ? NULL : PyObject_Call(init, args, kwargs);
    Py_XDECREF(init);
    if (r == NULL) {
        Py_DECREF(obj);
        return NULL;
    }
    Py_DECREF(r);
    return obj;
}

static PyTypeObject ExternalCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.ExternalCore",
    .tp_basicsize = sizeof(StreamCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, /* GC, traverse, clear, dealloc: StreamCore's */
    .tp_doc = "The constructor of streambridge.ExternalStream (see fastcall.c).",
    .tp_base = &StreamCoreType,
    .tp_new = external_core_new,
};

/* Stream.from_external(obj) (a classmethod over this function; the result is always an
 * ExternalStream): the common case, a protocol object answering (0, handle of a stream
 * object), made here as external_core_new makes a wrap, with the object kept in _owner. The
 * protocol is called once; whatever this does not take (no protocol, another shape, any
 * failed check, fast calls off) goes with the answer to the Python function registered
 * with set_from_external, which raises the typed errors. */
static PyObject *external_type, *from_external_slow, *name_cuda_stream;

static PyObject *fc_set_from_external(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &StreamCoreType) ||
        !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_from_external takes ExternalStream and the Python fallback");
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(external_type, args[0]);
    Py_XSETREF(from_external_slow, args[1]);
    Py_RETURN_NONE;
}

static PyObject *fc_from_external(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || external_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "from_external(cls, obj)");
        return NULL;
    }
    PyObject *obj = args[1];
    /* The protocol is the type's, as a special method's is: looked up there once (the type's
     * method cache), and called unbound where the interpreter would call it so. */
    PyObject *method = _PyType_Lookup(Py_TYPE(obj), name_cuda_stream); /* borrowed */
    if (method == NULL)
        return PyObject_CallOneArg(from_external_slow, obj); /* raises the TypeError */
    Py_INCREF(method);
    PyObject *value = PyType_HasFeature(Py_TYPE(method), Py_TPFLAGS_METHOD_DESCRIPTOR)
                          ? PyObject_Vectorcall(method, &obj, 1, NULL)
                          : PyObject_CallMethodNoArgs(obj, name_cuda_stream);
    Py_DECREF(method);
    if (value == NULL)
        return NULL;
    if (PyTuple_CheckExact(value) && PyTuple_GET_SIZE(value) == 2 && PyLong_CheckExact(PyTuple_GET_ITEM(value, 0)) &&
        PyLong_AsLong(PyTuple_GET_ITEM(value, 0)) == 0) {
        PyObject *s = stream_core_new((PyTypeObject *)external_type, NULL, NULL);
        if (s == NULL) {
            Py_DECREF(value);
            return NULL;
        }
        PyObject *handle = PyTuple_GET_ITEM(value, 1);
        if (external_fast(s, &handle, 1)) {
            Py_DECREF(value);
            ((StreamCore *)s)->owner = Py_NewRef(obj);
            return s;
        }
        Py_DECREF(s);
    }
    PyErr_Clear();
    PyObject *r = PyObject_CallFunctionObjArgs(from_external_slow, obj, value, NULL);
    Py_DECREF(value);
    return r;
}

/* The core of streambridge's Kernel (_kernel.py): calling a kernel launches it here for the
 * common case: ints for grid, block and shared_mem, a tuple of Python ints and floats for
 * the arguments (no arrays: their producers' streams need waiting for), and an open
 * streambridge stream on the kernel's device. Everything else, and any failed launch (which
 * it then repeats and reports), goes to the Python method _call. On an H200 the Python frame
 * this skips was a tenth of an empty kernel's launch. */
typedef struct {
    PyObject_HEAD
    unsigned long long fn; /* the CUfunction */
    long long device;      /* its module's device */
    char live;             /* the module is loaded and the fast calls are ready */
} KernelCore;

static PyObject *name_call, *name_stream, *name_shared_mem;

/* An exact int in 1 .. 2**32-1 (a grid or block dimension, or shared_mem when zero_ok). */
static int dim_of(PyObject *o, unsigned *out, int zero_ok) {
    if (!PyLong_CheckExact(o))
        return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (v >= (1ULL << 32) || (v == 0 && !zero_ok))
        return 0;
    *out = (unsigned)v;
    return 1;
}

/* A kernel argument as _kernel.marshal packs it: an int as a long long, a float as a double. */
static int param_of(PyObject *o, uint64_t *out) {
    if (PyLong_CheckExact(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(o);
            if (PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            *out = u;
            return 1;
        }
        if (overflow < 0 || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        *out = (uint64_t)v;
        return 1;
    }
    if (PyFloat_CheckExact(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        memcpy(out, &d, sizeof d);
        return 1;
    }
    return 0;
}

static PyObject *kernel_core_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    KernelCore *k = (KernelCore *)self;
    PyObject *stream = Py_None, *shared_obj = NULL;
    unsigned dims[6], shared = 0;
    uint64_t vals[MAX_PARAMS];
    void *ptrs[MAX_PARAMS];
    if (!k->live || launch_kernel == NULL || PyTuple_GET_SIZE(args) != 3)
        goto slow_path;
    if (kwargs != NULL) {
        Py_ssize_t found = 0;
        PyObject *v = PyDict_GetItemWithError(kwargs, name_stream);
        if (v != NULL) {
            stream = v;
            found++;
        }
        if ((shared_obj = PyDict_GetItemWithError(kwargs, name_shared_mem)) != NULL)
            found++;
        if (PyErr_Occurred())
            return NULL;
        if (found != PyDict_GET_SIZE(kwargs))
            goto slow_path;
    }
    if (!PyObject_TypeCheck(stream, &StreamCoreType) || !((StreamCore *)stream)->fast ||
        ((StreamCore *)stream)->device != k->device)
        goto slow_path;
    if (!dim_of(PyTuple_GET_ITEM(args, 0), &dims[0], 0) || !dim_of(PyTuple_GET_ITEM(args, 1), &dims[3], 0) ||
        (shared_obj != NULL && !dim_of(shared_obj, &shared, 1)))
        goto slow_path;
    dims[1] = dims[2] = dims[4] = dims[5] = 1;
    PyObject *params = PyTuple_GET_ITEM(args, 2);
    if (!PyTuple_CheckExact(params) || PyTuple_GET_SIZE(params) > MAX_PARAMS)
        goto slow_path;
    Py_ssize_t n = PyTuple_GET_SIZE(params);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!param_of(PyTuple_GET_ITEM(params, i), &vals[i]))
            goto slow_path;
        ptrs[i] = &vals[i];
    }
    if (launch_nogil((uintptr_t)k->fn, dims, shared, (uintptr_t)((StreamCore *)stream)->ptr, ptrs) == 0)
        Py_RETURN_NONE;
slow_path:;
    PyObject *call = PyObject_GetAttr(self, name_call);
    if (call == NULL)
        return NULL;
    PyObject *result = PyObject_Call(call, args, kwargs);
    Py_DECREF(call);
    return result;
}

static PyMemberDef kernel_core_members[] = {
    {"_fn", T_ULONGLONG, offsetof(KernelCore, fn), 0, "the CUfunction"},
    {"_device", T_LONGLONG, offsetof(KernelCore, device), 0, "its module's device"},
    {"_live", T_BOOL, offsetof(KernelCore, live), 0, "the module is loaded and the fast calls are ready"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject KernelCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.KernelCore",
    .tp_basicsize = sizeof(KernelCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C core of streambridge's kernels (see fastcall.c).",
    .tp_new = PyType_GenericNew,
    .tp_call = kernel_core_call,
    .tp_members = kernel_core_members,
};

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))fc_launch, METH_FASTCALL,
     "cuLaunchKernel(function, grid, block, shared, stream, values) -> CUresult"},
    {"host_call_prepare", (PyCFunction)(void (*)(void))fc_host_call_prepare, METH_FASTCALL,
     "host_call_prepare(callable, args) -> userData"},
    {"host_call_discard", fc_host_call_discard, METH_O, "host_call_discard(userData)"},
    {"launch_host_call", (PyCFunction)(void (*)(void))fc_launch_host_call, METH_FASTCALL,
     "cuLaunchHostFunc(stream, host_trampoline, userData) -> CUresult (-1: the stream is capturing)"},
    {"host_trampoline", fc_host_trampoline, METH_NOARGS, "the C address of the host-callback trampoline"},
    {"callback_errors", fc_callback_errors, METH_NOARGS, "exceptions raised in host callbacks since the last call"},
    {"set_external_init", fc_set_external_init, METH_O, "set_external_init(init): ExternalStream's initializer"},
    {"from_external", (PyCFunction)(void (*)(void))fc_from_external, METH_FASTCALL,
     "from_external($module, cls, obj, /)\n--\n\nCuPy 14's ``Stream.from_external``: borrow the stream of any "
     "object speaking the ``__cuda_stream__`` protocol as an ExternalStream, keeping the object alive as long "
     "as the stream (the handle is checked as ExternalStream checks it)."},
    {"set_from_external", (PyCFunction)(void (*)(void))fc_set_from_external, METH_FASTCALL,
     "set_from_external(ExternalStream, fallback(obj, value=...))"},
    {"check_stream", (PyCFunction)(void (*)(void))fc_check_stream, METH_FASTCALL,
     "pyshim.CheckStream(handle, device, runtime convention) -> device"},
    {"init", (PyCFunction)(void (*)(void))fc_init, METH_FASTCALL, "init(query, record, wait, event_query)"},
    {"stream_query", fc_stream_query, METH_O, "cuStreamQuery(stream) -> CUresult"},
    {"event_query", fc_event_query, METH_O, "cuEventQuery(event) -> CUresult"},
    {"event_record", (PyCFunction)(void (*)(void))fc_event_record, METH_FASTCALL, "cuEventRecord(event, stream) -> CUresult"},
    {"stream_wait_event", (PyCFunction)(void (*)(void))fc_stream_wait_event, METH_FASTCALL,
     "cuStreamWaitEvent(stream, event, 0) -> CUresult"},
    {"record_and_wait", (PyCFunction)(void (*)(void))fc_record_and_wait, METH_FASTCALL,
     "cuEventRecord(event, producer), then cuStreamWaitEvent(waiter, event, 0) -> CUresult (-r if the record failed)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "streambridge._native.fastcall",
                                    "Direct driver calls for validated handles (see fastcall.c).", -1, methods};

__attribute__((visibility("default"))) PyObject *sb_fastcall_module(void) {
    static PyObject *m;
    if (m == NULL) {
        callback_errors = PyList_New(0);
        if (callback_errors == NULL)
            return NULL;
        name_record = PyUnicode_InternFromString("_record");
        name_wait_event = PyUnicode_InternFromString("_wait_event");
        name_cuda_stream = PyUnicode_InternFromString("__cuda_stream__");
        name_call = PyUnicode_InternFromString("_call");
        name_stream = PyUnicode_InternFromString("stream");
        name_shared_mem = PyUnicode_InternFromString("shared_mem");
        if (name_record == NULL || name_wait_event == NULL || name_cuda_stream == NULL ||
            name_call == NULL || name_stream == NULL || name_shared_mem == NULL || PyType_Ready(&StreamCoreType) < 0 ||
            PyType_Ready(&ExternalCoreType) < 0 || PyType_Ready(&EventCoreType) < 0 || PyType_Ready(&KernelCoreType) < 0)
            return NULL;
        m = PyModule_Create(&module);
        if (m == NULL || PyModule_AddObjectRef(m, "StreamCore", (PyObject *)&StreamCoreType) < 0 ||
            PyModule_AddObjectRef(m, "ExternalCore", (PyObject *)&ExternalCoreType) < 0 ||
            PyModule_AddObjectRef(m, "EventCore", (PyObject *)&EventCoreType) < 0 ||
            PyModule_AddObjectRef(m, "KernelCore", (PyObject *)&KernelCoreType) < 0) {
            Py_CLEAR(m);
            return NULL;
        }
    }
    Py_XINCREF(m);
    return m;
}
