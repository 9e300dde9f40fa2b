// The C floor inside a benchmark's own process: driver_bench.c's operations (floor.h), run
// on the streams and the event that the benchmark made, so that the driver and the host are
// in the same state for both (what the process made and ran before changes what a call
// costs: see bench/RESULTS.md, "Where the time goes"; and one host's calls ran at one of two
// speeds, a process at a time: "One host, two speeds"). python_bench.py compiles it with
// nvcc (or cc and CUDA's headers) and calls each loop once through ctypes, n calls in it;
// bench/run.sh compiles it for Go's BenchmarkInProcessC, which loads it the same way. Each
// returns ns a loop iteration, or -1 where the driver failed.

#include "floor.h"

/* n times call, timed: ns a call, or -1 at the first that failed. */
#define TIMED(n, call)                               \
  do {                                               \
    double t0 = floor_now_ns();                      \
    for (long i = 0; i < (n); i++)                   \
      if ((call) != CUDA_SUCCESS) return -1;         \
    return (floor_now_ns() - t0) / (n);              \
  } while (0)

double record_wait_ns(CUstream a, CUstream b, CUevent e, long n) { TIMED(n, floor_record_wait(e, a, b)); }

double query_ns(CUstream s, long n) { TIMED(n, floor_query(s)); }

double query_relaxed_ns(CUstream s, long n) { TIMED(n, floor_query_relaxed(s)); }

double event_query_ns(CUevent e, long n) { TIMED(n, floor_event_query(e)); }

double event_create_destroy_ns(long n) { TIMED(n, floor_event_create_destroy(CU_EVENT_DISABLE_TIMING)); }

double crossing_ns(long n) { TIMED(n, floor_crossing()); }

/* floor_throughput in context ctx: n threads, iters calls in all, record+wait pairs (query 0)
   or queries (1), on streams and events it makes. */
double throughput_ns(CUcontext ctx, int query, int n, long iters) { return floor_throughput(ctx, query, n, iters); }

/* The same, each thread launching fn (no parameters, one thread, a kernel that does nothing)
   on a stream of its own. */
double launch_throughput_ns(CUcontext ctx, CUfunction fn, int n, long iters) {
  return floor_threads(ctx, FLOOR_LAUNCH, fn, n, iters);
}

/* When a host function ran: its first line's time, then ran set. */
typedef struct {
  volatile double at;
  volatile int ran;
} stamp_t;

static void CUDA_CB stamp_now(void *p) {
  stamp_t *s = p;
  s->at = floor_now_ns();
  __atomic_store_n(&s->ran, 1, __ATOMIC_RELEASE);
}

/* One host function of C's on stream s, as python_bench.py's callback samples are taken:
   launched on an idle stream, ns from the launch to the function's first line, then the
   stream's synchronize. -1 where the driver failed. */
double host_func_latency_once_ns(CUstream s) {
  static stamp_t st;
  st.ran = 0;
  double t0 = floor_now_ns();
  if (cuLaunchHostFunc(s, stamp_now, &st) != CUDA_SUCCESS) return -1;
  while (!__atomic_load_n(&st.ran, __ATOMIC_ACQUIRE)) {
  }
  double took = st.at - t0;
  return cuStreamSynchronize(s) != CUDA_SUCCESS ? -1 : took;
}
