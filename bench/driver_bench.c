// The floor under any wrapper: the loops of streams/bench_test.go, written in C against the
// CUDA driver API. Build: nvcc -O2 bench/driver_bench.c -lcuda -o driver_bench
// Run: ./driver_bench internal/kernels/kernels.ptx
// Prints lines shaped like Go's benchmark output, so benchstat compares both (bench/run.sh).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floor.h"

#define CHECK(call)                                                          \
  do {                                                                       \
    CUresult r_ = (call);                                                    \
    if (r_ != CUDA_SUCCESS) {                                                \
      const char *name_ = "?";                                               \
      cuGetErrorName(r_, &name_);                                            \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, name_);  \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static CUstream a, b;
static CUevent ev;
static CUfunction empty;
static CUcontext ctx;
static volatile int ran;

static void CUDA_CB set_ran(void *p) { __atomic_store_n((volatile int *)p, 1, __ATOMIC_RELEASE); }

static void record_wait(void) { CHECK(floor_record_wait(ev, a, b)); }
static void query(void) { CHECK(floor_query(a)); }
/* The query streambridge makes (Go's Query, Python's query()): in relaxed capture mode, so
   that another thread's global capture is not invalidated by it. */
static void query_relaxed(void) {
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  CHECK(cuThreadExchangeStreamCaptureMode(&m));
  CUresult r = floor_query(a);
  CHECK(cuThreadExchangeStreamCaptureMode(&m));
  CHECK(r);
}
/* A call that does nothing in the driver, as Go's BenchmarkCrossing: Go's row minus this one
   is what each Go call pays to reach C. */
static void crossing(void) { CHECK(floor_crossing()); }
static void event_create_destroy(void) { CHECK(floor_event_create_destroy(CU_EVENT_DISABLE_TIMING)); }
static void launch_empty(void) { CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, a, NULL, NULL)); }
static void host_func_latency(void) {
  ran = 0;
  CHECK(cuLaunchHostFunc(a, set_ran, (void *)&ran));
  while (!__atomic_load_n(&ran, __ATOMIC_ACQUIRE)) {
  }
}
static void CUDA_CB count_ran(void *p) { __atomic_add_fetch((volatile long *)p, 1, __ATOMIC_RELAXED); }
static volatile long ran_count;
/* As Go's BenchmarkHostFuncBurst: 64 host functions back to back, then synchronize. */
static void host_func_burst(void) {
  for (int i = 0; i < 64; i++) CHECK(cuLaunchHostFunc(a, count_ran, (void *)&ran_count));
  CHECK(cuStreamSynchronize(a));
}

/* As Go's warm: the cost of some calls (cuStreamQuery) depends on the process's history
   (see the "history" mode), so every benchmark starts from one defined state: 2M
   record+wait pairs on scratch streams, destroyed. */
static int warming = 1;

static void warm(void) {
  if (!warming) return;
  CUstream a1, b1;
  CUevent e1;
  CHECK(cuStreamCreate(&a1, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&b1, CU_STREAM_NON_BLOCKING));
  CHECK(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  for (long i = 0; i < 2000000; i++) {
    CHECK(cuEventRecord(e1, a1));
    CHECK(cuStreamWaitEvent(b1, e1, 0));
  }
  CHECK(cuStreamSynchronize(a1));
  CHECK(cuStreamSynchronize(b1));
  CHECK(cuEventDestroy(e1));
  CHECK(cuStreamDestroy(a1));
  CHECK(cuStreamDestroy(b1));
}

/* Each benchmark gets fresh streams and event, as each Go benchmark does (setupBench):
   the cost of some calls (cuStreamQuery) depends on the stream's history. */
static void bench(const char *name, void (*fn)(void), long iters) {
  CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  warm();
  if (fn == query || fn == query_relaxed) { /* as Go's queryReady */
    CHECK(cuEventRecord(ev, a));
    CHECK(cuStreamSynchronize(a));
  }
  for (long i = 0; i < iters / 10; i++) fn(); /* warm up */
  CHECK(cuStreamSynchronize(a));
  double t0 = now_ns();
  for (long i = 0; i < iters; i++) fn();
  CHECK(cuStreamSynchronize(a));
  CHECK(cuStreamSynchronize(b));
  double dt = now_ns() - t0;
  printf("BenchmarkC/%s\t%ld\t%.1f ns/op\n", name, iters, dt / iters);
  fflush(stdout);
  CHECK(cuEventDestroy(ev));
  CHECK(cuStreamDestroy(a));
  CHECK(cuStreamDestroy(b));
}

/* As Go's throughput benchmarks (streams/bench_test.go): n threads at once, each with the
   context current and two streams and an event of its own, iters calls in all (iters/n
   each), started together; ns/op is wall time per call over all of them. */
struct worker {
  long calls;
  int query; /* 0: record+wait pairs, 1: queries */
  CUstream a, b;
  CUevent e;
  pthread_barrier_t *start, *done;
};

static void *work(void *p) {
  struct worker *w = p;
  CHECK(cuCtxSetCurrent(ctx));
  pthread_barrier_wait(w->start);
  for (long i = 0; i < w->calls; i++) {
    if (w->query)
      CHECK(floor_query(w->a));
    else
      CHECK(floor_record_wait(w->e, w->a, w->b));
  }
  pthread_barrier_wait(w->done);
  return NULL;
}

static void throughput(const char *name, int query, int n, long iters) {
  struct worker w[16];
  pthread_t t[16];
  pthread_barrier_t start, done;
  pthread_barrier_init(&start, NULL, n + 1);
  pthread_barrier_init(&done, NULL, n + 1);
  warm();
  for (int i = 0; i < n; i++) {
    w[i] = (struct worker){iters / n + (i < iters % n), query, NULL, NULL, NULL, &start, &done};
    CHECK(cuStreamCreate(&w[i].a, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&w[i].b, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&w[i].e, CU_EVENT_DISABLE_TIMING));
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  pthread_barrier_wait(&start);
  double t0 = now_ns();
  pthread_barrier_wait(&done);
  double dt = now_ns() - t0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    CHECK(cuStreamSynchronize(w[i].a));
    CHECK(cuStreamSynchronize(w[i].b));
    CHECK(cuEventDestroy(w[i].e));
    CHECK(cuStreamDestroy(w[i].a));
    CHECK(cuStreamDestroy(w[i].b));
  }
  pthread_barrier_destroy(&start);
  pthread_barrier_destroy(&done);
  printf("BenchmarkC/%s/goroutines=%d\t%ld\t%.1f ns/op\t%.0f calls/s\n", name, n, iters, dt / iters,
         iters / dt * 1e9);
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s kernels.ptx [count]\n", argv[0]);
    return 2;
  }
  int count = argc > 2 ? atoi(argv[2]) : 3;
  CUdevice dev;
  CUmodule mod;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoad(&mod, argv[1]));
  CHECK(cuModuleGetFunction(&empty, mod, "empty"));
  if (argc > 3 && strcmp(argv[3], "threads") == 0) { /* as Go's *Throughput benchmarks */
    static const int counts[] = {1, 2, 4, 8, 16};
    for (int i = 0; i < count; i++)
      for (int k = 0; k < 5; k++) {
        throughput("RecordWaitThroughput", 0, counts[k], 2000000);
        throughput("QueryThroughput", 1, counts[k], 2000000);
      }
    return 0;
  }
  if (argc > 3) { /* "history": how cuStreamQuery's cost depends on what ran before */
    warming = 0;
    bench("QueryFirst", query, 200000);
    bench("RecordWait", record_wait, 2000000);
    bench("QueryAfterRecordWait", query, 200000);
    bench("QueryAfterRecordWait2", query, 2000000);
    bench("LaunchEmpty", launch_empty, 1000);
    bench("QueryAfterLaunch", query, 200000);
    bench("HostFuncLatency", host_func_latency, 100);
    bench("QueryAfterHostFunc", query, 200000);
    return 0;
  }
  for (int i = 0; i < count; i++) {
    bench("RecordWait", record_wait, 2000000);
    bench("Query", query, 2000000);
    bench("QueryRelaxed", query_relaxed, 2000000);
    bench("Crossing", crossing, 2000000);
    bench("EventCreateClose", event_create_destroy, 500000);
    bench("LaunchEmpty", launch_empty, 300000);
    bench("HostFuncLatency", host_func_latency, 30000);
    bench("HostFuncBurst", host_func_burst, 2000);
  }
  return 0;
}
