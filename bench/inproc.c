// The C floor inside the Python benchmark's own process: driver_bench.c's loops, run on the
// streams and the event that bench/python_bench.py made, so that the driver is in the same
// state for both (what the process made and ran before changes what a call costs: see
// bench/RESULTS.md, "Where the time goes"). python_bench.py compiles it with nvcc (or cc and
// CUDA's headers) and calls each loop once through ctypes, n calls in it. Each returns ns a
// loop iteration, or -1 where the driver failed.
#include <cuda.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

double record_wait_ns(CUstream a, CUstream b, CUevent e, long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++)
    if (cuEventRecord(e, a) != CUDA_SUCCESS || cuStreamWaitEvent(b, e, 0) != CUDA_SUCCESS) return -1;
  return (now_ns() - t0) / n;
}

double query_ns(CUstream s, long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUresult r = cuStreamQuery(s);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) return -1;
  }
  return (now_ns() - t0) / n;
}

double event_query_ns(CUevent e, long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUresult r = cuEventQuery(e);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) return -1;
  }
  return (now_ns() - t0) / n;
}

/* In the calling thread's current context. */
double event_create_destroy_ns(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUevent e;
    if (cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS || cuEventDestroy(e) != CUDA_SUCCESS) return -1;
  }
  return (now_ns() - t0) / n;
}
