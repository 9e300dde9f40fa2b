// The C floor's operations, each the driver calls and nothing else, written once for the
// program that times them (driver_bench.c, one thread and many) and for the loops the
// benchmarks run inside their own processes (inproc.c). Each returns the driver's result;
// a query's CUDA_ERROR_NOT_READY is an answer, not an error. And the clock both read, and
// the one harness of many threads at once.
#include <cuda.h>
#include <pthread.h>
#include <time.h>

static inline double floor_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline CUresult floor_record_wait(CUevent e, CUstream from, CUstream to) {
  CUresult r = cuEventRecord(e, from);
  return r != CUDA_SUCCESS ? r : cuStreamWaitEvent(to, e, 0);
}

static inline CUresult floor_query(CUstream s) {
  CUresult r = cuStreamQuery(s);
  return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
}

/* The query streambridge makes (Go's Query, Python's query()): in relaxed capture mode, so
   that another thread's global capture is not invalidated by it (issue 25). */
static inline CUresult floor_query_relaxed(CUstream s) {
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  CUresult r = cuThreadExchangeStreamCaptureMode(&m);
  if (r != CUDA_SUCCESS) return r;
  CUresult q = floor_query(s);
  r = cuThreadExchangeStreamCaptureMode(&m);
  return q != CUDA_SUCCESS ? q : r;
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

/* What each of floor_threads' threads calls: a record+wait pair, a query of its stream, or
   a launch of fn (no parameters, one thread) on its stream. */
enum { FLOOR_PAIR, FLOOR_QUERY, FLOOR_LAUNCH };

static inline CUresult floor_launch(CUfunction fn, CUstream s) {
  return cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
}

struct floor_worker {
  CUcontext ctx;
  long calls;
  int mode;
  CUfunction fn;
  CUstream a, b;
  CUevent e;
  CUresult r;
  pthread_barrier_t *start, *done;
};

static void *floor_work(void *p) {
  struct floor_worker *w = p;
  w->r = cuCtxSetCurrent(w->ctx);
  pthread_barrier_wait(w->start);
  for (long i = 0; i < w->calls && w->r == CUDA_SUCCESS; i++)
    w->r = w->mode == FLOOR_QUERY    ? floor_query(w->a)
           : w->mode == FLOOR_LAUNCH ? floor_launch(w->fn, w->a)
                                     : floor_record_wait(w->e, w->a, w->b);
  pthread_barrier_wait(w->done);
  return NULL;
}

/* Throughput, as Go's *Throughput benchmarks: n threads (at most 16) at once, each with ctx
   current and two streams and an event of its own, iters calls in all (iters/n each),
   started together, each call what mode says (fn: the kernel of FLOOR_LAUNCH, else NULL).
   ns a call over all of them (wall time), or -1 where the driver failed. */
static inline double floor_threads(CUcontext ctx, int mode, CUfunction fn, int n, long iters) {
  struct floor_worker w[16];
  pthread_t t[16];
  pthread_barrier_t start, done;
  if (n < 1 || n > 16) return -1;
  CUresult r = cuCtxSetCurrent(ctx);
  for (int i = 0; i < n; i++) {
    w[i] = (struct floor_worker){ctx, iters / n + (i < iters % n), mode, fn, NULL, NULL, NULL, CUDA_SUCCESS,
                                 &start, &done};
    if (r == CUDA_SUCCESS) r = cuStreamCreate(&w[i].a, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) r = cuStreamCreate(&w[i].b, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) r = cuEventCreate(&w[i].e, CU_EVENT_DISABLE_TIMING);
  }
  double dt = -1;
  if (r == CUDA_SUCCESS) {
    pthread_barrier_init(&start, NULL, n + 1);
    pthread_barrier_init(&done, NULL, n + 1);
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, floor_work, &w[i]);
    pthread_barrier_wait(&start);
    double t0 = floor_now_ns();
    pthread_barrier_wait(&done);
    dt = floor_now_ns() - t0;
    for (int i = 0; i < n; i++) {
      pthread_join(t[i], NULL);
      if (w[i].r != CUDA_SUCCESS) dt = -1;
    }
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
  }
  for (int i = 0; i < n; i++) {
    CUstream s[2] = {w[i].a, w[i].b};
    for (int k = 0; k < 2; k++)
      if (s[k] != NULL) {
        cuStreamSynchronize(s[k]);
        cuStreamDestroy(s[k]);
      }
    if (w[i].e != NULL) cuEventDestroy(w[i].e);
  }
  return dt < 0 ? -1 : dt / iters;
}

/* floor_threads of record+wait pairs, or of queries where query is set. */
static inline double floor_throughput(CUcontext ctx, int query, int n, long iters) {
  return floor_threads(ctx, query ? FLOOR_QUERY : FLOOR_PAIR, NULL, n, iters);
}
