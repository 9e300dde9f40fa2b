// The ceiling of any Python extension for a record+wait: a CPython module whose Stream and
// Event hold a driver handle and whose record(e) and wait_event(e) call cuEventRecord and
// cuStreamWaitEvent on it and do nothing else: no check of a closed or foreign handle, no
// hold, no capture lock, the GIL kept, the event's type asked (METH_O, the interpreter's
// cheapest call with one argument). C's pair (floor.h) is the driver calls alone; this is
// them behind a Python call each, so a loop of it over C's pair is what the interpreter and
// the host give any extension, and streambridge's pair over this one is what its own checks
// cost. Not a product: bench/call_parts.py builds it (cc, CUDA's headers, the running
// Python's) and loads it where it runs, and hands it the handles of streambridge's objects.
// The two calls are found in libcuda.so.1 by name, as a program linked with -lcuda finds
// them, so that it builds with Python's headers alone; use(record, wait) makes them the
// functions at those addresses (the ones the package's core calls, as the driver's
// cuGetProcAddress gave them), and use() the ones found by name again. atomics(k) makes each
// call count itself up k times in a counter of its own cache line before the driver's call
// and down k times after, sequentially consistent (the read-modify-writes of the core's
// capture lock, holds and kept-attached count: op_lock, hold, kept_attached); atomics(0),
// the default, none.
// It declares that it runs without the GIL, as the package's modules do, so that importing
// it on a free-threaded build leaves the GIL off.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdatomic.h>

typedef int CUresult;
typedef void *CUstream, *CUevent;
enum { CUDA_SUCCESS = 0 };
static CUresult (*cuEventRecord)(CUevent, CUstream);
static CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);

typedef struct {
  PyObject_HEAD CUstream ptr;
} BareStream;

typedef struct {
  PyObject_HEAD CUevent ptr;
} BareEvent;

static PyTypeObject BareStreamType, BareEventType;

static struct {
  _Alignas(64) atomic_long n;
} counter;
static int rmws; /* atomics(k) */

#define COUNTED(call)                                            \
  ({                                                             \
    for (int i_ = 0; i_ < rmws; i_++) atomic_fetch_add(&counter.n, 1); \
    CUresult r_ = (call);                                        \
    for (int i_ = 0; i_ < rmws; i_++) atomic_fetch_sub(&counter.n, 1); \
    r_;                                                          \
  })

static PyObject *failed(const char *call, CUresult r) { return PyErr_Format(PyExc_RuntimeError, "%s: %d", call, (int)r); }

static PyObject *bare_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  unsigned long long h;
  if (!PyArg_ParseTuple(args, "K", &h)) return NULL;
  PyObject *o = type->tp_alloc(type, 0);
  if (o != NULL) {
    if (type == &BareStreamType)
      ((BareStream *)o)->ptr = (CUstream)(uintptr_t)h;
    else
      ((BareEvent *)o)->ptr = (CUevent)(uintptr_t)h;
  }
  return o;
}

static PyObject *stream_record(PyObject *self, PyObject *e) {
  if (!PyObject_TypeCheck(e, &BareEventType)) return PyErr_Format(PyExc_TypeError, "record takes a bare Event");
  CUresult r = COUNTED(cuEventRecord(((BareEvent *)e)->ptr, ((BareStream *)self)->ptr));
  return r == CUDA_SUCCESS ? Py_NewRef(Py_None) : failed("cuEventRecord", r);
}

static PyObject *stream_wait_event(PyObject *self, PyObject *e) {
  if (!PyObject_TypeCheck(e, &BareEventType)) return PyErr_Format(PyExc_TypeError, "wait_event takes a bare Event");
  CUresult r = COUNTED(cuStreamWaitEvent(((BareStream *)self)->ptr, ((BareEvent *)e)->ptr, 0));
  return r == CUDA_SUCCESS ? Py_NewRef(Py_None) : failed("cuStreamWaitEvent", r);
}

static void *by_name[2];

static PyObject *use(PyObject *m, PyObject *args) {
  unsigned long long record = 0, wait = 0;
  if (!PyArg_ParseTuple(args, "|KK", &record, &wait)) return NULL;
  cuEventRecord = record ? (void *)(uintptr_t)record : by_name[0];
  cuStreamWaitEvent = wait ? (void *)(uintptr_t)wait : by_name[1];
  Py_RETURN_NONE;
}

static PyObject *atomics(PyObject *m, PyObject *k) {
  rmws = (int)PyLong_AsLong(k);
  if (rmws < 0) rmws = 0;
  return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

static PyMethodDef module_methods[] = {
    {"atomics", atomics, METH_O, "atomics(k): k atomic adds before each driver call and k subtracts after"},
    {"use", use, METH_VARARGS, "use(record, wait): call the functions at these addresses; use(): those found by name"},
    {NULL},
};

static PyMethodDef stream_methods[] = {
    {"record", stream_record, METH_O, "cuEventRecord(e, self)"},
    {"wait_event", stream_wait_event, METH_O, "cuStreamWaitEvent(self, e, 0)"},
    {NULL},
};

static PyTypeObject BareStreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bare_ext.Stream",
    .tp_basicsize = sizeof(BareStream),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = bare_new,
    .tp_methods = stream_methods,
};

static PyTypeObject BareEventType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bare_ext.Event",
    .tp_basicsize = sizeof(BareEvent),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = bare_new,
};

static int exec_module(PyObject *m) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == NULL || (cuEventRecord = dlsym(cuda, "cuEventRecord")) == NULL ||
      (cuStreamWaitEvent = dlsym(cuda, "cuStreamWaitEvent")) == NULL) {
    PyErr_Format(PyExc_ImportError, "bare_ext: %s", dlerror());
    return -1;
  }
  by_name[0] = cuEventRecord;
  by_name[1] = cuStreamWaitEvent;
  if (PyType_Ready(&BareStreamType) < 0 || PyType_Ready(&BareEventType) < 0) return -1;
  if (PyModule_AddObjectRef(m, "Stream", (PyObject *)&BareStreamType) < 0) return -1;
  return PyModule_AddObjectRef(m, "Event", (PyObject *)&BareEventType);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "bare_ext", .m_methods = module_methods, .m_slots = slots};

PyMODINIT_FUNC PyInit_bare_ext(void) { return PyModuleDef_Init(&module); }
