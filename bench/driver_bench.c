// The floor under any wrapper: the loops of streams/bench_test.go, written in C against the
// CUDA driver API. Build: nvcc -O2 bench/driver_bench.c -lcuda -o driver_bench
// Run: ./driver_bench internal/kernels/kernels.ptx
// Prints lines shaped like Go's benchmark output, so benchstat compares both (bench/run.sh).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static CUstream a, b;
static CUevent ev;
static CUfunction empty;
static CUcontext ctx;
static volatile int ran;

static void CUDA_CB set_ran(void *p) { __atomic_store_n((volatile int *)p, 1, __ATOMIC_RELEASE); }

static void record_wait(void) { CHECK(floor_record_wait(ev, a, b)); }
static void query(void) { CHECK(floor_query(a)); }
static void query_relaxed(void) { CHECK(floor_query_relaxed(a)); }
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
  double t0 = floor_now_ns();
  for (long i = 0; i < iters; i++) fn();
  CHECK(cuStreamSynchronize(a));
  CHECK(cuStreamSynchronize(b));
  double dt = floor_now_ns() - t0;
  printf("BenchmarkC/%s\t%ld\t%.1f ns/op\n", name, iters, dt / iters);
  fflush(stdout);
  CHECK(cuEventDestroy(ev));
  CHECK(cuStreamDestroy(a));
  CHECK(cuStreamDestroy(b));
}

/* As Go's throughput benchmarks (streams/bench_test.go): floor_throughput, after warm. */
static void throughput(const char *name, int query, int n, long iters) {
  warm();
  double ns = floor_throughput(ctx, query, n, iters);
  if (ns < 0) {
    fprintf(stderr, "%s/goroutines=%d: the driver failed\n", name, n);
    exit(1);
  }
  printf("BenchmarkC/%s/goroutines=%d\t%ld\t%.1f ns/op\t%.0f calls/s\n", name, n, iters, ns, 1e9 / ns);
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
