/*
 * streambridge._native core: the objects of the Python package (streams, events, kernels)
 * and the one path of every operation that reaches the driver often: stream query, record,
 * wait, wait_stream, event record, wait and query, host callbacks and kernel launches. Each
 * has one body here, for every stream (owned, borrowed, the special handles 0, 1 and 2) on
 * either driver: the entry points come from the Go core (driver.API.Entry, through internal/plumbing), which offers
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
 * The GIL: a query keeps it; an enqueue, a create and a destroy keep it unless a Python host
 * callback may want it, asked at the driver call (MAY_WAIT); a synchronize, and a module's
 * load and unload (they synchronize the context, so wait for a host callback not yet
 * returned: bench/callback_waits.c), release it.
 *
 * scripts/build-native.sh builds this file into the extension with gopy's generated code;
 * sb_core_module returns the module object. tables.h is generated from Go
 * (internal/boundary).
 *
 * The core is written in parts, one concern each, built as one translation unit: this file
 * includes them in order (below), so that the hot paths keep their static functions
 * inlined across parts; a part uses only what the parts before it define. Where a change
 * goes:
 *   python.inc        the Python the core calls to read an argument (a device, EventOptions, the
 *                     current stream), named once and looked up on first use: no import hooks
 *   errors.inc        the entry points the Go core hands over, and errors raised as their kind
 *   gate.inc          the gate (what no call may be), and entering contexts
 *   capturelock.inc   the capture lock, shared with Go: every call on a stream or an event
 *   objects.inc       the objects' structs
 *   proof.inc         the handle proof: stream and event objects read by loads, guarded
 *   holds.inc         holds: no close under a call in flight
 *   readers.inc       reading arguments: keywords, flags, devices, the constructors' (the
 *                     current device is lifetimes.inc's, declared ahead)
 *   stream_calls.inc  a stream's frequent calls: record, wait, query, wait_event, wait_stream
 *   wait.inc          waiting: synchronize, which Ctrl-C ends
 *   callbacks.inc     host callbacks into Python, captured ones included
 *   stream_type.inc   the stream type: its life in Python, its methods' table
 *   event_calls.inc   an event's calls: record, wait, query, synchronize, elapsed time, IPC
 *   lifetimes.inc     contexts by device, and releases: what a close gives back
 *   event_life.inc    the life of an event: made, closed, destroyed
 *   event.inc         the event type: its arguments, borrowed events, its methods
 *   stream.inc        the life of a stream the core owns
 *   external.inc      foreign streams wrapped: ExternalStream, from_external
 *   kernel.inc        kernels and modules: arguments and launches
 *   xla.inc           JAX's stream as a party: the handler of XLA's FFI (xla_ffi.h) that
 *                     streambridge.jax places in jitted code
 *   module.inc        the module, and closing the objects kept under Go keys
 */
#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
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
/* The Go exports the core calls (pyshim_*), as cgo declares them from gopy's generated Go:
 * declared once, there, so that a call that does not match its export does not compile. */
#include "_cgo_export.h"

/* The core's own code builds clean of -Wall and -Wextra, each warning an error (gopy's C,
 * built beside it, needs some silenced; these override that here), but for two that
 * CPython's own conventions raise: method signatures with unused parameters, and type and
 * module definitions that leave fields to zero. */
#pragma GCC diagnostic error "-Wall"
#pragma GCC diagnostic error "-Wextra"
#pragma GCC diagnostic error "-Wint-conversion"
#pragma GCC diagnostic error "-Wimplicit-function-declaration"
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* A function the frequent calls reach only where they fail or meet something rare (a
 * close's release, the capture lock taken whole, a borrowed handle's proof, the first
 * call): kept out of line and out of the callers' fast paths, which then need no stack
 * frame for it (GCC's cold: the branches to it are taken as unlikely). */
#define SB_COLD __attribute__((cold, noinline))

/* A step of the frequent calls small enough to be theirs: inlined where GCC would make it a
 * call (the holds' own-thread checks, holds.inc). */
#define SB_INLINE __attribute__((always_inline)) inline

/* A word the core lock guards (gate.inc), read without it: where a record looks whether it
 * has anything to do under the lock (see Holds), and a lookup kept once (keep_once). */
#ifdef Py_GIL_DISABLED
#define SB_READ(word) __atomic_load_n(&(word), __ATOMIC_ACQUIRE)
#else
#define SB_READ(word) (word)
#endif

#include "python.inc"
#include "errors.inc"
#include "gate.inc"
#include "capturelock.inc"
#include "objects.inc"
#include "proof.inc"
#include "holds.inc"
#include "readers.inc"
#include "stream_calls.inc"
#include "wait.inc"
#include "callbacks.inc"
#include "stream_type.inc"
#include "event_calls.inc"
#include "lifetimes.inc"
#include "event_life.inc"
#include "event.inc"
#include "stream.inc"
#include "external.inc"
#include "kernel.inc"
#include "xla.inc"
#include "module.inc"
