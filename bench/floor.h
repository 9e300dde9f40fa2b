// The C floor's operations, each the driver calls and nothing else, written once for the
// program that times them (driver_bench.c, one thread and many) and for the loops
// python_bench.py runs inside its own process (inproc.c). Each returns the driver's result;
// a query's CUDA_ERROR_NOT_READY is an answer, not an error.
#include <cuda.h>

static inline CUresult floor_record_wait(CUevent e, CUstream from, CUstream to) {
  CUresult r = cuEventRecord(e, from);
  return r != CUDA_SUCCESS ? r : cuStreamWaitEvent(to, e, 0);
}

static inline CUresult floor_query(CUstream s) {
  CUresult r = cuStreamQuery(s);
  return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
}

static inline CUresult floor_event_query(CUevent e) {
  CUresult r = cuEventQuery(e);
  return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
}

/* In the calling thread's current context. */
static inline CUresult floor_event_create_destroy(unsigned flags) {
  CUevent e;
  CUresult r = cuEventCreate(&e, flags);
  return r != CUDA_SUCCESS ? r : cuEventDestroy(e);
}

/* A call that does nothing in the driver: what reaching the driver costs a caller. */
static inline CUresult floor_crossing(void) {
  int v;
  return cuDriverGetVersion(&v);
}
