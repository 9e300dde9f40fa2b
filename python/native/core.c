/*
 * streambridge._native core: the objects of the Python package (streams, events, kernels)
 * and the one path of every operation that reaches the driver often: stream query, record,
 * wait, wait_stream, event record, wait and query, host callbacks and kernel launches. Each
 * has one body here, for every stream (owned, borrowed, the special handles 0, 1 and 2) on
 * either driver: the entry points come from the Go core (streams.Driver.Entry), which offers
 * the same ones for the real driver and the software one. What every call checks lives in
 * that body: the process was not forked (gate), the call is not made from inside a host
 * callback (gate), the objects are open, the devices agree. A failure raises where it is
 * found, as the typed exception of its kind (sb_raise): nothing is re-run to learn why.
 *
 * Why C: every call through gopy's generated layer is a C-to-Go crossing, about 130-160 ns
 * on an H200 before any work; the driver call itself is 150-300 ns.
 *
 * Events and streams are the core's own, made and destroyed here (see "The life of an
 * event", "The life of a stream"), and a borrowed stream is proven here with a few loads
 * where it can be ("Stream objects, proven by loads"). What stays in Go: loading the driver
 * and resolving these entry points, the first validation of a device's handles and whatever
 * the loads cannot prove, synchronizing streams, captures, graphs, compiles, and everything
 * else; Python calls those through gopy (_core.py), after the same gate. Errors from Go
 * reach Python through sb_raise too (scripts/gopy-fixups.py routes gopy's generated error
 * path there).
 *
 * The GIL: a query keeps it (it never blocks); an enqueue keeps it unless a Python host
 * callback is waiting for it (ENQUEUE); a synchronize releases it.
 *
 * scripts/build-native.sh builds this file into the extension with gopy's generated code;
 * sb_core_module returns the module object. tables.h is generated from Go
 * (internal/boundary).
 */
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "tables.h"

/* ---- Entry points ---- */

typedef int (*stream_fn)(uintptr_t);                                /* cuStreamQuery */
typedef int (*event_fn)(uintptr_t);                                 /* cuEventQuery */
typedef int (*record_fn)(uintptr_t, uintptr_t);                     /* cuEventRecord(event, stream) */
typedef int (*wait_fn)(uintptr_t, uintptr_t, unsigned int);         /* cuStreamWaitEvent */
typedef int (*host_fn_launch)(uintptr_t, void (*)(void *), void *); /* cuLaunchHostFunc */
typedef int (*launch_fn)(uintptr_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         uintptr_t, void **, void **); /* cuLaunchKernel */
typedef int (*ctx_get_fn)(uintptr_t *);                /* cuCtxGetCurrent */
typedef int (*ctx_set_fn)(uintptr_t);                  /* cuCtxSetCurrent */
typedef int (*event_create_fn)(uintptr_t *, unsigned int);       /* cuEventCreate */
typedef int (*event_elapsed_fn)(float *, uintptr_t, uintptr_t);  /* cuEventElapsedTime */
typedef int (*ipc_get_fn)(unsigned char *, uintptr_t);          /* cuIpcGetEventHandle (64 bytes out) */
typedef int (*stream_create_fn)(uintptr_t *, unsigned int, int); /* cuStreamCreateWithPriority */
typedef int (*priority_range_fn)(int *, int *);                  /* cuCtxGetStreamPriorityRange */
typedef int (*capture_info_fn)(uintptr_t, int *, unsigned long long *, uintptr_t *, const void **,
                               size_t *);                     /* cuStreamGetCaptureInfo (_v2) */
typedef int (*user_object_create_fn)(uintptr_t *, void *, void (*)(void *), unsigned int,
                                     unsigned int);                     /* cuUserObjectCreate */
typedef int (*user_object_release_fn)(uintptr_t, unsigned int);        /* cuUserObjectRelease */
typedef int (*graph_retain_fn)(uintptr_t, uintptr_t, unsigned int, unsigned int); /* cuGraphRetainUserObject */
typedef int (*end_capture_fn)(uintptr_t, uintptr_t *);                 /* cuStreamEndCapture */
typedef int (*graph_destroy_fn)(uintptr_t);                             /* cuGraphDestroy */
typedef int (*capture_mode_fn)(int *);                                  /* cuThreadExchangeStreamCaptureMode */

static void *entry[SB_ENTRY_COUNT];
#define CALL(name, type) ((type)entry[SB_##name])

/* ---- Errors ---- */

static PyObject *error_classes[SB_KIND_COUNT]; /* by kind, from set_error_classes */

static int set_attr_long(PyObject *o, const char *attr, long long v) {
    PyObject *x = PyLong_FromLongLong(v);
    int r = x == NULL ? -1 : PyObject_SetAttrString(o, attr, x);
    Py_XDECREF(x);
    return r;
}

static int set_attr_str(PyObject *o, const char *attr, const char *v) {
    PyObject *x = PyUnicode_FromString(v ? v : "");
    int r = x == NULL ? -1 : PyObject_SetAttrString(o, attr, x);
    Py_XDECREF(x);
    return r;
}

/* The exception of kind with message, carrying code, name and log where its class is one of
 * streambridge's CUDA errors. Called with the GIL held, from here and from Go (gopy's
 * generated error path, through scripts/gopy-fixups.py). */
void sb_raise(int kind, long long code, const char *name, const char *message, const char *log) {
    PyObject *cls = kind >= 0 && kind < SB_KIND_COUNT && error_classes[kind] != NULL ? error_classes[kind]
                                                                                     : PyExc_RuntimeError;
    PyObject *exc = PyObject_CallFunction(cls, "s", message);
    if (exc == NULL)
        return;
    PyObject *cuda = error_classes[SB_KIND_CUDA];
    if (cuda != NULL && PyObject_IsInstance(exc, cuda) == 1) {
        int failed = set_attr_long(exc, "code", code) < 0 || set_attr_str(exc, "name", name) < 0 ||
                     (log != NULL && log[0] != '\0' && set_attr_str(exc, "log", log) < 0);
        if (failed) {
            Py_DECREF(exc);
            return;
        }
    }
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

/* Go's name for a CUresult (pyshim.ResultName, through gopy's export; the string is ours). */
extern char *pyshim_ResultName(long long code);

/* Raises the typed error of a driver call that returned r, saying why where the core knows
 * (said; NULL: the result's name); returns NULL. */
static PyObject *raise_result_why(const char *call, int r, const char *said) {
    char *name = pyshim_ResultName(r);
    PyErr_Clear(); /* the name is a nicety: its lookup never hides the error itself */
    char message[256];
    snprintf(message, sizeof message, "%s: %s", call, said ? said : name ? name : "");
    sb_raise(r == SB_CUDA_ERROR_INVALID_HANDLE ? SB_KIND_INVALID_HANDLE : SB_KIND_CUDA, r, name, message, "");
    free(name);
    return NULL;
}

static PyObject *raise_result(const char *call, int r) { return raise_result_why(call, r, NULL); }

static PyObject *set_error_classes(PyObject *self, PyObject *classes) {
    if (!PyTuple_Check(classes) || PyTuple_GET_SIZE(classes) != SB_KIND_COUNT) {
        PyErr_Format(PyExc_TypeError, "set_error_classes takes a tuple of %d exception classes", SB_KIND_COUNT);
        return NULL;
    }
    for (int i = 0; i < SB_KIND_COUNT; i++) {
        PyObject *c = PyTuple_GET_ITEM(classes, i);
        if (!PyExceptionClass_Check(c)) {
            PyErr_Format(PyExc_TypeError, "error kind %d: %R is not an exception class", i, c);
            return NULL;
        }
    }
    for (int i = 0; i < SB_KIND_COUNT; i++)
        Py_XSETREF(error_classes[i], Py_NewRef(PyTuple_GET_ITEM(classes, i)));
    Py_RETURN_NONE;
}

/* ---- The gate: what no call may be ---- */

static volatile int forked;             /* set in a child made by fork() */
static PyObject *initializer;           /* loads the driver and calls init: the first gate runs it */
static __thread int in_callback;        /* this thread runs a Python host callback now */

static void mark_forked(void) { forked = 1; }

/* 1 if a call may go on; else 0 with the typed error set. */
static int gate(void) {
    if (forked) {
        sb_raise(SB_KIND_FORKED, 0, "", "streambridge cannot be used in a process made by fork(): the CUDA driver "
                 "and streambridge's Go runtime do not survive it (a call could hang). Start worker processes with the "
                 "'spawn' method (multiprocessing.get_context('spawn')) and use streambridge there.", "");
        return 0;
    }
    if (in_callback) {
        sb_raise(SB_KIND_IN_CALLBACK, 0, "", "streambridge was called from inside a host callback: the driver runs "
                 "host callbacks one at a time on its own thread, and a call that enters the driver from there can "
                 "deadlock. Do the work after the stream's work instead (record an event and wait for it elsewhere).",
                 "");
        return 0;
    }
    if (entry[SB_cuStreamQuery] == NULL) { /* the first call: the driver is loaded now, not at import */
        if (initializer == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "streambridge's core has no initializer");
            return 0;
        }
        PyObject *r = PyObject_CallNoArgs(initializer); /* raises NoDriverError where there is none */
        if (r == NULL)
            return 0;
        Py_DECREF(r);
        if (entry[SB_cuStreamQuery] == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "streambridge's core initializer did not call init");
            return 0;
        }
    }
    return 1;
}

static PyObject *py_gate(PyObject *self, PyObject *unused) {
    if (!gate())
        return NULL;
    Py_RETURN_NONE;
}

/* ---- Contexts: a special handle means its context's default stream ---- */

typedef struct {
    uintptr_t prev;
    int switched;
} ctx_scope;

/* Makes ctx current on this thread for a call on a special handle (ctx 0: nothing to do). */
static int ctx_enter(uintptr_t ctx, ctx_scope *sc) {
    sc->switched = 0;
    if (ctx == 0)
        return 0;
    int r = CALL(cuCtxGetCurrent, ctx_get_fn)(&sc->prev);
    if (r != 0 || sc->prev == ctx)
        return r;
    r = CALL(cuCtxSetCurrent, ctx_set_fn)(ctx);
    sc->switched = r == 0;
    return r;
}

static void ctx_leave(ctx_scope *sc) {
    if (sc->switched)
        CALL(cuCtxSetCurrent, ctx_set_fn)(sc->prev);
}

/* ---- Objects ---- */

typedef struct {
    PyObject_HEAD
    unsigned long long ptr;   /* the CUstream */
    unsigned long long ctx;   /* its context where ptr is a special handle (0, 1, 2); else 0 */
    unsigned long long fence; /* the CUevent wait_stream records on this stream; 0 until made */
    unsigned long long id;    /* a borrowed stream object's identity (cuStreamGetId); else 0 */
    long long device;         /* its device; -1 until known */
    long long key;            /* its Go stream's key, for the calls that go through Go; 0 until needed */
    char open;                /* usable: made, and not closed */
    char owned;               /* made by the core (cuStreamCreateWithPriority): destroyed on close */
    char closing;             /* closed while busy: the last call out releases (see hold) */
    char counted;             /* a capture begun here through streambridge may be going on (see captures) */
    char vouched;             /* taken on its wrapper's word where it could not be proven (see fill_external) */
    int busy;                 /* calls on it in flight with the GIL let go (see hold) */
    PyObject *owner;          /* what a borrowed stream came from, kept alive with it; or NULL */
} StreamCore;

typedef struct {
    PyObject_HEAD
    unsigned long long eptr; /* the CUevent: owned, destroyed on close; or borrowed; 0 until made */
    unsigned long long ctx;  /* its device's primary context, where it was made */
    unsigned long long id;   /* a borrowed event's identity (driver.EventMemory); 0 for an owned one */
    PyObject *owner;         /* what a borrowed event came from, kept alive with it; or NULL */
    long long device;        /* its device */
    char open;               /* usable: made, and not closed */
    char timing;             /* made without CU_EVENT_DISABLE_TIMING */
    char interprocess;       /* made with CU_EVENT_INTERPROCESS, or opened from another process */
    char recorded;           /* recorded by streambridge at least once (what elapsed_time's error says) */
    char closing;            /* closed while busy: the last call out destroys it (see hold) */
    int busy;                /* calls on it in flight with the GIL let go (see hold) */
    PyObject *captured_on;   /* the StreamCore whose capture, begun through streambridge, took the
                                last record, while it may go on (see event_not_captured); or NULL */
} EventCore;

/* A module compiled and loaded by Go, under its key. A launch that lets the GIL go holds
 * it (busy), as a stream is held (see Holds): a close meanwhile marks it closed, and the
 * last launch out releases the key, which unloads it. */
typedef struct {
    PyObject_HEAD
    long long key; /* the Go module's key; 0 once released */
    int busy;      /* launches of its kernels in flight with the GIL let go */
    char closed;
} ModuleCore;

typedef struct {
    PyObject_HEAD
    unsigned long long fn;  /* the CUfunction */
    unsigned long long ctx; /* its module's context: a launch needs it current on the thread */
    long long device;       /* its module's device */
    PyObject *module;       /* the ModuleCore that owns fn, kept alive by the kernel */
} KernelCore;

static PyTypeObject StreamCoreType, ExternalCoreType, OwnedCoreType, EventCoreType, KernelCoreType, ModuleCoreType;
static PyObject *name_record, *name_wait, *name_call, *name_stream, *name_shared_mem,
    *name_cuda_stream;

/* pyshim.VerifyStream: a borrowed handle is still the live stream of identity id; on
 * failure the typed error is set (InvalidHandleError: destroyed, or its address reused). */
extern char pyshim_VerifyStream(unsigned long long handle, unsigned long long id);
/* pyshim.WrapStream, StreamFence: a Go stream borrowing a handle, and the event its
 * wait_stream records (see stream_key, make_fence); on failure the typed error is set. */
extern long long pyshim_WrapStream(unsigned long long handle, long long device, long long convention, char vouched);
extern unsigned long long pyshim_StreamFence(long long key);
/* pyshim.StreamMemory: where the driver's stream objects are and how they name themselves. */
extern char pyshim_StreamMemory(unsigned long long out);

/* ---- Stream objects, proven by loads ----
 * A foreign handle must be proven a live stream before the driver sees it: the driver
 * dereferences it, and a garbage or freed handle kills the process. The driver says where
 * its stream blocks and objects lie and which words of an object hold its handle (a
 * back-pointer), its context and its identity (driver.StreamMemory). The real one keeps them
 * in the process's brk heap (seen with streams made by PyTorch, CuPy and cuda.core on an
 * H100, driver 580), memory that stays mapped between the heap's start and the current
 * break: freeing never unmaps it, only moving the break down does (glibc's trim, of free
 * memory at the top), and sbrk(0) reads the break glibc keeps, with no system call. The
 * software driver keeps them in a slab of its own. A destroyed stream's block is freed: the
 * allocator overwrites its first word, so the chain to the object breaks; a new stream at
 * the same address has another identity.
 *
 * So the core proves here, with a few loads, what lies there: a new handle (a wrap: the
 * chain leads back to it, from a device's primary context the core knows), and before each
 * use of a borrowed stream its identity. What it cannot prove goes to the Go check, which
 * reads memory fault-safely and says what is wrong (a garbage handle, the block of a stream
 * made on another thread, in that thread's arena, a context the core has not met yet).
 *
 * Left: a stream destroyed and then used while another thread's free() trims the heap top
 * over its block in the nanoseconds between the bound and the load would fault. The Go
 * check has the like (a SIGSEGV handler installed between its look and its loads). */

static int memory_state;                              /* 0 not asked yet, 1 known, -1 none */
static unsigned long long stream_memory[SB_MEM_COUNT]; /* as pyshim.StreamMemory writes it */

/* After a wrap, when the Go core has learned the driver's layout. */
static void learn_stream_memory(void) {
    if (memory_state == 0)
        memory_state = pyshim_StreamMemory((uintptr_t)stream_memory) ? 1 : -1;
}

/* The end of the memory the driver says stays mapped: its Hi, or else the program break,
 * read once per check (it only grows between here and the loads, short of the race above). */
static uintptr_t mapped_end(unsigned long long hi) { return hi ? (uintptr_t)hi : (uintptr_t)sbrk(0); }

/* Whether [a, a+n) lies in [lo, hi), 8-aligned. */
static int within(uintptr_t a, uintptr_t n, uintptr_t lo, uintptr_t hi) {
    return a >= lo && a % 8 == 0 && a < hi && n <= hi - a;
}

/* The stream object handle h's block leads to, where both lie in memory the driver says
 * stays mapped; NULL where that is not provable here. */
static const volatile uint64_t *stream_object(uintptr_t h) {
    if (memory_state != 1)
        return NULL;
    uintptr_t lo = stream_memory[SB_MEM_LO], hi = mapped_end(stream_memory[SB_MEM_HI]);
    if (!within(h, 8, lo, hi))
        return NULL;
    uintptr_t obj = *(volatile uintptr_t *)h;
    if (!within(obj, stream_memory[SB_MEM_WORDS] * 8, lo, hi))
        return NULL;
    return (const volatile uint64_t *)obj;
}

/* 1: the stream object at s->ptr still is the stream s wrapped; 0: it is not (the typed
 * error set); -1: not provable from here. */
static int identity_holds(StreamCore *s) {
    const volatile uint64_t *o = stream_object(s->ptr);
    if (o == NULL)
        return -1;
    uint64_t back = o[stream_memory[SB_MEM_BACK]], id = o[stream_memory[SB_MEM_ID]];
    if (back == s->ptr && id == s->id)
        return 1;
    char message[256];
    if (back == s->ptr)
        snprintf(message, sizeof message, SB_STREAM_REUSED_MESSAGE, s->ptr, (unsigned long long)id, s->id);
    else
        snprintf(message, sizeof message, SB_STREAM_GONE_MESSAGE, s->ptr);
    sb_raise(SB_KIND_INVALID_HANDLE, SB_CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", message, "");
    return 0;
}

/* What every operation on a stream checks: open, and, borrowed, still the stream it was
 * when wrapped (identity, not address: a destroyed stream's address can come back as a new
 * stream's). */
static int stream_usable(StreamCore *s) {
    if (!s->open) {
        sb_raise(SB_KIND_CLOSED, 0, "", "the stream was closed", "");
        return 0;
    }
    if (s->id != 0) {
        int holds = identity_holds(s);
        if (holds >= 0)
            return holds;
        pyshim_VerifyStream(s->ptr, s->id);
        if (PyErr_Occurred())
            return 0;
    }
    return 1;
}

/* The key of s's Go stream, for the calls that go through Go: made on the first (a Go
 * stream borrowing the handle, proven again there; the core keeps what it made), released
 * by s's close. 0 with the error set. */
static long long stream_key(StreamCore *s) {
    if (s->key != 0)
        return s->key;
    if (!gate() || !stream_usable(s))
        return 0;
    long long key = pyshim_WrapStream(s->ptr, s->device, SB_CONVENTION_RUNTIME, s->vouched || s->owned); /* ours: live */
    if (PyErr_Occurred())
        return 0;
    s->key = key;
    return key;
}

/* s's fence, the event wait_stream records on s: made once, in Go, and kept by s's Go stream
 * (pooled per context when it closes). 0 with the error set. */
static int make_fence(StreamCore *s) {
    long long key = stream_key(s);
    if (key == 0)
        return 0;
    uintptr_t f = (uintptr_t)pyshim_StreamFence(key);
    if (PyErr_Occurred())
        return 0;
    s->fence = f;
    return 1;
}

/* ---- Event objects, proven by loads ----
 * A foreign CUevent must be proven a live event before the driver sees it, as a stream
 * must (a garbage CUevent kills the process in cuEventQuery). The driver says which words
 * of an event object hold its context, its identity (a number it gives each event it
 * makes, never reused) and the events made after and before it in that context, a list a
 * live event is in: a neighbour points back to it (driver.EventMemory). A destroyed event
 * has left the list; a new event at its address has another identity. What the loads
 * cannot prove here (memory outside the heap, an event alone in its context) goes to the
 * Go check (internal/cuda/validate_event.go), which reads fault-safely and says what is
 * wrong. */

extern long long pyshim_CheckEvent(unsigned long long handle, long long device, unsigned long long id_out,
                                   char vouched);
extern char pyshim_VerifyEvent(unsigned long long handle, unsigned long long id);
extern char pyshim_EventMemory(unsigned long long out);

static int event_memory_state;                            /* 0 not asked yet, 1 known, -1 none */
static unsigned long long event_memory[SB_EVMEM_COUNT]; /* as pyshim.EventMemory writes it */

static void learn_event_memory(void) {
    if (event_memory_state == 0)
        event_memory_state = pyshim_EventMemory((uintptr_t)event_memory) ? 1 : -1;
}

/* The event object at h, where it and a neighbour that points back to it lie in memory the
 * driver says stays mapped, and every neighbour it names points back; NULL where that is
 * not provable here. */
static const volatile uint64_t *event_object(uintptr_t h) {
    if (event_memory_state != 1)
        return NULL;
    uintptr_t lo = event_memory[SB_EVMEM_LO], hi = mapped_end(event_memory[SB_EVMEM_HI]);
    uintptr_t words = event_memory[SB_EVMEM_WORDS];
    if (!within(h, words * 8, lo, hi))
        return NULL;
    const volatile uint64_t *o = (const volatile uint64_t *)h;
    uintptr_t next = o[event_memory[SB_EVMEM_NEXT]], prev = o[event_memory[SB_EVMEM_PREV]];
    if (next == 0 && prev == 0)
        return NULL;
    if (next != 0 && (!within(next, words * 8, lo, hi) ||
                      ((const volatile uint64_t *)next)[event_memory[SB_EVMEM_PREV]] != h))
        return NULL;
    if (prev != 0 && (!within(prev, words * 8, lo, hi) ||
                      ((const volatile uint64_t *)prev)[event_memory[SB_EVMEM_NEXT]] != h))
        return NULL;
    return o;
}

/* What every operation on an event checks: open, and, borrowed, still the event it was
 * when wrapped (its context and identity at its address, in its context's list). */
static int event_usable(EventCore *e) {
    if (!e->open) {
        sb_raise(SB_KIND_CLOSED, 0, "", "the event was closed", "");
        return 0;
    }
    if (e->id == 0 || e->id == SB_VOUCHED_EVENT_ID) /* owned, or taken on its wrapper's word */
        return 1;
    const volatile uint64_t *o = event_object(e->eptr);
    if (o != NULL && o[event_memory[SB_EVMEM_CTX]] == e->ctx && o[event_memory[SB_EVMEM_ID]] == e->id)
        return 1;
    pyshim_VerifyEvent(e->eptr, e->id); /* not provable here: the Go check says what is wrong */
    return !PyErr_Occurred();
}

/* The checks of a call on a stream and an event. */
static int both_usable(StreamCore *s, EventCore *e) { return gate() && stream_usable(s) && event_usable(e); }

/* ---- Holds: no close under a call in flight ----
 * A call that lets the GIL go while the driver has a handle of an object's (a synchronize,
 * an enqueue behind a waiting host callback, a call into Go under the stream's key) holds
 * the object first and lets go after it took the GIL back. A close on another thread meets
 * a held object: it marks it closed, so no new call begins, and the last call out does the
 * release (stream_release, event_release), after cuda.core's resource handles: while a
 * call has the handle, it is valid. A close never waits for a call (a host callback that
 * closes the stream whose synchronize waits for it would deadlock). Counts change only
 * with the GIL held: the calls that keep it, the frequent ones, pay nothing. */
static int stream_release(StreamCore *s, int made);
static int event_release(EventCore *e);

/* release, run where a call's own result or error stands: the release's error has no caller
 * and goes to sys.unraisablehook, as a failed close in a destructor's does. */
#define RELEASE_QUIETLY(obj, release)                                                      \
    do {                                                                                   \
        PyObject *type_, *value_, *tb_;                                                    \
        PyErr_Fetch(&type_, &value_, &tb_);                                                \
        if ((release) < 0)                                                                 \
            PyErr_WriteUnraisable((PyObject *)(obj));                                      \
        PyErr_Restore(type_, value_, tb_);                                                 \
    } while (0)

static void stream_hold(StreamCore *s) { s->busy++; }

static void stream_let_go(StreamCore *s) {
    if (--s->busy > 0 || !s->closing)
        return;
    int made = s->closing == 2;
    s->closing = 0;
    RELEASE_QUIETLY(s, stream_release(s, made));
}

static void event_hold(EventCore *e) { e->busy++; }

static void event_let_go(EventCore *e) {
    if (--e->busy > 0 || !e->closing)
        return;
    e->closing = 0;
    RELEASE_QUIETLY(e, event_release(e));
}

/* Python host callbacks that may be waiting for the GIL: those launched (host_call_on) that
 * have not yet taken it, and those captured into a graph that is alive (any replay may run
 * them, whoever launches it). */
static atomic_long host_calls_waiting;

/* r = expr, an enqueue (record, wait, launch): it never waits for the GPU, but can block
 * while the stream's queue is full. With no Python host callback waiting for the GIL, it is
 * called with the GIL held, as CuPy calls cuEventRecord and cuStreamWaitEvent (releasing and
 * taking back the GIL would cost more than the call); with one waiting, the GIL is released
 * first, for a full queue may drain only once that callback ran, and the objects the call
 * uses are held meanwhile (hold; let_go: see Holds). */
#define ENQUEUE(r, expr, hold, let_go)                                                      \
    do {                                                                                   \
        if (atomic_load_explicit(&host_calls_waiting, memory_order_acquire) == 0) {        \
            r = (expr);                                                                    \
        } else {                                                                           \
            hold;                                                                          \
            Py_BEGIN_ALLOW_THREADS r = (expr);                                             \
            Py_END_ALLOW_THREADS                                                           \
            let_go;                                                                        \
        }                                                                                  \
    } while (0)

/* cuEventRecord(event, s) in s's context (an enqueue: see ENQUEUE). */
static int record_in(StreamCore *s, uintptr_t event) {
    ctx_scope sc;
    int r = ctx_enter(s->ctx, &sc);
    if (r == 0)
        r = CALL(cuEventRecord, record_fn)(event, s->ptr);
    ctx_leave(&sc);
    return r;
}

/* cuStreamWaitEvent(s, event, 0) in s's context (an enqueue: see ENQUEUE). */
static int wait_in(StreamCore *s, uintptr_t event) {
    ctx_scope sc;
    int r = ctx_enter(s->ctx, &sc);
    if (r == 0)
        r = CALL(cuStreamWaitEvent, wait_fn)(s->ptr, event, 0);
    ctx_leave(&sc);
    return r;
}

/* captures counts the streams on which a capture begun through streambridge (_capture) may
 * be going on (StreamCore.counted), under the GIL: while any, a query first asks whether its
 * stream captures and refuses (CaptureError), as the driver would refuse it too and
 * invalidate the capture, and a record notes an event recorded into such a capture (see
 * event_not_captured). While none, each costs a load. */
static int captures;

static int capture_info(StreamCore *s, int *status, uintptr_t *graph);

static void count_capture(StreamCore *s, int capturing) {
    if (capturing && !s->counted)
        captures++;
    else if (!capturing && s->counted)
        captures--;
    s->counted = (char)capturing;
}

/* The one record of an event on a stream. The driver refuses an event of another device's
 * context with a bare CUDA_ERROR_INVALID_HANDLE; the devices are compared first, to say so.
 * (A wait may cross devices: the driver allows it.) */
static PyObject *do_record(EventCore *e, StreamCore *s) {
    if (!both_usable(s, e))
        return NULL;
    if (s->device != e->device) {
        char message[160];
        snprintf(message, sizeof message, "the event was made on device %lld, the stream is on device %lld: "
                 "an event is recorded on a stream of its own device", e->device, s->device);
        sb_raise(SB_KIND_DEVICE_MISMATCH, 0, "", message, "");
        return NULL;
    }
    int r;
    ENQUEUE(r, record_in(s, e->eptr), (stream_hold(s), event_hold(e)), (stream_let_go(s), event_let_go(e)));
    if (r != 0)
        return raise_result("cuEventRecord", r);
    e->recorded = 1;
    if (captures > 0 && s->counted)
        Py_XSETREF(e->captured_on, Py_NewRef((PyObject *)s));
    else if (e->captured_on != NULL)
        Py_CLEAR(e->captured_on);
    return Py_NewRef(Py_None);
}

/* The one wait of a stream for an event. */
static PyObject *do_wait(StreamCore *s, EventCore *e) {
    if (!both_usable(s, e))
        return NULL;
    int r;
    ENQUEUE(r, wait_in(s, e->eptr), (stream_hold(s), event_hold(e)), (stream_let_go(s), event_let_go(e)));
    return r == 0 ? Py_NewRef(Py_None) : raise_result("cuStreamWaitEvent", r);
}

/* The Python method `name` of self (its argument handling: defaults, keywords, other
 * frameworks' objects), with the call's own arguments; it comes back here for the driver. */
static PyObject *python_method(PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    PyObject *small[10];
    Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject **buf = total + 2 <= 10 ? small : PyMem_Malloc((total + 2) * sizeof(PyObject *));
    if (buf == NULL)
        return PyErr_NoMemory();
    PyObject **call = buf + 1; /* one slot before, which PY_VECTORCALL_ARGUMENTS_OFFSET lets the callee use */
    call[0] = self;
    if (total > 0)
        memcpy(call + 1, args, total * sizeof(PyObject *));
    PyObject *r = PyObject_VectorcallMethod(name, call, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    if (buf != small)
        PyMem_Free(buf);
    return r;
}

/* One positional argument of type, and no keywords: the form the driver path takes. */
static PyObject *only_arg(PyTypeObject *type, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs != 1 || kwnames != NULL || !PyObject_TypeCheck(args[0], type))
        return NULL;
    return args[0];
}

/* -- StreamCore methods -- */

/* relaxed calls fn(handle), a query or a synchronize of a stream or an event, with the
 * thread's capture mode relaxed for the call, as driver.API's StreamQuery does: a capture
 * that another thread (torch's, CuPy's, ours) runs in global mode is then not invalidated
 * by a call that cannot touch it, where in the thread's own mode the driver refuses the
 * call and invalidates the capture. What any mode forbids (the capturing stream itself, an
 * event recorded in the capture) the driver still refuses. */
static int relaxed(stream_fn fn, uintptr_t handle) {
    int mode = SB_CAPTURE_MODE_RELAXED;
    int r = CALL(cuThreadExchangeStreamCaptureMode, capture_mode_fn)(&mode);
    if (r != 0)
        return r;
    r = fn(handle);
    CALL(cuThreadExchangeStreamCaptureMode, capture_mode_fn)(&mode); /* the mode it had */
    return r;
}

static PyObject *stream_query(PyObject *self, PyObject *unused) {
    StreamCore *s = (StreamCore *)self;
    if (!gate() || !stream_usable(s))
        return NULL;
    ctx_scope sc;
    int status = 0;
    int r = ctx_enter(s->ctx, &sc); /* a query never blocks: the GIL stays */
    if (r == 0 && captures > 0) {
        uintptr_t graph;
        r = capture_info(s, &status, &graph);
        if (r == 0 && status == 0)
            count_capture(s, 0); /* ended elsewhere */
    }
    if (r == 0 && status == 0)
        r = relaxed(CALL(cuStreamQuery, stream_fn), s->ptr);
    ctx_leave(&sc);
    if (status != 0) {
        sb_raise(SB_KIND_CAPTURE, 0, "", "the stream is capturing: a query would invalidate the capture", "");
        return NULL;
    }
    if (r == 0)
        Py_RETURN_TRUE;
    if (r == SB_CUDA_ERROR_NOT_READY)
        Py_RETURN_FALSE;
    return raise_result("cuStreamQuery", r);
}

/* record(event=None, options=None): an Event goes straight to the driver; anything else to
 * the Python _record, which makes or refuses the event and comes back with one. */
static PyObject *stream_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    EventCore *e = (EventCore *)only_arg(&EventCoreType, args, nargs, kwnames);
    if (e == NULL)
        return python_method(self, name_record, args, nargs, kwnames);
    PyObject *r = do_record(e, (StreamCore *)self);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    return Py_NewRef((PyObject *)e);
}

static PyObject *stream_wait_event(PyObject *self, PyObject *event) {
    if (!PyObject_TypeCheck(event, &EventCoreType)) {
        PyErr_Format(PyExc_TypeError, "wait_event takes a streambridge Event, not %.100s", Py_TYPE(event)->tp_name);
        return NULL;
    }
    return do_wait((StreamCore *)self, (EventCore *)event);
}

/* wait_stream(other): other's fence recorded on other, then waited on by self: each in its
 * own stream's context (two enqueues: see ENQUEUE). */
static PyObject *stream_wait_stream(PyObject *self, PyObject *other_obj) {
    StreamCore *s = (StreamCore *)self, *o = (StreamCore *)other_obj;
    if (!PyObject_TypeCheck(other_obj, &StreamCoreType)) {
        PyErr_Format(PyExc_TypeError, "wait_stream takes a streambridge stream, not %.100s: borrow another "
                     "framework's stream with streambridge.as_stream(obj), or call wait(obj), which does",
                     Py_TYPE(other_obj)->tp_name);
        return NULL;
    }
    if (!gate() || !stream_usable(s) || !stream_usable(o))
        return NULL;
    if (o->fence == 0 && !make_fence(o)) /* made once per stream, in Go (a setup call) */
        return NULL;
    int second = 0, r;
    stream_hold(s); /* across both enqueues: o's fence is o's until o is released */
    stream_hold(o);
    ENQUEUE(r, record_in(o, o->fence), (void)0, (void)0);
    if (r == 0) {
        second = 1;
        ENQUEUE(r, wait_in(s, o->fence), (void)0, (void)0);
    }
    stream_let_go(o);
    stream_let_go(s);
    return r == 0 ? Py_NewRef(Py_None) : raise_result(second ? "cuStreamWaitEvent" : "cuEventRecord", r);
}

/* The one question of a stream's capture (cuStreamGetCaptureInfo), asked in the caller's
 * context scope: its status (CUstreamCaptureStatus: 0 none, 1 active, 2 invalidated) and,
 * while a capture is active, the graph it adds to. */
static int capture_info(StreamCore *s, int *status, uintptr_t *graph) {
    *status = 0;
    *graph = 0;
    return CALL(cuStreamGetCaptureInfo, capture_info_fn)(s->ptr, status, NULL, graph, NULL, NULL);
}

/* Whether s is capturing (a capture active, or invalidated and not yet ended), in s's
 * context; -1 with the error set. A query: the GIL stays. */
static int capturing(StreamCore *s) {
    ctx_scope sc;
    int status = 0;
    uintptr_t graph;
    int r = ctx_enter(s->ctx, &sc);
    if (r == 0)
        r = capture_info(s, &status, &graph);
    ctx_leave(&sc);
    if (r != 0) {
        raise_result("cuStreamGetCaptureInfo", r);
        return -1;
    }
    return status != 0;
}

/* ---- Waiting: synchronize, which Ctrl-C ends ----
 * Python runs signal handlers on its main thread, between bytecodes: a wait in the driver
 * (cuStreamSynchronize, cuEventSynchronize) would keep a Ctrl-C pending until the GPU is
 * done. So on the main thread a wait polls (relaxed, as every query), the GIL let go, and
 * every WAIT_CHECK_S takes the GIL to run the handlers: a KeyboardInterrupt (whatever the
 * SIGINT handler raises) ends the wait; the work goes on and the object stays usable. For
 * its first WAIT_SPIN_S it polls back to back, as the driver's own spin does; after that
 * it naps between polls for a two-hundredth of the time waited so far (10 us to 1 ms), with
 * the thread's timer slack (50 us by default, which each nap overslept by) at 1 us for the
 * wait, so it answers at most about 0.5% after the work ends. Other threads, where no
 * handler runs, wait in the driver. */
#define WAIT_CHECK_S 0.1
#define WAIT_SPIN_S 0.002

static unsigned long main_thread; /* threading.main_thread().ident, read at import */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int in_context(stream_fn fn, uintptr_t handle, uintptr_t ctx) {
    ctx_scope sc;
    int r = ctx_enter(ctx, &sc);
    if (r == 0)
        r = relaxed(fn, handle);
    ctx_leave(&sc);
    return r;
}

/* wait_for waits until handle's work is done: query is its cuStreamQuery or cuEventQuery,
 * block its cuStreamSynchronize or cuEventSynchronize, ctx the context they need current
 * (0: none). The caller holds the object (see Holds) and the GIL. Returns the driver's
 * result, or -1 with the error set where a signal handler raised. */
static int wait_for(stream_fn query, stream_fn block, uintptr_t handle, uintptr_t ctx) {
    int r;
    if (PyThread_get_thread_ident() != main_thread) {
        Py_BEGIN_ALLOW_THREADS
        r = in_context(block, handle, ctx);
        Py_END_ALLOW_THREADS
        return r;
    }
    r = in_context(query, handle, ctx);
    if (r != SB_CUDA_ERROR_NOT_READY)
        return r;
    double start = now_s(), check = start + WAIT_CHECK_S;
    int slack = -1; /* the thread's timer slack before the naps, once they begin */
    PyThreadState *ts = PyEval_SaveThread();
    while ((r = in_context(query, handle, ctx)) == SB_CUDA_ERROR_NOT_READY) {
        double t = now_s(), waited = t - start;
        if (waited > WAIT_SPIN_S) {
            if (slack < 0) {
                slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
                if (slack > 0)
                    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
                else
                    slack = 0; /* not to be had: nap with the slack the thread has */
            }
            double nap = waited / 200 < 10e-6 ? 10e-6 : waited / 200 > 1e-3 ? 1e-3 : waited / 200;
            struct timespec ns = {0, (long)(nap * 1e9)};
            nanosleep(&ns, NULL);
            t = now_s();
        }
        if (t >= check) {
            PyEval_RestoreThread(ts);
            int raised = PyErr_CheckSignals() < 0;
            ts = PyEval_SaveThread();
            if (raised) {
                r = -1;
                break;
            }
            check = t + WAIT_CHECK_S;
        }
    }
    if (slack > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    PyEval_RestoreThread(ts);
    return r;
}

/* synchronize(): wait for all work submitted so far (see wait_for). Refused on a capturing
 * stream, whoever began the capture (CaptureError), before the driver, which would
 * invalidate the capture. */
static PyObject *stream_synchronize(PyObject *self, PyObject *unused) {
    StreamCore *s = (StreamCore *)self;
    if (!gate() || !stream_usable(s))
        return NULL;
    int cap = capturing(s);
    if (cap < 0)
        return NULL;
    if (cap) {
        sb_raise(SB_KIND_CAPTURE, 0, "", "a synchronize (cuStreamSynchronize) on a capturing stream: the driver "
                 "would invalidate the capture", "");
        return NULL;
    }
    if (s->counted)
        count_capture(s, 0); /* ended elsewhere */
    stream_hold(s);
    int r = wait_for(CALL(cuStreamQuery, stream_fn), CALL(cuStreamSynchronize, stream_fn), s->ptr, s->ctx);
    stream_let_go(s);
    if (r < 0)
        return NULL;
    return r == 0 ? Py_NewRef(Py_None) : raise_result("cuStreamSynchronize", r);
}

static PyObject *stream_is_capturing(PyObject *self, PyObject *unused) {
    StreamCore *s = (StreamCore *)self;
    if (!gate() || !stream_usable(s))
        return NULL;
    int cap = capturing(s);
    return cap < 0 ? NULL : PyBool_FromLong(cap);
}

/* ---- Host callbacks into Python ----
 * host_trampoline(userData) runs on the driver's host-function thread: it takes the GIL,
 * marks the thread (no streambridge call may enter the driver from there: see gate) and
 * calls fn(*args). An exception is reported through sys.unraisablehook and kept for
 * callback_errors(); it never reaches the driver's thread.
 *
 * A call is freed on a thread of Python's, never on the driver's (free_later): releasing
 * its arguments can call CUDA (a torch tensor's deleter does, a cuda.core Buffer's frees its
 * memory), which neither a host function nor a user object's destructor may; torch aborted
 * the process on the refusal (an H100). The interpreter's main thread frees what is queued
 * (a pending call), as does the next launch of a host callback. A call launched once is
 * queued after it ran.
 *
 * A call launched while its stream captures a graph (whoever began the capture: this
 * package, torch.cuda.graph, CuPy) becomes a host node of that graph and runs at every
 * replay. It is kept: the graph holds a CUDA user object whose destructor, host_call_free,
 * frees it. The driver calls that once the graph and every executable graph made from it
 * are destroyed and their launches have run, so the call lives exactly as long as anything
 * can still run it, whichever library owns the graph (cupy/cupy#9274 is what happens
 * without). */
typedef struct host_call {
    PyObject *fn;
    PyObject *args;
    int kept;               /* captured into a graph: freed by host_call_free, not after it runs */
    struct host_call *next; /* in freed_calls */
} host_call;

/* Calls that will not run again, to be freed by a thread of Python's (free_released_calls). */
static _Atomic(host_call *) freed_calls;
static atomic_int free_scheduled; /* a pending call to free_released_calls is queued */

static PyObject *callback_errors_list;

/* At the interpreter's exit (at_exit, from the atexit module), callbacks still queued on
 * streams must not enter Python: a thread that takes the GIL while the interpreter finalizes
 * is terminated (PyGILState_Ensure's documentation), and this one is the driver's, which runs
 * every later host function of the process. exiting is set
 * first; a thread counts itself in entering before it looks, so at_exit waits only for
 * those that looked before it was set, which run with the GIL at_exit lets go of. */
static atomic_int exiting;
static atomic_long entering;

/* python_enter takes the GIL on a driver thread (a host function, a user object's
 * destructor): 0, and nothing taken, where the interpreter is ending or gone or the
 * process is a fork child; what would have run is dropped, and nothing is freed.
 * python_leave gives it back. */
static int python_enter(PyGILState_STATE *g) {
    atomic_fetch_add(&entering, 1);
    if (atomic_load(&exiting) || !Py_IsInitialized() || forked) {
        atomic_fetch_sub(&entering, 1);
        return 0;
    }
    *g = PyGILState_Ensure();
    return 1;
}

static void python_leave(PyGILState_STATE g) {
    PyGILState_Release(g);
    atomic_fetch_sub(&entering, 1);
}

/* Frees a call (the GIL held, on a thread that may call CUDA). A kept one no longer counts
 * as one that may wait for the GIL (one launched once stopped when it took the GIL). */
static void host_call_drop(host_call *hc) {
    if (hc->kept)
        atomic_fetch_sub_explicit(&host_calls_waiting, 1, memory_order_release);
    Py_DECREF(hc->fn);
    Py_DECREF(hc->args);
    PyMem_RawFree(hc);
}

/* Frees the queued calls (the GIL held, on a thread of Python's). */
static int free_released_calls(void *unused) {
    atomic_store(&free_scheduled, 0);
    host_call *hc = atomic_exchange(&freed_calls, NULL);
    while (hc != NULL) {
        host_call *next = hc->next;
        host_call_drop(hc);
        hc = next;
    }
    return 0;
}

/* Queues hc, which will not run again, and asks the main thread to free it
 * (Py_AddPendingCall needs no GIL); at the interpreter's end, or in a fork child, it is
 * left alone. From a driver thread. */
static void free_later(host_call *hc) {
    hc->next = atomic_load(&freed_calls);
    while (!atomic_compare_exchange_weak(&freed_calls, &hc->next, hc))
        ;
    atomic_fetch_add(&entering, 1); /* at_exit waits for this, as for a trampoline */
    if (!atomic_load(&exiting) && !forked && !atomic_exchange(&free_scheduled, 1) &&
        Py_AddPendingCall(free_released_calls, NULL) != 0)
        atomic_store(&free_scheduled, 0); /* the queue was full: the next launch frees it */
    atomic_fetch_sub(&entering, 1);
}

/* The destructor of a kept call's user object: on a driver thread, once nothing can run the
 * call any more. */
static void host_call_free(void *ud) { free_later((host_call *)ud); }

static void host_trampoline(void *ud) {
    host_call *hc = (host_call *)ud;
    PyGILState_STATE g;
    if (!python_enter(&g))
        return;
    if (!hc->kept)
        atomic_fetch_sub_explicit(&host_calls_waiting, 1, memory_order_release);
    in_callback++;
    PyObject *r = PyObject_Call(hc->fn, hc->args, NULL);
    in_callback--;
    if (r == NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value != NULL) {
            if (tb != NULL)
                PyException_SetTraceback(value, tb);
            PyList_Append(callback_errors_list, value);
        }
        PyErr_Restore(type, value, tb);
        PyErr_WriteUnraisable(hc->fn);
    }
    Py_XDECREF(r);
    if (!hc->kept)
        free_later(hc);
    python_leave(g);
}


/* at_exit(): from then on queued Python host callbacks are dropped; waits (the GIL let go)
 * for those already entering, up to AT_EXIT_WAIT_S by the clock (one that never returns is
 * left to its thread), and returns how many it left so; once. A fork child has none to wait for:
 * its parent's driver threads are not in it (their count, copied at the fork, is). */
#define AT_EXIT_WAIT_S 5.0

static PyObject *fn_at_exit(PyObject *self, PyObject *unused) {
    if (atomic_exchange(&exiting, 1)) /* waited once already */
        return PyLong_FromLong(atomic_load(&entering));
    if (forked)
        return PyLong_FromLong(0);
    long left;
    Py_BEGIN_ALLOW_THREADS
    double deadline = now_s() + AT_EXIT_WAIT_S;
    while ((left = atomic_load(&entering)) > 0 && now_s() < deadline)
        usleep(1000);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(left);
}

/* CUstreamCaptureStatus, and the user-object flags (cuda.h). */
enum { CAPTURE_ACTIVE = 1, USER_OBJECT_NO_DESTRUCTOR_SYNC = 1, GRAPH_USER_OBJECT_MOVE = 1 };

/* Launches hc on s (the GIL let go, in s's context): once, or, while s captures a graph,
 * kept by that graph (see above). *owned is cleared once hc is the graph's to free, even
 * where a later step fails; the call that failed is named in *call. */
/* capture_mu makes a callback's launch (the capture's state read, the user object the
 * capture's graph retains, the launch) one step against the begin and the end of a capture
 * made through streambridge (StreamCore._capture), on any thread: an end between the read
 * and the launch destroyed the graph the user object went to (a crash), and a begin there
 * captured a callback that nothing keeps for the replays. Launches read-lock it (they do
 * not wait for each other), begins and ends write-lock it, first among those waiting (a
 * stream of launches from other threads would otherwise keep an end waiting). Taken without
 * the GIL, held for a few driver calls; never taken twice by one thread. A capture other
 * code begins or ends is not ordered by it. */
static pthread_rwlock_t capture_mu = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static int launch_host_call_locked(StreamCore *s, host_call *hc, int *owned, const char **call);

static int launch_host_call(StreamCore *s, host_call *hc, int *owned, const char **call) {
    pthread_rwlock_rdlock(&capture_mu);
    int r = launch_host_call_locked(s, hc, owned, call);
    pthread_rwlock_unlock(&capture_mu);
    return r;
}

static int launch_host_call_locked(StreamCore *s, host_call *hc, int *owned, const char **call) {
    int status, r;
    uintptr_t graph, obj = 0;
    *call = "cuStreamGetCaptureInfo";
    r = capture_info(s, &status, &graph);
    if (r == 0 && status == CAPTURE_ACTIVE) {
        hc->kept = 1;
        *call = "cuUserObjectCreate";
        r = CALL(cuUserObjectCreate, user_object_create_fn)(&obj, hc, host_call_free, 1,
                                                            USER_OBJECT_NO_DESTRUCTOR_SYNC);
        if (r != 0)
            return r;
        *owned = 0; /* from here on the user object's destructor frees hc */
        *call = "cuGraphRetainUserObject";
        r = CALL(cuGraphRetainUserObject, graph_retain_fn)(graph, obj, 1, GRAPH_USER_OBJECT_MOVE);
        if (r != 0) {
            CALL(cuUserObjectRelease, user_object_release_fn)(obj, 1);
            return r;
        }
    }
    if (r == 0) {
        *call = "cuLaunchHostFunc";
        r = CALL(cuLaunchHostFunc, host_fn_launch)(s->ptr, host_trampoline, hc);
    }
    return r;
}

/* The one enqueue of a Python host callback: fn(*args) once s's work so far has run, or at
 * every replay of the graph s is capturing. */
static PyObject *host_call_on(StreamCore *s, PyObject *fn, PyObject *args) {
    if (!PyCallable_Check(fn)) {
        Py_DECREF(args);
        PyErr_Format(PyExc_TypeError, "callback must be callable, not %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (!gate() || !stream_usable(s)) {
        Py_DECREF(args);
        return NULL;
    }
    if (atomic_load_explicit(&freed_calls, memory_order_relaxed) != NULL)
        free_released_calls(NULL);
    host_call *hc = PyMem_RawMalloc(sizeof *hc);
    if (hc == NULL) {
        Py_DECREF(args);
        return PyErr_NoMemory();
    }
    hc->fn = Py_NewRef(fn);
    hc->args = args; /* the reference is the call's */
    hc->kept = 0;
    int r, owned = 1;
    const char *call;
    ctx_scope sc;
    atomic_fetch_add_explicit(&host_calls_waiting, 1, memory_order_acq_rel); /* before it can run */
    stream_hold(s);
    Py_BEGIN_ALLOW_THREADS
    r = ctx_enter(s->ctx, &sc);
    if (r == 0)
        r = launch_host_call(s, hc, &owned, &call);
    else
        call = "cuCtxSetCurrent";
    ctx_leave(&sc);
    Py_END_ALLOW_THREADS
    stream_let_go(s);
    if (r == 0)
        Py_RETURN_NONE;
    if (owned) { /* it will never run */
        atomic_fetch_sub_explicit(&host_calls_waiting, 1, memory_order_release);
        hc->kept = 0;
        host_call_drop(hc);
    }
    return raise_result(call, r);
}

static PyObject *stream_launch_host_func(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "launch_host_func takes (callback, arg)");
        return NULL;
    }
    PyObject *a = PyTuple_Pack(1, args[1]);
    return a == NULL ? NULL : host_call_on((StreamCore *)self, args[0], a);
}

static PyObject *stream_add_callback(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add_callback takes (callback, arg)");
        return NULL;
    }
    PyObject *zero = PyLong_FromLong(0);
    PyObject *a = zero == NULL ? NULL : PyTuple_Pack(3, self, zero, args[1]);
    Py_XDECREF(zero);
    return a == NULL ? NULL : host_call_on((StreamCore *)self, args[0], a);
}

static PyObject *fn_callback_errors(PyObject *self, PyObject *unused) {
    PyObject *out = PyList_GetSlice(callback_errors_list, 0, PyList_GET_SIZE(callback_errors_list));
    if (out != NULL)
        PyList_SetSlice(callback_errors_list, 0, PyList_GET_SIZE(callback_errors_list), NULL);
    return out;
}

/* -- StreamCore type -- */

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

static int stream_close(StreamCore *s);

static void stream_core_dealloc(StreamCore *s) {
    PyObject_GC_UnTrack(s);
    if (s->key != 0 || s->open) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (stream_close(s) < 0)
            PyErr_WriteUnraisable((PyObject *)s);
        PyErr_Restore(type, value, tb);
    }
    Py_CLEAR(s->owner);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *stream_close_method(PyObject *self, PyObject *unused) {
    return stream_close((StreamCore *)self) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *stream_verify(PyObject *self, PyObject *unused);
static PyObject *stream_use(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *stream_capture(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *stream_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

static PyMethodDef stream_core_methods[] = {
    {"_verify", stream_verify, METH_NOARGS, "raises what any operation on the stream would (gate, closed, identity)"},
    {"_use", (PyCFunction)(void (*)(void))stream_use, METH_FASTCALL,
     "_use(fn, *args): fn(key, *args) under the stream's Go key, the stream held until it returns (see Holds)"},
    {"_capture", (PyCFunction)(void (*)(void))stream_capture, METH_FASTCALL,
     "_capture(fn, *args): _use for the begin and the end of a capture, ordered with callback launches (capture_mu)"},
    {"_fill", (PyCFunction)(void (*)(void))stream_fill, METH_FASTCALL,
     "_fill(ptr, device): makes a new ExternalStream of ptr on device (-1: the handle's); see fill_external"},
    {"query", stream_query, METH_NOARGS,
     "query($self, /)\n--\n\nWhether all work submitted so far has completed (cuStreamQuery)."},
    {"synchronize", stream_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\nWait for all work submitted so far (cuStreamSynchronize); other Python "
     "threads run meanwhile, and on the main thread Ctrl-C ends the wait (KeyboardInterrupt) within about 0.1 s. "
     "Refused while capturing (CaptureError): it would invalidate the capture."},
    {"is_capturing", stream_is_capturing, METH_NOARGS,
     "is_capturing($self, /)\n--\n\nWhether the stream is capturing (cuStreamGetCaptureInfo: a capture active, or "
     "invalidated and not yet ended)."},
    {"record", (PyCFunction)(void (*)(void))stream_record, METH_FASTCALL | METH_KEYWORDS,
     "record($self, /, event=None, options=None)\n--\n\nRecord ``event`` (a new one if None, made with "
     "``options``) on the stream (cuEventRecord); return it."},
    {"wait_event", stream_wait_event, METH_O,
     "wait_event($self, event, /)\n--\n\nMake work submitted from now on wait for ``event`` (cuStreamWaitEvent)."},
    {"wait_stream", stream_wait_stream, METH_O,
     "wait_stream($self, other, /)\n--\n\nMake work submitted from now on wait for ``other``'s work so far "
     "(cuEventRecord on other, cuStreamWaitEvent here)."},
    {"launch_host_func", (PyCFunction)(void (*)(void))stream_launch_host_func, METH_FASTCALL,
     "launch_host_func($self, callback, arg, /)\n--\n\nCall ``callback(arg)`` on the driver's host-function "
     "thread once the work submitted so far has completed (cuLaunchHostFunc), as CuPy's ``launch_host_func``.\n\n"
     "The callback takes the GIL there; ``arg`` is kept alive until it ran. A streambridge call inside it that "
     "would enter the driver raises CallbackReentryError (the driver runs host callbacks one at a time, and such "
     "a call can deadlock). An exception it raises is printed through ``sys.unraisablehook`` and kept for "
     ":func:`streambridge.callback_errors`.\n\nWhile the stream captures a graph (whoever began the capture), the "
     "callback becomes part of the graph: it runs at every replay, with ``arg``, and both are kept until the "
     "graph and every executable graph made from it are gone."},
    {"close", stream_close_method, METH_NOARGS,
     "close($self, /)\n--\n\nDestroy the stream if streambridge created it (cuStreamDestroy), else forget it. "
     "Idempotent."},
    {"add_callback", (PyCFunction)(void (*)(void))stream_add_callback, METH_FASTCALL,
     "add_callback($self, callback, arg, /)\n--\n\nCuPy's ``add_callback``: ``callback(stream, status, arg)`` "
     "with this stream and status 0, once the work submitted so far has completed (cuLaunchHostFunc, which has "
     "no error status: a failed stream's later work does not run at all). Captured into a graph as "
     "``launch_host_func`` is."},
    {NULL, NULL, 0, NULL},
};

/* Read-only: the core sets them (a wrong _ptr would reach the driver). _owner only keeps an
 * object alive, so Python may set it (from_external's Python reader does). */
static PyMemberDef stream_core_members[] = {
    {"_ptr", T_ULONGLONG, offsetof(StreamCore, ptr), READONLY, "the CUstream"},
    {"_ctx", T_ULONGLONG, offsetof(StreamCore, ctx), READONLY, "the context of a special handle; else 0"},
    {"_fence", T_ULONGLONG, offsetof(StreamCore, fence), READONLY, "the CUevent wait_stream records here; 0 until made"},
    {"_id", T_ULONGLONG, offsetof(StreamCore, id), READONLY, "a borrowed stream object's identity; else 0"},
    {"_device", T_LONGLONG, offsetof(StreamCore, device), READONLY, "the device; -1 until made"},
    {"_k", T_LONGLONG, offsetof(StreamCore, key), READONLY, "the Go stream's key; 0 until needed (see _key)"},
    {"_open", T_BOOL, offsetof(StreamCore, open), READONLY, "made, and not closed"},
    {"_owned", T_BOOL, offsetof(StreamCore, owned), READONLY, "made by streambridge: destroyed on close"},
    {"_owner", T_OBJECT, offsetof(StreamCore, owner), 0, "what a borrowed stream came from, kept alive with it"},
    {NULL, 0, 0, 0, NULL},
};

/* _use(fn, *args): fn(key, *args), a call into Go under the stream's Go key that lets the
 * GIL go (synchronize, a graph launch on it), with the stream held meanwhile (see Holds):
 * a close on another thread waits with the release until it returns. _capture(fn, *args)
 * is the same for the begin and the end of a capture, with capture_mu held too. */
static PyObject *use_stream(StreamCore *s, PyObject *const *args, Py_ssize_t nargs, int capture);

static PyObject *stream_use(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return use_stream((StreamCore *)self, args, nargs, 0);
}

static PyObject *stream_capture(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return use_stream((StreamCore *)self, args, nargs, 1);
}

static PyObject *use_stream(StreamCore *s, PyObject *const *args, Py_ssize_t nargs, int capture) {
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, capture ? "_capture takes (fn, *args)" : "_use takes (fn, *args)");
        return NULL;
    }
    if (!gate() || !stream_usable(s)) /* before the key: a closed stream's key lives on while it is held */
        return NULL;
    long long key = stream_key(s);
    if (key == 0)
        return NULL;
    PyObject *small[8], **call = nargs <= 8 ? small : PyMem_Malloc(nargs * sizeof(PyObject *));
    if (call == NULL)
        return PyErr_NoMemory();
    call[0] = PyLong_FromLongLong(key);
    PyObject *r = NULL;
    if (call[0] != NULL) {
        memcpy(call + 1, args + 1, (nargs - 1) * sizeof(PyObject *));
        stream_hold(s);
        if (capture) {
            Py_BEGIN_ALLOW_THREADS
            pthread_rwlock_wrlock(&capture_mu);
            Py_END_ALLOW_THREADS
        }
        r = PyObject_Vectorcall(args[0], call, (size_t)nargs, NULL);
        if (capture) {
            pthread_rwlock_unlock(&capture_mu);
            int status = 0; /* begun, ended, or refused: count what is now (see captures) */
            uintptr_t graph;
            ctx_scope sc;
            if (ctx_enter(s->ctx, &sc) == 0 && capture_info(s, &status, &graph) == 0)
                count_capture(s, status != 0);
            ctx_leave(&sc);
        }
        stream_let_go(s);
        Py_DECREF(call[0]);
    }
    if (call != small)
        PyMem_Free(call);
    return r;
}

static PyObject *stream_get_key(PyObject *self, void *unused) {
    long long key = stream_key((StreamCore *)self);
    return key == 0 ? NULL : PyLong_FromLongLong(key);
}

static PyGetSetDef stream_core_getset[] = {
    {"_key", stream_get_key, NULL,
     "the Go stream's key, for the calls that go through Go: made on the first (stream_key), released by close",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject StreamCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.StreamCore",
    .tp_basicsize = sizeof(StreamCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C core of streambridge's streams (see core.c).",
    .tp_new = stream_core_new,
    .tp_traverse = (traverseproc)stream_core_traverse,
    .tp_clear = (inquiry)stream_core_clear,
    .tp_dealloc = (destructor)stream_core_dealloc,
    .tp_free = PyObject_GC_Del,
    .tp_methods = stream_core_methods,
    .tp_members = stream_core_members,
    .tp_getset = stream_core_getset,
};

/* -- EventCore -- */

/* record(stream=None) and wait(stream=None): a stream goes straight to the driver; anything
 * else to the Python method of the same name with a leading underscore, which resolves or
 * refuses it and comes back with a stream. */
static PyObject *event_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    StreamCore *s = (StreamCore *)only_arg(&StreamCoreType, args, nargs, kwnames);
    return s != NULL ? do_record((EventCore *)self, s) : python_method(self, name_record, args, nargs, kwnames);
}

static PyObject *event_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    StreamCore *s = (StreamCore *)only_arg(&StreamCoreType, args, nargs, kwnames);
    return s != NULL ? do_wait(s, (EventCore *)self) : python_method(self, name_wait, args, nargs, kwnames);
}

/* An event whose last record went into a capture begun through streambridge has no work
 * to wait for while the capture goes on: the driver refuses its query and synchronize in
 * every capture mode (CUDA_ERROR_CAPTURED_EVENT) and invalidates the capture (seen on an
 * H200), so they are refused first (CaptureError). 0 with the error set. */
static int event_not_captured(EventCore *e, const char *what) {
    StreamCore *s = (StreamCore *)e->captured_on;
    int status = 0;
    if (s->open && s->counted) {
        if (!stream_usable(s))
            PyErr_Clear(); /* its owner destroyed it: the capture went with it */
        else if ((status = capturing(s)) < 0)
            return 0;
    }
    if (status == 0) {
        Py_CLEAR(e->captured_on);
        return 1;
    }
    char message[200];
    snprintf(message, sizeof message, "%s of an event whose last record was captured into a graph, "
             "while the capture goes on: the driver would invalidate the capture", what);
    sb_raise(SB_KIND_CAPTURE, 0, "", message, "");
    return 0;
}

static PyObject *event_query(PyObject *self, PyObject *unused) {
    EventCore *e = (EventCore *)self;
    if (!gate() || !event_usable(e))
        return NULL;
    if (e->captured_on != NULL && !event_not_captured(e, "a query (cuEventQuery)"))
        return NULL;
    int r = relaxed(CALL(cuEventQuery, event_fn), e->eptr); /* never blocks: the GIL stays */
    if (r == 0)
        Py_RETURN_TRUE;
    if (r == SB_CUDA_ERROR_NOT_READY)
        Py_RETURN_FALSE;
    return raise_result("cuEventQuery", r);
}

static PyObject *event_synchronize(PyObject *self, PyObject *unused) {
    EventCore *e = (EventCore *)self;
    if (!gate() || !event_usable(e))
        return NULL;
    if (e->captured_on != NULL && !event_not_captured(e, "a synchronize (cuEventSynchronize)"))
        return NULL;
    event_hold(e);
    int r = wait_for(CALL(cuEventQuery, event_fn), CALL(cuEventSynchronize, event_fn), e->eptr, 0);
    event_let_go(e);
    if (r < 0)
        return NULL;
    return r == 0 ? Py_NewRef(Py_None) : raise_result("cuEventSynchronize", r);
}

/* cuEventElapsedTime's CUDA_ERROR_INVALID_HANDLE, which the driver gives alike for an event
 * made without timing and for one never recorded, told apart by what the events know of
 * themselves. (An event recorded only through its handle, outside streambridge, is not
 * known to be recorded: then the driver's bare answer stands.) */
static PyObject *elapsed_refused(EventCore *start, EventCore *end) {
    EventCore *both[2] = {start, end};
    const char *names[2] = {"start", "end"};
    char said[160];
    said[0] = 0;
    for (int i = 0; i < 2 && !said[0]; i++)
        if (!both[i]->timing)
            snprintf(said, sizeof said, "the %s event was made with timing disabled (disable_timing=True, "
                     "or no timing_enabled)", names[i]);
    for (int i = 0; i < 2 && !said[0]; i++)
        if (!both[i]->recorded)
            snprintf(said, sizeof said, "the %s event was never recorded", names[i]);
    return raise_result_why("cuEventElapsedTime", SB_CUDA_ERROR_INVALID_HANDLE, said[0] ? said : NULL);
}

static PyObject *event_elapsed_time(PyObject *self, PyObject *end_obj) {
    if (!PyObject_TypeCheck(end_obj, &EventCoreType)) {
        PyErr_Format(PyExc_TypeError, "elapsed_time takes an Event, not %.100s", Py_TYPE(end_obj)->tp_name);
        return NULL;
    }
    EventCore *e = (EventCore *)self, *end = (EventCore *)end_obj;
    if (!gate() || !event_usable(e) || !event_usable(end))
        return NULL;
    float ms = 0;
    int r = CALL(cuEventElapsedTime, event_elapsed_fn)(&ms, e->eptr, end->eptr);
    if (r == 0)
        return PyFloat_FromDouble(ms);
    return r == SB_CUDA_ERROR_INVALID_HANDLE ? elapsed_refused(e, end) : raise_result("cuEventElapsedTime", r);
}

static PyObject *event_ipc_handle(PyObject *self, PyObject *unused) {
    EventCore *e = (EventCore *)self;
    if (!gate() || !event_usable(e))
        return NULL;
    unsigned char h[64];
    ctx_scope sc;
    int r = ctx_enter(e->ctx, &sc); /* the driver wants the event's context current */
    if (r == 0)
        r = CALL(cuIpcGetEventHandle, ipc_get_fn)(h, e->eptr);
    ctx_leave(&sc);
    return r == 0 ? PyBytes_FromStringAndSize((const char *)h, sizeof h) : raise_result("cuIpcGetEventHandle", r);
}

/* ---- The life of an event ----
 * The core makes, owns and destroys Python's events itself, in the primary context of
 * their device (retained by the Go core for the process), as CuPy and cuda.core do in
 * Cython: one crossing into Go per event would cost more than the event. */

#define CACHED_DEVICES 64
static uintptr_t device_ctx[CACHED_DEVICES]; /* primary contexts by device, as the Go core answered */
static long long devices_met;                 /* device_ctx[devices_met:] are all 0 */
static long long live_events;                /* made and not yet destroyed */

/* pyshim.DeviceContext, exported by gopy's generated Go; on failure the typed error is set. */
extern unsigned long long pyshim_DeviceContext(long long device);
/* pyshim.OpenIPCEvent: an event another process exported, opened; the CUevent is ours. */
extern unsigned long long pyshim_OpenIPCEvent(long long device, char *handle);

/* The primary context of device (asked of the Go core once a device); 0 with the error set. */
static uintptr_t context_of(long long device) {
    if (device >= 0 && device < CACHED_DEVICES && device_ctx[device] != 0)
        return device_ctx[device];
    uintptr_t ctx = (uintptr_t)pyshim_DeviceContext(device);
    if (PyErr_Occurred())
        return 0;
    if (device >= 0 && device < CACHED_DEVICES) {
        device_ctx[device] = ctx;
        devices_met = device + 1 > devices_met ? device + 1 : devices_met;
    }
    return ctx;
}

/* The device whose primary context is ctx, among those the core has met; -1 if none. */
static long long device_of(uintptr_t ctx) {
    for (long long d = 0; d < devices_met && ctx != 0; d++)
        if (device_ctx[d] == ctx)
            return d;
    return -1;
}

/* ---- Releases: what a close gives back ----
 * A close destroys what the core made (cuEventDestroy, cuStreamDestroy: by entry) or
 * releases a Go key (RELEASE_KEY, with its kind). Inside a host callback, where no call may
 * enter the driver, it waits for the next close outside one, in the order of the closes; in
 * a forked child, whose objects are the parent's, it is only forgotten. */

enum { RELEASE_KEY = -1 };
static PyObject *deferred; /* (what, handle or key, kind) closed inside host callbacks */

extern char pyshim_Close(long long key, long long kind);

/* Gives back now; -1 with the error set. */
/* A capture still going on on a stream about to be destroyed is ended first and its graph
 * destroyed: the graph holds the callbacks captured so far (user objects), which the
 * stream's destroy alone leaves behind for the life of the process. Its errors are not the
 * close's (the capture is lost either way); an end from another thread than a global or
 * thread-local capture's began it still ends it. Called with the GIL, which it lets go
 * while it holds capture_mu (see there). */
static void end_lost_capture(uintptr_t h) {
    int status = 0;
    uintptr_t graph = 0;
    if (CALL(cuStreamGetCaptureInfo, capture_info_fn)(h, &status, NULL, &graph, NULL, NULL) != 0 || status == 0)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_wrlock(&capture_mu);
    graph = 0;
    if (CALL(cuStreamEndCapture, end_capture_fn)(h, &graph) == 0 && graph != 0)
        CALL(cuGraphDestroy, graph_destroy_fn)(graph);
    pthread_rwlock_unlock(&capture_mu);
    Py_END_ALLOW_THREADS
}

static int release_now(int what, unsigned long long h, long long kind) {
    if (what == RELEASE_KEY) {
        pyshim_Close((long long)h, kind);
        return PyErr_Occurred() ? -1 : 0;
    }
    if (what == SB_cuStreamDestroy)
        end_lost_capture((uintptr_t)h);
    int r = ((event_fn)entry[what])((uintptr_t)h);
    if (r != 0) {
        raise_result(what == SB_cuEventDestroy ? "cuEventDestroy" : "cuStreamDestroy", r);
        return -1;
    }
    return 0;
}

/* Gives back what closes inside host callbacks left, oldest first; -1 with the error set. */
static int release_deferred(void) {
    while (PyList_GET_SIZE(deferred) > 0) {
        int what;
        unsigned long long h;
        long long kind;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(deferred, 0), "iKL", &what, &h, &kind) ||
            PyList_SetSlice(deferred, 0, 1, NULL) < 0 || release_now(what, h, kind) < 0)
            return -1;
    }
    return 0;
}

/* The one release of everything a close gives back (see above); -1 with the error set. */
static int release(int what, unsigned long long h, long long kind) {
    if (forked)
        return 0;
    if (in_callback) {
        PyObject *item = Py_BuildValue("iKL", what, h, kind);
        int r = item == NULL ? -1 : PyList_Append(deferred, item);
        Py_XDECREF(item);
        return r;
    }
    if (release_deferred() < 0)
        return -1;
    return release_now(what, h, kind);
}

/* The one close of every event: closed from now on; destroyed, if the core owns it, now
 * or, while a call on another thread holds it, by the last one out (see Holds). */
static int event_destroy(EventCore *e) {
    if (!e->open)
        return 0;
    e->open = 0;
    if (e->busy > 0) {
        e->closing = 1;
        return 0;
    }
    return event_release(e);
}

static int event_release(EventCore *e) {
    if (e->id != 0)
        return 0; /* borrowed: its owner destroys it */
    live_events--;
    return release(SB_cuEventDestroy, e->eptr, 0);
}

static PyObject *event_close(PyObject *self, PyObject *unused) {
    return event_destroy((EventCore *)self) < 0 ? NULL : Py_NewRef(Py_None);
}

/* Creates an event or a stream (by entry: cuEventCreate, cuStreamCreateWithPriority) with
 * device's primary context current; its handle and that context out. 0 with the error set.
 * A priority outside the device's range is a ValueError, as in cuda.core (the driver would
 * clamp it, as CuPy lets it). */
static int create_in(long long device, int which, unsigned flags, int priority, uintptr_t *h, uintptr_t *ctx) {
    *ctx = context_of(device);
    if (*ctx == 0)
        return 0;
    ctx_scope sc;
    int r = ctx_enter(*ctx, &sc); /* a create never blocks: the GIL stays */
    int least = 0, greatest = 0;
    const char *call = which == SB_cuEventCreate ? "cuEventCreate" : "cuStreamCreateWithPriority";
    if (r == 0 && priority != 0) { /* 0, the default, is every device's least priority */
        call = "cuCtxGetStreamPriorityRange";
        r = CALL(cuCtxGetStreamPriorityRange, priority_range_fn)(&least, &greatest);
        if (r == 0 && (priority > least || priority < greatest)) {
            ctx_leave(&sc);
            PyErr_Format(PyExc_ValueError,
                         "priority %d is outside device %lld's range: %d (the highest) to %d (the lowest)", priority,
                         device, greatest, least);
            return 0;
        }
        call = "cuStreamCreateWithPriority";
    }
    if (r == 0)
        r = which == SB_cuEventCreate ? CALL(cuEventCreate, event_create_fn)(h, flags)
                                      : CALL(cuStreamCreateWithPriority, stream_create_fn)(h, flags, priority);
    ctx_leave(&sc);
    if (r != 0) {
        raise_result(call, r);
        return 0;
    }
    return 1;
}

/* The one fill of an event the core owns from then on (made here, or opened from another
 * process): its CUevent, its device and that device's primary context, and its flags. */
static void event_fill(EventCore *e, uintptr_t h, uintptr_t ctx, long long device, unsigned flags) {
    e->eptr = h;
    e->ctx = ctx;
    e->device = device;
    e->timing = (flags & SB_EVENT_DISABLE_TIMING) == 0;
    e->interprocess = (flags & SB_EVENT_INTERPROCESS) != 0;
    e->open = 1;
    live_events++;
}

/* Makes e's event on device with flags (cuEventCreate, in the device's primary context). */
static int event_make(EventCore *e, long long device, unsigned flags) {
    uintptr_t h = 0, ctx = 0;
    if (!create_in(device, SB_cuEventCreate, flags, 0, &h, &ctx))
        return -1;
    event_fill(e, h, ctx, device, flags);
    return 0;
}

/* What the core's arguments need Python for, each registered by the module of its concept:
 * a cuda.core EventOptions (or its like) read into (timing_enabled, blocking_sync or None,
 * ipc_enabled or None) (_event); a device that is not a plain ordinal, a torch.device or
 * "cuda:N" (_device), and an integer argument that is not an exact int (_device.as_index:
 * NumPy's integers, not bools); the stream a call with stream=None (or a foreign stream-like) works
 * on (_stream.resolve): so a concept's module imports none of the others to reach them. */
static PyObject *read_event_options, *read_device, *read_index, *resolve_stream;

static PyObject *set_reader(PyObject **slot, PyObject *fn) {
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "a reader must be callable");
        return NULL;
    }
    Py_XSETREF(*slot, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *fn_set_event_options_reader(PyObject *self, PyObject *fn) { return set_reader(&read_event_options, fn); }
static PyObject *fn_set_device_reader(PyObject *self, PyObject *fn) { return set_reader(&read_device, fn); }
static PyObject *fn_set_index_reader(PyObject *self, PyObject *fn) { return set_reader(&read_index, fn); }
static PyObject *fn_set_stream_resolver(PyObject *self, PyObject *fn) { return set_reader(&resolve_stream, fn); }

/* resolve(stream, device): the stream a call works on (_stream.resolve). */
static PyObject *fn_resolve(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (resolve_stream == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "streambridge's streams are not loaded");
        return NULL;
    }
    return PyObject_Vectorcall(resolve_stream, args, nargs, NULL);
}

/* A bool argument: 1 or 0, or -1 with a TypeError naming it. */
static int flag_of(PyObject *v, const char *name) {
    if (v == Py_True || v == Py_False)
        return v == Py_True;
    PyErr_Format(PyExc_TypeError, "%s must be a bool, not %.100s", name, Py_TYPE(v)->tp_name);
    return -1;
}

/* The device an event or stream is made on: None is device 0 (as CuPy's current device
 * would be without one set), a plain ordinal itself, anything else as read_device reads it. */
static long long device_arg(PyObject *device) {
    if (device == Py_None)
        return 0;
    if (PyLong_CheckExact(device)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(device, &overflow);
        if (!overflow && v >= 0 && v < (1LL << 31))
            return v;
    }
    if (read_device == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "streambridge's devices are not loaded");
        return -1;
    }
    PyObject *r = PyObject_CallOneArg(read_device, device);
    if (r == NULL)
        return -1;
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    return v == -1 && PyErr_Occurred() ? -1 : (v < 0 ? 0 : v);
}

static char *event_keywords[] = {"block", "disable_timing", "interprocess", "enable_timing", "blocking",
                                 "options", "device", NULL};

/* Event(block=False, disable_timing=False, interprocess=False, *, enable_timing=None,
 * blocking=None, options=None, device=None): see _event.Event. */
static int event_core_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    EventCore *e = (EventCore *)self;
    PyObject *block = NULL, *disable = NULL, *ipc = Py_False, *enable = Py_None, *blocking = Py_None,
             *options = Py_None, *device = Py_None; /* block, disable: NULL where not given */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOO$OOOO:Event", event_keywords, &block, &disable, &ipc,
                                     &enable, &blocking, &options, &device))
        return -1;
    if (e->eptr != 0) {
        PyErr_SetString(PyExc_TypeError, "Event.__init__ was called on an event already made");
        return -1;
    }
    PyObject *read = NULL;
    if (options != Py_None) {
        read = PyObject_CallOneArg(read_event_options, options);
        if (read == NULL)
            return -1;
        if (!PyTuple_CheckExact(read) || PyTuple_GET_SIZE(read) != 3) {
            Py_DECREF(read);
            PyErr_SetString(PyExc_RuntimeError, "the event options reader returned no triple");
            return -1;
        }
        enable = PyTuple_GET_ITEM(read, 0);
        if (PyTuple_GET_ITEM(read, 1) != Py_None)
            blocking = PyTuple_GET_ITEM(read, 1);
        if (PyTuple_GET_ITEM(read, 2) != Py_None)
            ipc = PyTuple_GET_ITEM(read, 2);
    }
    int b = flag_of(block != NULL ? block : Py_False, "block");
    if (b >= 0 && blocking != Py_None) { /* CuPy's block and cuda.core's blocking: one answer */
        int given = b;
        b = flag_of(blocking, "blocking");
        if (b >= 0 && block != NULL && given != b) {
            PyErr_Format(PyExc_ValueError, "block=%R and blocking=%R contradict each other: give one", block, blocking);
            b = -1;
        }
    }
    int d = b < 0 ? -1 : flag_of(disable != NULL ? disable : Py_False, "disable_timing");
    if (d >= 0 && enable != Py_None) { /* CuPy's disable_timing and cuda.core's enable_timing */
        int given = d;
        d = flag_of(enable, "enable_timing");
        if (d >= 0 && disable != NULL && given == d) {
            PyErr_Format(PyExc_ValueError, "disable_timing=%R and enable_timing=%R contradict each other: give one",
                         disable, enable);
            d = -1;
        } else if (d >= 0) {
            d = !d;
        }
    }
    int i = d < 0 ? -1 : flag_of(ipc, "interprocess");
    Py_XDECREF(read);
    if (i < 0)
        return -1;
    if (i && !d) {
        PyErr_SetString(PyExc_ValueError, "an interprocess event must have timing disabled (CU_EVENT_INTERPROCESS)");
        return -1;
    }
    long long dev = device_arg(device);
    if (dev < 0 || !gate())
        return -1;
    return event_make(e, dev, (b ? SB_EVENT_BLOCKING_SYNC : 0) | (d ? SB_EVENT_DISABLE_TIMING : 0) |
                                  (i ? SB_EVENT_INTERPROCESS : 0));
}

static void event_core_dealloc(EventCore *e) {
    if (e->open) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (event_destroy(e) < 0)
            PyErr_WriteUnraisable((PyObject *)e);
        PyErr_Restore(type, value, tb);
    }
    Py_CLEAR(e->owner);
    Py_CLEAR(e->captured_on);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* An event handle argument: an int, or what _device.as_index reads as one (NumPy's integers),
 * not a bool; 1 to 2**64-1. 0 with the error set. */
static unsigned long long event_handle_arg(PyObject *handle) {
    PyObject *index = PyLong_CheckExact(handle) ? Py_NewRef(handle)
                      : read_index == NULL       ? Py_NewRef(Py_None)
                                                 : PyObject_CallOneArg(read_index, handle);
    if (index == NULL)
        return 0;
    if (index == Py_None) {
        Py_DECREF(index);
        PyErr_Format(PyExc_TypeError, "an event handle is an int, not %.100s", Py_TYPE(handle)->tp_name);
        return 0;
    }
    unsigned long long h = PyLong_AsUnsignedLongLong(index);
    Py_DECREF(index);
    if (PyErr_Occurred() || h == 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "an event handle is an address: 1 to 2**64-1, not %R", handle);
        return 0;
    }
    return h;
}

/* A borrowed event's stated device: -1 (read it from the event) for None, else an ordinal
 * as _device.device_index reads it ("cuda:1", a torch.device, ...). -2 with the error set. */
static long long borrowed_device_arg(PyObject *device) {
    if (device == Py_None)
        return -1;
    PyObject *r = PyLong_CheckExact(device) ? Py_NewRef(device)
                  : read_device == NULL     ? NULL
                                            : PyObject_CallOneArg(read_device, device);
    if (r == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "streambridge's devices are not loaded");
        return -2;
    }
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred())
        return -2;
    if (v < -1 || v >= (1LL << 31)) {
        PyErr_Format(PyExc_ValueError, "device must be a device ordinal, not %R", device);
        return -2;
    }
    return v;
}

/* The one wrap of a CUevent another library made (Event.from_handle, as_event): an event of
 * type cls borrowing it, proven a live event before the driver sees it (on the stated
 * device, unless None), and keeping owner (what it came from, or NULL) alive. Proven by the
 * loads where they can (event_object, in a device's primary context the core knows), else
 * by the Go check, which says what is wrong; never destroyed by the core. vouched: where
 * the driver's layout cannot be learned, taken on the word of whoever made the wrapper (a
 * framework object kept alive with it, or from_handle(..., vouched=True)), on the stated
 * device or the current context's, with nothing to verify before each use. */
static PyObject *wrap_event(PyTypeObject *cls, PyObject *handle, PyObject *device_obj, PyObject *owner, char vouched) {
    unsigned long long h = event_handle_arg(handle);
    if (h == 0)
        return NULL;
    long long device = borrowed_device_arg(device_obj);
    if (device == -2 || !gate())
        return NULL;
    long long got = -1;
    uint64_t id = 0;
    uintptr_t ctx = 0;
    const volatile uint64_t *o = event_object(h);
    if (o != NULL) {
        ctx = o[event_memory[SB_EVMEM_CTX]];
        got = device_of(ctx);
        id = o[event_memory[SB_EVMEM_ID]];
    }
    if (got < 0 || (device != -1 && device != got)) { /* not proven here, or the Go check says what is wrong */
        unsigned long long out = 0;
        got = pyshim_CheckEvent(h, device, (uintptr_t)&out, vouched);
        if (PyErr_Occurred())
            return NULL;
        id = out;
        learn_event_memory();
        if (id == 0) { /* an identity is never 0: 0 would mark the event as owned */
            PyErr_Format(PyExc_RuntimeError, "the event check gave event %#llx no identity", h);
            return NULL;
        }
        ctx = context_of(got);
        if (ctx == 0)
            return NULL;
    }
    EventCore *e = (EventCore *)cls->tp_alloc(cls, 0);
    if (e == NULL)
        return NULL;
    e->eptr = h;
    e->ctx = ctx;
    e->device = got;
    e->id = id;
    e->timing = 1;   /* unknown: the driver's answer to elapsed_time stands */
    e->recorded = 1;
    e->open = 1;
    e->owner = owner == NULL || owner == Py_None ? NULL : Py_NewRef(owner);
    return (PyObject *)e;
}

/* wrap_event(cls, handle, device, owner), for as_event: vouched for by owner, a framework's
 * event object kept alive with the wrapper. */
static PyObject *fn_wrap_event(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &EventCoreType)) {
        PyErr_SetString(PyExc_TypeError, "wrap_event takes an Event class, a handle, a device and an owner");
        return NULL;
    }
    return wrap_event((PyTypeObject *)args[0], args[1], args[2], args[3], args[3] != Py_None);
}

/* Event.from_handle(handle, device=None, *, vouched=False), a class method. */
static PyObject *event_from_handle(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *handle = nargs > 0 ? args[0] : NULL, *device = nargs > 1 ? args[1] : Py_None, *vouched = Py_False;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "from_handle takes at most 2 positional arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        PyObject **slot = PyUnicode_CompareWithASCIIString(name, "handle") == 0 && nargs < 1   ? &handle
                          : PyUnicode_CompareWithASCIIString(name, "device") == 0 && nargs < 2 ? &device
                          : PyUnicode_CompareWithASCIIString(name, "vouched") == 0             ? &vouched
                                                                                               : NULL;
        if (slot == NULL) {
            PyErr_Format(PyExc_TypeError, "from_handle() got an unexpected or repeated argument %R", name);
            return NULL;
        }
        *slot = args[nargs + i];
    }
    if (handle == NULL) {
        PyErr_SetString(PyExc_TypeError, "from_handle() missing its handle");
        return NULL;
    }
    if (!PyBool_Check(vouched)) {
        PyErr_Format(PyExc_TypeError, "vouched is a bool, not %.100s", Py_TYPE(vouched)->tp_name);
        return NULL;
    }
    return wrap_event((PyTypeObject *)cls, handle, device, NULL, vouched == Py_True);
}

/* open_ipc_event(cls, device, handle): an event of type cls another process exported
 * (cuIpcOpenEventHandle, in the Go core); the core owns it as the events it made. */
static PyObject *fn_open_ipc_event(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &EventCoreType) ||
        !PyLong_Check(args[1]) || !PyBytes_Check(args[2]) || PyBytes_GET_SIZE(args[2]) != 64) {
        PyErr_SetString(PyExc_TypeError, "open_ipc_event takes an Event class, a device and a 64-byte handle");
        return NULL;
    }
    long long device = PyLong_AsLongLong(args[1]);
    if ((device == -1 && PyErr_Occurred()) || !gate())
        return NULL;
    uintptr_t ctx = context_of(device);
    if (ctx == 0)
        return NULL;
    char hex[129];
    const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    for (int i = 0; i < 64; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    PyTypeObject *cls = (PyTypeObject *)args[0];
    EventCore *e = (EventCore *)cls->tp_alloc(cls, 0);
    if (e == NULL)
        return NULL;
    unsigned long long h = pyshim_OpenIPCEvent(device, hex);
    if (PyErr_Occurred()) {
        Py_DECREF(e);
        return NULL;
    }
    event_fill(e, h, ctx, device, SB_EVENT_INTERPROCESS | SB_EVENT_DISABLE_TIMING); /* as the exporter made it */
    return (PyObject *)e;
}

static PyObject *fn_live_events(PyObject *self, PyObject *unused) { return PyLong_FromLongLong(live_events); }

static PyMethodDef event_core_methods[] = {
    {"from_handle", (PyCFunction)(void (*)(void))event_from_handle, METH_CLASS | METH_FASTCALL | METH_KEYWORDS,
     "from_handle($type, /, handle, device=None, *, vouched=False)\n--\n\nBorrow a CUevent another library made (cuda.core's "
     "``Stream.from_handle`` for events, which no peer has). The handle is proven a live event of a device's "
     "primary context before the driver sees it, and before every use after: a garbage integer, a destroyed "
     "event (also one whose address names a new event) or a stream handle raise :class:`InvalidHandleError`. "
     "Its device is read from the event and checked against ``device`` if given. Record, wait, query, "
     "synchronize and elapsed time work on it; close only forgets it: its owner destroys it. Where the "
     "driver's layout cannot be learned nothing can be proven, and the handle is refused, unless "
     "``vouched=True``: the caller's word that it is a live event and stays one while used; it is then "
     "taken on ``device`` (else the current context's) and not checked before each use."},
    {"record", (PyCFunction)(void (*)(void))event_record, METH_FASTCALL | METH_KEYWORDS,
     "record($self, /, stream=None)\n--\n\nRecord on ``stream`` (cuEventRecord); None is the current "
     "streambridge stream, else the device's legacy default stream, as CuPy and PyTorch take it."},
    {"wait", (PyCFunction)(void (*)(void))event_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait($self, /, stream=None)\n--\n\nMake ``stream`` wait for this event (cuStreamWaitEvent); None as in "
     ":meth:`record`."},
    {"query", event_query, METH_NOARGS,
     "query($self, /)\n--\n\nWhether the last record's work has completed (cuEventQuery)."},
    {"synchronize", event_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\nWait for the last record's work (cuEventSynchronize); other Python threads run, "
     "and on the main thread Ctrl-C ends the wait (KeyboardInterrupt) within about 0.1 s."},
    {"elapsed_time", event_elapsed_time, METH_O,
     "elapsed_time($self, end, /)\n--\n\nMilliseconds from this event to ``end`` (cuEventElapsedTime)."},
    {"ipc_handle", event_ipc_handle, METH_NOARGS,
     "ipc_handle($self, /)\n--\n\nThe 64-byte handle another process opens with :meth:`from_ipc_handle` "
     "(cuIpcGetEventHandle). The event must be ``interprocess``."},
    {"close", event_close, METH_NOARGS, "close($self, /)\n--\n\nDestroy the event (cuEventDestroy). Idempotent."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef event_core_members[] = {
    {"_eptr", T_ULONGLONG, offsetof(EventCore, eptr), READONLY, "the CUevent"},
    {"_device", T_LONGLONG, offsetof(EventCore, device), READONLY, "its device"},
    {"_open", T_BOOL, offsetof(EventCore, open), READONLY, "made, and not closed"},
    {"_timing", T_BOOL, offsetof(EventCore, timing), READONLY, "made with timing"},
    {"_interprocess", T_BOOL, offsetof(EventCore, interprocess), READONLY, "shareable with another process"},
    {"_id", T_ULONGLONG, offsetof(EventCore, id), READONLY, "a borrowed event's identity; 0 for an owned one"},
    {"_owner", T_OBJECT, offsetof(EventCore, owner), READONLY, "what a borrowed event came from, or None"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject EventCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.EventCore",
    .tp_basicsize = sizeof(EventCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "EventCore(block=False, disable_timing=False, interprocess=False, *, enable_timing=None, "
              "blocking=None, options=None, device=None)\n--\n\nThe C core of streambridge's events (see core.c); "
              "its initializer reads these arguments (event_keywords).",
    .tp_new = PyType_GenericNew,
    .tp_init = event_core_init,
    .tp_dealloc = (destructor)event_core_dealloc,
    .tp_methods = event_core_methods,
    .tp_members = event_core_members,
};

/* ---- The life of a stream ----
 * Stream() is made here as events are (cuStreamCreateWithPriority, in its device's primary
 * context), owned by the core and destroyed by its close; a Go stream (a borrowed one) is
 * made for it only when a call that goes through Go first needs one (_BaseStream._key).
 * null and ptds name the device's default streams, read in its primary context. */

static long long live_streams; /* made and not yet destroyed */

/* The one fill of a stream's fields, open from then on: its handle, the context a special
 * handle is read in (else 0), a borrowed stream object's identity (else 0), its device. */
static void fill_fields(StreamCore *s, unsigned long long ptr, uintptr_t ctx, uint64_t id, long long device) {
    s->ptr = ptr;
    s->ctx = ctx;
    s->id = id;
    s->device = device;
    s->open = 1;
}

/* Fills s as device's default stream ptr (0, 1 or 2), read in the device's primary context:
 * Stream(null=True or ptds=True) and ExternalStream(0, 1 or 2). 0 with the error set. */
static int fill_default(StreamCore *s, unsigned long long ptr, long long device) {
    uintptr_t ctx = context_of(device);
    if (ctx == 0)
        return 0;
    fill_fields(s, ptr, ctx, 0, device);
    return 1;
}

/* The one close of every stream: its Go stream's key released, and, made here, the stream
 * destroyed (both deferred inside host callbacks, forgotten after fork: see release). */
static int stream_close(StreamCore *s) {
    int made = s->open && s->owned;
    s->open = 0;
    count_capture(s, 0);
    if (s->busy > 0) { /* a call on another thread has the handle: the last one out releases it */
        s->closing = s->closing ? s->closing : 1 + made;
        return 0;
    }
    return stream_release(s, made);
}

static int stream_release(StreamCore *s, int made) {
    long long key = s->key;
    s->key = 0;
    int r = key != 0 ? release(RELEASE_KEY, (unsigned long long)key, SB_OBJECT_STREAM) : 0;
    if (!made)
        return r;
    live_streams--;
    if (r == 0)
        return release(SB_cuStreamDestroy, s->ptr, 0);
    RELEASE_QUIETLY(s, release(SB_cuStreamDestroy, s->ptr, 0)); /* the key's error is the one raised */
    return r;
}

static char *stream_keywords[] = {"null", "non_blocking", "ptds", "priority", "device", NULL};

/* Stream(null=False, non_blocking=False, ptds=False, priority=None, *, device=None): see
 * _stream.Stream. */
static int owned_core_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    StreamCore *s = (StreamCore *)self;
    PyObject *null = Py_False, *non_blocking = Py_False, *ptds = Py_False, *priority = Py_None, *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOO$O:Stream", stream_keywords, &null, &non_blocking, &ptds,
                                     &priority, &device))
        return -1;
    if (s->open || s->key != 0 || s->busy > 0) {
        PyErr_SetString(PyExc_TypeError, "Stream.__init__ was called on a stream already made");
        return -1;
    }
    int n = flag_of(null, "null");
    int b = n < 0 ? -1 : flag_of(non_blocking, "non_blocking");
    int p = b < 0 ? -1 : flag_of(ptds, "ptds");
    if (p < 0)
        return -1;
    if (n && p) {
        PyErr_SetString(PyExc_ValueError, "a stream cannot be both the null stream and the per-thread one");
        return -1;
    }
    long long prio = 0;
    if (priority != Py_None) { /* an int, or what _device.as_index reads as one (NumPy's integers); not a bool */
        PyObject *index = PyLong_CheckExact(priority) ? Py_NewRef(priority)
                          : read_index == NULL         ? Py_NewRef(Py_None)
                                                       : PyObject_CallOneArg(read_index, priority);
        if (index == NULL)
            return -1;
        if (index == Py_None) {
            Py_DECREF(index);
            PyErr_Format(PyExc_TypeError, "priority must be an int, not %.100s", Py_TYPE(priority)->tp_name);
            return -1;
        }
        int overflow = 0;
        prio = PyLong_AsLongLongAndOverflow(index, &overflow);
        Py_DECREF(index);
        if (prio == -1 && PyErr_Occurred())
            return -1;
        if (overflow || prio < INT32_MIN || prio > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "priority must fit a C int, not %R", priority);
            return -1;
        }
    }
    long long dev = device_arg(device);
    if (dev < 0 || !gate())
        return -1;
    if (n || p)
        return fill_default(s, p ? SB_MAX_SPECIAL_STREAM : 0, dev) ? 0 : -1; /* per-thread is 2 */
    uintptr_t h = 0, ctx = 0;
    if (!create_in(dev, SB_cuStreamCreateWithPriority, b ? SB_STREAM_NON_BLOCKING : 0, (int)prio, &h, &ctx))
        return -1;
    fill_fields(s, h, 0, 0, dev); /* a stream object carries its context: none to keep */
    s->owned = 1;
    live_streams++;
    return 0;
}

static PyObject *fn_live_streams(PyObject *self, PyObject *unused) { return PyLong_FromLongLong(live_streams); }

static PyTypeObject OwnedCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.OwnedCore",
    .tp_basicsize = sizeof(StreamCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, /* GC, traverse, clear, dealloc: StreamCore's */
    .tp_doc = "OwnedCore(null=False, non_blocking=False, ptds=False, priority=None, *, device=None)\n--\n\n"
              "The constructor of streambridge.Stream (see core.c); its initializer reads these arguments "
              "(stream_keywords).",
    .tp_base = &StreamCoreType,
    .tp_init = owned_core_init,
};

/* ---- Wrapping foreign streams ---- */

/* pyshim.CheckStream, exported by gopy's generated Go: the handle proven a live stream
 * before the driver sees it, and its device; on failure the typed error is set (sb_raise). */
extern long long pyshim_CheckStream(unsigned long long handle, long long device, long long convention,
                                    unsigned long long id_out, char vouched);

/* Whether handle h is proven here a live stream of a device's primary context the core
 * knows (device_ctx), with its device and identity, as the Go check would prove it: the
 * chain leads back to h, and the object's context is that device's. 0 where not. */
static int proven_here(uintptr_t h, long long *device, uint64_t *id) {
    const volatile uint64_t *o = stream_object(h);
    if (o == NULL || o[stream_memory[SB_MEM_BACK]] != h)
        return 0;
    *device = device_of(o[stream_memory[SB_MEM_CTX]]);
    *id = o[stream_memory[SB_MEM_ID]];
    return *device >= 0;
}

/* The wrap of a stream object's handle: proven a live stream before the driver sees it, on
 * the stated device if one is (-1: any); its device and identity out. Proven here where the
 * loads can (proven_here), else by the Go check, which says what is wrong; after the Go
 * check the core knows the device's context, so the next wraps of its streams are proven
 * here. 0 with the typed error set. */
static int check_new_stream(uintptr_t h, long long device, char vouched, long long *got, uint64_t *id) {
    if (proven_here(h, got, id) && (device == -1 || device == *got))
        return 1;
    unsigned long long out = 0;
    *got = pyshim_CheckStream(h, device, SB_CONVENTION_RUNTIME, (uintptr_t)&out, vouched);
    if (PyErr_Occurred())
        return 0;
    *id = out;
    learn_stream_memory();
    if (context_of(*got) == 0)
        PyErr_Clear(); /* only a shortcut is lost: the next wrap asks the Go check again */
    return 1;
}

/* _verify(): what every operation on the stream checks (the gate, open, identity), for the
 * Python methods that hand the handle on without calling the driver (conversions, the
 * __cuda_stream__ protocol, a borrowed stream's first call through Go). */
static PyObject *stream_verify(PyObject *self, PyObject *unused) {
    if (!gate() || !stream_usable((StreamCore *)self))
        return NULL;
    Py_RETURN_NONE;
}

/* The one fill of a new ExternalStream: handle ptr on the stated device (-1: the handle's).
 * A stream object is proven (check_new_stream) and keeps its identity; 0, 1 and 2 name the
 * device's default streams (device 0 if none is stated: fill_default). vouched: where the
 * driver's layout cannot be learned, the handle is taken on the word of whoever made the
 * wrapper (a framework object kept alive with it, or ExternalStream(..., vouched=True)),
 * with no identity to check (streams.Vouched). 0 with the typed error set. */
static int fill_external(StreamCore *s, unsigned long long ptr, long long device, char vouched) {
    if (s->open || s->key != 0 || s->busy > 0) {
        PyErr_SetString(PyExc_TypeError, "ExternalStream was already made");
        return 0;
    }
    if (!gate())
        return 0;
    if (ptr <= SB_MAX_SPECIAL_STREAM)
        return fill_default(s, ptr, device < 0 ? 0 : device);
    long long got = 0;
    uint64_t id = 0;
    if (!check_new_stream(ptr, device, vouched, &got, &id))
        return 0;
    fill_fields(s, ptr, 0, id, got);
    s->vouched = vouched;
    return 1;
}

/* _fill(ptr, device): fill_external, for the Python initializer once it has read its
 * arguments (keywords, other device forms). */
static PyObject *stream_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyLong_CheckExact(args[0]) || !PyLong_CheckExact(args[1]) || !PyBool_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "_fill takes a handle and a device, as ints, and vouched, a bool");
        return NULL;
    }
    unsigned long long ptr = PyLong_AsUnsignedLongLong(args[0]);
    long long device = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred() || !fill_external((StreamCore *)self, ptr, device, args[2] == Py_True))
        return NULL;
    Py_RETURN_NONE;
}

/* Fills a new ExternalStream made with CuPy's positional form of ints: 1 if made, 0 with
 * the typed error set, -1 if the arguments are not this form (the Python initializer reads
 * those, then calls _fill). vouched: see fill_external. */
static int external_positional(StreamCore *s, PyObject *const *args, Py_ssize_t nargs, char vouched) {
    if (nargs < 1 || nargs > 2 || !PyLong_CheckExact(args[0]) || (nargs == 2 && !PyLong_CheckExact(args[1])))
        return -1;
    int overflow = 0;
    unsigned long long ptr = PyLong_AsUnsignedLongLong(args[0]);
    long long device = nargs == 2 ? PyLong_AsLongLongAndOverflow(args[1], &overflow) : -1;
    if (PyErr_Occurred() || overflow || device < -1 || device >= (1LL << 31)) {
        PyErr_Clear();
        return -1;
    }
    return fill_external(s, ptr, device, vouched);
}

/* ExternalStream(ptr, device_id=-1, ...): a stream object's handle with CuPy's positional
 * signature is made here; every other form (keywords, 0/1/2, other types) goes to the
 * Python initializer registered with set_external_init. ExternalStream's first base is
 * ExternalCore, whose tp_new this is, so Python calls it directly. */
static PyObject *external_init;

static PyObject *fn_set_external_init(PyObject *self, PyObject *init) {
    if (!PyCallable_Check(init)) {
        PyErr_SetString(PyExc_TypeError, "set_external_init takes the Python initializer");
        return NULL;
    }
    Py_XSETREF(external_init, Py_NewRef(init));
    Py_RETURN_NONE;
}

static PyObject *external_core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (external_init == NULL) {
        PyErr_SetString(PyExc_TypeError, "ExternalCore is only a base of streambridge.ExternalStream");
        return NULL;
    }
    PyObject *obj = stream_core_new(type, NULL, NULL);
    if (obj == NULL)
        return NULL;
    int made = kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0
                   ? -1
                   : external_positional((StreamCore *)obj, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), 0);
    if (made == 1)
        return obj;
    if (made == 0) {
        Py_DECREF(obj);
        return NULL;
    }
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
    .tp_doc = "The constructor of streambridge.ExternalStream (see core.c).",
    .tp_base = &StreamCoreType,
    .tp_new = external_core_new,
};

/* Stream.from_external(obj) (a classmethod over this function; the result is always an
 * ExternalStream): the protocol is asked once; a (0, handle of a stream object) answer is
 * made here with the object kept in _owner; every other answer goes, with the value, to
 * the Python function registered with set_from_external, which reads or refuses it. */
static PyObject *external_type, *from_external_python;

static PyObject *fn_set_from_external(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &StreamCoreType) ||
        !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_from_external takes ExternalStream and the Python reader");
        return NULL;
    }
    Py_XSETREF(external_type, Py_NewRef(args[0]));
    Py_XSETREF(from_external_python, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyObject *fn_from_external(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || external_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "from_external(cls, obj)");
        return NULL;
    }
    PyObject *obj = args[1];
    /* The protocol is the type's, as a special method's is: looked up there once (the type's
     * method cache), and called unbound where the interpreter would call it so. */
    PyObject *method = _PyType_Lookup(Py_TYPE(obj), name_cuda_stream); /* borrowed */
    if (method == NULL)
        return PyObject_CallOneArg(from_external_python, obj); /* raises the TypeError */
    Py_INCREF(method);
    PyObject *value = PyType_HasFeature(Py_TYPE(method), Py_TPFLAGS_METHOD_DESCRIPTOR)
                          ? PyObject_Vectorcall(method, &obj, 1, NULL)
                          : PyObject_CallMethodNoArgs(obj, name_cuda_stream);
    Py_DECREF(method);
    if (value == NULL)
        return NULL;
    PyObject *version = PyTuple_CheckExact(value) && PyTuple_GET_SIZE(value) == 2 ? PyTuple_GET_ITEM(value, 0) : NULL;
    int overflow = 0; /* a version past a long: not 0, and no exception left set (the Python reader says what) */
    if (version != NULL && PyLong_CheckExact(version) && PyLong_AsLongAndOverflow(version, &overflow) == 0 && !overflow) {
        PyObject *s = stream_core_new((PyTypeObject *)external_type, NULL, NULL);
        if (s == NULL) {
            Py_DECREF(value);
            return NULL;
        }
        int made = external_positional((StreamCore *)s, &PyTuple_GET_ITEM(value, 1), 1, 1); /* obj's word */
        if (made == 1) {
            Py_DECREF(value);
            ((StreamCore *)s)->owner = Py_NewRef(obj);
            return s;
        }
        Py_DECREF(s);
        if (made == 0) {
            Py_DECREF(value);
            return NULL;
        }
    }
    PyObject *r = PyObject_CallFunctionObjArgs(from_external_python, obj, value, NULL);
    Py_DECREF(value);
    return r;
}

/* ---- Kernels ----
 * Calling a Kernel launches it. The common case (ints for grid, block and shared_mem, a
 * tuple of Python ints and floats, a streambridge stream) is read here; everything else
 * goes to the Python method _call, which reads it (dim3 tuples, arrays and their producers,
 * NumPy scalars, other frameworks' streams) and comes back through _launch. Both end in
 * do_launch. */
#define MAX_PARAMS 256

/* cuLaunchKernel of k on s (an enqueue: see ENQUEUE). Unlike the other entry points here,
 * cuLaunchKernel of a module's function answers CUDA_ERROR_INVALID_CONTEXT on a thread with
 * no context current: the kernel's context (the stream's too: the devices agree) is made
 * current where it is not already. */
static int launch_in(KernelCore *k, StreamCore *s, const unsigned dims[6], unsigned shared, void **params) {
    ctx_scope sc;
    int r = ctx_enter(k->ctx, &sc);
    if (r == 0)
        r = CALL(cuLaunchKernel, launch_fn)((uintptr_t)k->fn, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                                            shared, (uintptr_t)s->ptr, params, NULL);
    ctx_leave(&sc);
    return r;
}

static int module_release(ModuleCore *m);

/* A launch that lets the GIL go holds its stream and its kernel's module (see Holds). */
static void launch_hold(StreamCore *s, ModuleCore *m) {
    stream_hold(s);
    m->busy++;
}

static void launch_let_go(StreamCore *s, ModuleCore *m) {
    if (--m->busy == 0 && m->closed)
        RELEASE_QUIETLY(m, module_release(m));
    stream_let_go(s);
}

static PyObject *do_launch(KernelCore *k, StreamCore *s, const unsigned dims[6], unsigned shared, void **params) {
    if (!gate() || !stream_usable(s))
        return NULL;
    ModuleCore *m = (ModuleCore *)k->module;
    if (m == NULL || !PyObject_TypeCheck(m, &ModuleCoreType) || m->closed || m->key == 0) {
        sb_raise(SB_KIND_CLOSED, 0, "", "the kernel's module was closed", "");
        return NULL;
    }
    if (s->device != k->device) {
        char message[160];
        snprintf(message, sizeof message, "the kernel is loaded on device %lld, the stream is on device %lld",
                 k->device, s->device);
        sb_raise(SB_KIND_DEVICE_MISMATCH, 0, "", message, "");
        return NULL;
    }
    int r;
    ENQUEUE(r, launch_in(k, s, dims, shared, params), launch_hold(s, m), launch_let_go(s, m));
    return r == 0 ? Py_NewRef(Py_None) : raise_result("cuLaunchKernel", r);
}

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

static PyObject *kernel_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *stream = NULL, *shared_obj = NULL;
    unsigned dims[6], shared = 0;
    uint64_t vals[MAX_PARAMS];
    void *ptrs[MAX_PARAMS];
    if (PyTuple_GET_SIZE(args) != 3)
        goto python;
    if (kwargs != NULL) {
        Py_ssize_t found = 0;
        if ((stream = PyDict_GetItemWithError(kwargs, name_stream)) != NULL)
            found++;
        if ((shared_obj = PyDict_GetItemWithError(kwargs, name_shared_mem)) != NULL)
            found++;
        if (PyErr_Occurred())
            return NULL;
        if (found != PyDict_GET_SIZE(kwargs))
            goto python;
    }
    if (stream == NULL || !PyObject_TypeCheck(stream, &StreamCoreType))
        goto python;
    if (!dim_of(PyTuple_GET_ITEM(args, 0), &dims[0], 0) || !dim_of(PyTuple_GET_ITEM(args, 1), &dims[3], 0) ||
        (shared_obj != NULL && !dim_of(shared_obj, &shared, 1)))
        goto python;
    dims[1] = dims[2] = dims[4] = dims[5] = 1;
    PyObject *params = PyTuple_GET_ITEM(args, 2);
    if (!PyTuple_CheckExact(params) || PyTuple_GET_SIZE(params) > MAX_PARAMS)
        goto python;
    Py_ssize_t n = PyTuple_GET_SIZE(params);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!param_of(PyTuple_GET_ITEM(params, i), &vals[i]))
            goto python;
        ptrs[i] = &vals[i];
    }
    return do_launch((KernelCore *)self, (StreamCore *)stream, dims, shared, ptrs);
python:;
    PyObject *call = PyObject_GetAttr(self, name_call);
    if (call == NULL)
        return NULL;
    PyObject *result = PyObject_Call(call, args, kwargs);
    Py_DECREF(call);
    return result;
}

static int handle_of(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return 0;
    *out = v;
    return 1;
}

/* _launch(stream, (gx, gy, gz), (bx, by, bz), shared, values): what _call read, launched.
 * values: the kernel's parameters, each up to 8 bytes little-endian in an int. */
/* _bind(fn, ctx, device, module): see kernel_core_methods. */
static PyObject *kernel_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    KernelCore *k = (KernelCore *)self;
    if (nargs != 4 || !PyObject_TypeCheck(args[3], &ModuleCoreType)) {
        PyErr_SetString(PyExc_TypeError, "_bind takes (fn, ctx, device, module)");
        return NULL;
    }
    if (k->module != NULL) {
        PyErr_SetString(PyExc_TypeError, "a kernel's function is set once, when it is made");
        return NULL;
    }
    uint64_t fn, ctx;
    long long device = PyLong_AsLongLong(args[2]);
    if (!handle_of(args[0], &fn) || !handle_of(args[1], &ctx) || (device == -1 && PyErr_Occurred()))
        return NULL;
    k->fn = fn;
    k->ctx = ctx;
    k->device = device;
    k->module = Py_NewRef(args[3]);
    Py_RETURN_NONE;
}

static PyObject *kernel_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned dims[6];
    uint64_t vals[MAX_PARAMS];
    void *ptrs[MAX_PARAMS];
    if (nargs != 5 || !PyObject_TypeCheck(args[0], &StreamCoreType) || !PyTuple_Check(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != 3 || !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) != 3 ||
        !PyTuple_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "_launch takes (stream, (gx, gy, gz), (bx, by, bz), shared, values)");
        return NULL;
    }
    for (int i = 0; i < 6; i++) { /* checked, not truncated: cuLaunchKernel takes unsigned ints */
        if (!dim_of(PyTuple_GET_ITEM(args[1 + i / 3], i % 3), &dims[i], 0)) {
            PyErr_Format(PyExc_ValueError, "%s dimensions must be ints from 1 to 2**32-1, not %R",
                         i < 3 ? "grid" : "block", args[1 + i / 3]);
            return NULL;
        }
    }
    unsigned shared;
    if (!dim_of(args[3], &shared, 1)) {
        PyErr_Format(PyExc_ValueError, "shared_mem must be an int from 0 to 2**32-1 bytes, not %R", args[3]);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args[4]);
    if (n > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "a kernel takes at most 256 parameters");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!handle_of(PyTuple_GET_ITEM(args[4], i), &vals[i]))
            return NULL;
        ptrs[i] = &vals[i];
    }
    return do_launch((KernelCore *)self, (StreamCore *)args[0], dims, shared, ptrs);
}

static PyMethodDef kernel_core_methods[] = {
    {"_bind", (PyCFunction)(void (*)(void))kernel_bind, METH_FASTCALL,
     "_bind(fn, ctx, device, module): the kernel's function, context, device and module, set once (Kernel.__init__); "
     "read-only after, so no forged handle reaches cuLaunchKernel"},
    {"_launch", (PyCFunction)(void (*)(void))kernel_launch, METH_FASTCALL,
     "_launch(stream, grid, block, shared, values): the launch of what _call read (cuLaunchKernel)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef kernel_core_members[] = {
    {"_fn", T_ULONGLONG, offsetof(KernelCore, fn), READONLY, "the CUfunction"},
    {"_ctx", T_ULONGLONG, offsetof(KernelCore, ctx), READONLY, "its module's context"},
    {"_device", T_LONGLONG, offsetof(KernelCore, device), READONLY, "its module's device"},
    {"_module", T_OBJECT, offsetof(KernelCore, module), READONLY, "the ModuleCore that owns the function"},
    {NULL, 0, 0, 0, NULL},
};

static void kernel_core_dealloc(KernelCore *k) {
    Py_CLEAR(k->module);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static PyTypeObject KernelCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.KernelCore",
    .tp_basicsize = sizeof(KernelCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C core of streambridge's kernels (see core.c).",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)kernel_core_dealloc,
    .tp_call = kernel_call,
    .tp_methods = kernel_core_methods,
    .tp_members = kernel_core_members,
};

/* -- ModuleCore type -- */

/* The one release of a module's key, once no launch holds it; -1 with the error set. */
static int module_release(ModuleCore *m) {
    long long key = m->key;
    m->key = 0;
    return key != 0 ? release(RELEASE_KEY, (unsigned long long)key, SB_OBJECT_MODULE) : 0;
}

/* The one close of every module: closed from now on (its kernels refuse to launch);
 * unloaded now or, while a launch on another thread holds it, by the last one out. */
static int module_close(ModuleCore *m) {
    if (m->closed)
        return 0;
    m->closed = 1;
    return m->busy > 0 ? 0 : module_release(m);
}

static PyObject *module_core_close(PyObject *self, PyObject *unused) {
    if (!forked && !in_callback && ((ModuleCore *)self)->key != 0 && !gate())
        return NULL;
    return module_close((ModuleCore *)self) < 0 ? NULL : Py_NewRef(Py_None);
}

static void module_core_dealloc(ModuleCore *m) {
    if (!m->closed) /* no launch holds it: a launch keeps its kernel, which keeps it */
        RELEASE_QUIETLY(m, module_close(m));
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyMethodDef module_core_methods[] = {
    {"close", module_core_close, METH_NOARGS,
     "close($self, /)\n--\n\nUnload the module (cuModuleUnload): now, or once launches in flight on other "
     "threads are enqueued; its kernels can no longer be launched."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef module_core_members[] = {
    {"_closed", T_BOOL, offsetof(ModuleCore, closed), READONLY, "closed: its kernels can no longer be launched"},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *module_get_key(PyObject *self, void *unused) { return PyLong_FromLongLong(((ModuleCore *)self)->key); }

/* The key is set once, by Module.__init__: a key written later would name another module. */
static int module_set_key(PyObject *self, PyObject *value, void *unused) {
    ModuleCore *m = (ModuleCore *)self;
    if (value == NULL || !PyLong_CheckExact(value) || m->key != 0 || m->closed) {
        PyErr_SetString(PyExc_TypeError, "a module's key is set once, when it is loaded");
        return -1;
    }
    long long key = PyLong_AsLongLong(value);
    if (key == -1 && PyErr_Occurred())
        return -1;
    m->key = key;
    return 0;
}

static PyGetSetDef module_core_getset[] = {
    {"_key", module_get_key, module_set_key, "the Go module's key; 0 until loaded and once released; set once", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModuleCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streambridge._native.ModuleCore",
    .tp_basicsize = sizeof(ModuleCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C core of streambridge's modules (see core.c).",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)module_core_dealloc,
    .tp_methods = module_core_methods,
    .tp_members = module_core_members,
    .tp_getset = module_core_getset,
};

/* ---- The module ---- */

/* init(*addresses): the entry points, in the order of tables.h (internal/boundary). */
static PyObject *fn_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *a[SB_ENTRY_COUNT];
    if (nargs != SB_ENTRY_COUNT) {
        PyErr_Format(PyExc_TypeError, "init takes %d entry point addresses", SB_ENTRY_COUNT);
        return NULL;
    }
    for (int i = 0; i < SB_ENTRY_COUNT; i++) {
        uint64_t v;
        if (!handle_of(args[i], &v))
            return NULL;
        if (v == 0) {
            PyErr_Format(PyExc_RuntimeError, "the driver offers no entry point %d (tables.h)", i);
            return NULL;
        }
        a[i] = (void *)(uintptr_t)v;
    }
    memcpy(entry, a, sizeof a);
    Py_RETURN_NONE;
}

/* ---- Closing the objects kept under Go keys ---- */

/* release(key, kind): the one close of a Go key (release). */
static PyObject *fn_release(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyLong_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "release takes a key and a kind");
        return NULL;
    }
    long long key = PyLong_AsLongLong(args[0]), kind = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred() || (!forked && !in_callback && !gate()))
        return NULL;
    return release(RELEASE_KEY, (unsigned long long)key, kind) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *fn_set_initializer(PyObject *self, PyObject *fn) {
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_initializer takes a callable");
        return NULL;
    }
    Py_XSETREF(initializer, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))fn_init, METH_FASTCALL, "init(*entry_points), in tables.h's order"},
    {"set_initializer", fn_set_initializer, METH_O, "set_initializer(fn): what the first gate runs; it calls init"},
    {"set_error_classes", set_error_classes, METH_O, "set_error_classes(classes by error kind)"},
    {"gate", py_gate, METH_NOARGS, "raises ForkedProcessError or CallbackReentryError where no call may go on"},
    {"callback_errors", fn_callback_errors, METH_NOARGS, "exceptions raised in host callbacks since the last call"},
    {"set_external_init", fn_set_external_init, METH_O, "set_external_init(init): ExternalStream's initializer"},
    {"from_external", (PyCFunction)(void (*)(void))fn_from_external, METH_FASTCALL,
     "from_external($module, cls, obj, /)\n--\n\nCuPy 14's ``Stream.from_external``: borrow the stream of any "
     "object speaking the ``__cuda_stream__`` protocol as an ExternalStream, keeping the object alive as long "
     "as the stream (the handle is checked as ExternalStream checks it)."},
    {"set_from_external", (PyCFunction)(void (*)(void))fn_set_from_external, METH_FASTCALL,
     "set_from_external(ExternalStream, reader(obj, value))"},
    {"set_event_options_reader", fn_set_event_options_reader, METH_O,
     "set_event_options_reader(fn): reads Event's options (a cuda.core EventOptions) for the core"},
    {"set_device_reader", fn_set_device_reader, METH_O,
     "set_device_reader(fn): reads a device argument that is not a plain ordinal for the core"},
    {"set_index_reader", fn_set_index_reader, METH_O,
     "set_index_reader(fn): reads an integer argument that is not an exact int (an int, or None) for the core"},
    {"set_stream_resolver", fn_set_stream_resolver, METH_O,
     "set_stream_resolver(fn): the stream a call with stream=None (or a stream-like) works on"},
    {"resolve", (PyCFunction)(void (*)(void))fn_resolve, METH_FASTCALL,
     "resolve(stream, device) -> stream: as the registered resolver (_stream.resolve) answers"},
    {"at_exit", fn_at_exit, METH_NOARGS,
     "at_exit(): Python host callbacks still queued are dropped from then on (the atexit module calls it); "
     "waits up to 5 s for those running, and returns how many it left running"},
    {"wrap_event", (PyCFunction)(void (*)(void))fn_wrap_event, METH_FASTCALL,
     "wrap_event(cls, handle, device, owner): an event borrowing a live CUevent another library made."},
    {"open_ipc_event", (PyCFunction)(void (*)(void))fn_open_ipc_event, METH_FASTCALL,
     "open_ipc_event(cls, device, handle) -> cls: an event another process exported"},
    {"live_events", fn_live_events, METH_NOARGS, "the count of events made and not yet destroyed"},
    {"live_streams", fn_live_streams, METH_NOARGS, "the count of streams made and not yet destroyed"},
    {"release", (PyCFunction)(void (*)(void))fn_release, METH_FASTCALL,
     "release(key, kind): the one close of a Go key (deferred inside host callbacks; forgotten after fork)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "streambridge._native.core",
                                    "The objects' core and the one path of the frequent calls (see core.c).", -1,
                                    methods};

__attribute__((visibility("default"))) PyObject *sb_core_module(void) {
    static PyObject *m;
    if (m == NULL) {
        if (pthread_atfork(NULL, NULL, mark_forked) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
            return NULL;
        }
        callback_errors_list = PyList_New(0);
        deferred = PyList_New(0);
        name_record = PyUnicode_InternFromString("_record");
        name_wait = PyUnicode_InternFromString("_wait");
        name_cuda_stream = PyUnicode_InternFromString("__cuda_stream__");
        name_call = PyUnicode_InternFromString("_call");
        name_stream = PyUnicode_InternFromString("stream");
        name_shared_mem = PyUnicode_InternFromString("shared_mem");
        if (callback_errors_list == NULL || deferred == NULL || name_record == NULL ||
            name_wait == NULL || name_cuda_stream == NULL || name_call == NULL ||
            name_stream == NULL || name_shared_mem == NULL || PyType_Ready(&StreamCoreType) < 0 ||
            PyType_Ready(&ExternalCoreType) < 0 || PyType_Ready(&OwnedCoreType) < 0 ||
            PyType_Ready(&EventCoreType) < 0 || PyType_Ready(&KernelCoreType) < 0 ||
            PyType_Ready(&ModuleCoreType) < 0)
            return NULL;
        PyObject *threading = PyImport_ImportModule("threading");
        PyObject *main = threading == NULL ? NULL : PyObject_CallMethod(threading, "main_thread", NULL);
        PyObject *ident = main == NULL ? NULL : PyObject_GetAttrString(main, "ident");
        Py_XDECREF(threading);
        Py_XDECREF(main);
        if (ident == NULL)
            return NULL;
        main_thread = PyLong_AsUnsignedLong(ident);
        Py_DECREF(ident);
        if (PyErr_Occurred())
            return NULL;
        m = PyModule_Create(&module);
        if (m == NULL || PyModule_AddObjectRef(m, "StreamCore", (PyObject *)&StreamCoreType) < 0 ||
            PyModule_AddObjectRef(m, "ExternalCore", (PyObject *)&ExternalCoreType) < 0 ||
            PyModule_AddObjectRef(m, "OwnedCore", (PyObject *)&OwnedCoreType) < 0 ||
            PyModule_AddObjectRef(m, "EventCore", (PyObject *)&EventCoreType) < 0 ||
            PyModule_AddObjectRef(m, "KernelCore", (PyObject *)&KernelCoreType) < 0 ||
            PyModule_AddObjectRef(m, "ModuleCore", (PyObject *)&ModuleCoreType) < 0) {
            Py_CLEAR(m);
            return NULL;
        }
    }
    return Py_NewRef(m);
}
