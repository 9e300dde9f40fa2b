// What the real driver does with the lifetimes a capture makes: events recorded into a
// capture that ended or whose stream was destroyed, streams joined to a capture whose origin
// or whose joined stream is destroyed, captures ended from another thread. The probe behind
// the software driver's answers (internal/sim/capture.go, issue 49) and docs/lifetimes.md.
// Build: gcc -O2 bench/capture_lifetimes.c -I/usr/local/cuda/include -lcuda -lpthread -o capture_lifetimes
// Run: ./capture_lifetimes
// Each case runs in a child process of its own, so one that crashes the driver is seen as
// its signal; every step prints the CUresult it got.
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *nm(CUresult r) { const char *n = "?"; cuGetErrorName(r, &n); return n; }
#define STEP(call) do { CUresult r_ = (call); printf("  %-58s %s\n", #call, nm(r_)); fflush(stdout); } while (0)
#define MUST(call) do { CUresult r_ = (call); if (r_) { printf("  setup %s: %s\n", #call, nm(r_)); exit(3); } } while (0)

static CUcontext ctx;
static CUstream O, t, u;
static CUevent e, e2;
static CUgraph G;
static CUgraphExec X;
static void noop(void *p) { (void)p; }

// A user object kept by O's capture graph, as streambridge keeps a captured host function:
// its destructor counts, and kept() says whether and when it ran.
static volatile int freed;
static void count_free(void *p) { (void)p; __sync_fetch_and_add(&freed, 1); }
static void keep_in_capture(CUstream s) {
  CUstreamCaptureStatus st; CUgraph g = 0; CUuserObject obj;
  MUST(cuStreamGetCaptureInfo(s, &st, NULL, &g, NULL, NULL, NULL));
  MUST(cuUserObjectCreate(&obj, NULL, count_free, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  MUST(cuGraphRetainUserObject(g, obj, 1, CU_GRAPH_USER_OBJECT_MOVE));
}
static void kept(const char *after) {
  for (int ms = 0; ms < 3000; ms++) {
    if (freed) { printf("  user object's destructor ran %d ms after %s\n", ms, after); return; }
    usleep(1000);
  }
  printf("  user object's destructor did NOT run within 3 s after %s\n", after);
  STEP(cuCtxSynchronize());
  usleep(200000);
  printf("  ... and after a context synchronize: %s\n", freed ? "ran" : "still not run");
}

static void setup(void) {
  CUdevice dev;
  MUST(cuInit(0)); MUST(cuDeviceGet(&dev, 0)); MUST(cuDevicePrimaryCtxRetain(&ctx, dev)); MUST(cuCtxSetCurrent(ctx));
  MUST(cuStreamCreate(&O, CU_STREAM_NON_BLOCKING)); MUST(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  MUST(cuStreamCreate(&u, CU_STREAM_NON_BLOCKING));
  MUST(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING)); MUST(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
}

static void status(const char *what, CUstream s) {
  CUstreamCaptureStatus st = 99;
  CUresult r = cuStreamIsCapturing(s, &st);
  printf("  capture status of %-40s %s status=%d\n", what, nm(r), (int)st); fflush(stdout);
}

// begin: O captures (relaxed), a host function in it, e recorded in it, t joined to it.
static void begin(CUstreamCaptureMode mode) {
  MUST(cuStreamBeginCapture(O, mode)); MUST(cuLaunchHostFunc(O, noop, NULL));
  MUST(cuEventRecord(e, O)); MUST(cuStreamWaitEvent(t, e, 0));
}

// unsafe: each call the driver may refuse during a capture in global or thread-local mode,
// made once in a capture of its own on O begun in mode on this thread (relaxed: with this
// thread's mode exchanged to relaxed around the call), with what it returned and O's status
// after it.
static void unsafe(CUstreamCaptureMode mode, int relaxed) {
  CUgraph g0; CUgraphExec x0; CUstream s1; CUevent e1; CUuserObject uo;
  MUST(cuStreamBeginCapture(u, CU_STREAM_CAPTURE_MODE_RELAXED)); MUST(cuLaunchHostFunc(u, noop, NULL));
  MUST(cuStreamEndCapture(u, &g0)); MUST(cuGraphInstantiateWithFlags(&x0, g0, 0));
  const char *names[] = {"cuStreamCreate", "cuStreamDestroy", "cuEventCreate", "cuEventDestroy", "cuGraphInstantiate",
                         "cuGraphUpload", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy", "cuUserObjectCreate",
                         "cuEventRecord(other stream)", "cuStreamWaitEvent(other stream)"};
  for (int i = 0; i < 12; i++) {
    CUgraphExec x1 = 0;
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING)); MUST(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    MUST(cuStreamBeginCapture(O, mode)); MUST(cuLaunchHostFunc(O, noop, NULL));
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (relaxed) MUST(cuThreadExchangeStreamCaptureMode(&m));
    CUresult r = 0; CUstream s2 = 0; CUevent e2_ = 0;
    switch (i) {
    case 0: r = cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING); break;
    case 1: r = cuStreamDestroy(s1); s1 = 0; break;
    case 2: r = cuEventCreate(&e2_, 0); break;
    case 3: r = cuEventDestroy(e1); e1 = 0; break;
    case 4: r = cuGraphInstantiateWithFlags(&x1, g0, 0); break;
    case 5: r = cuGraphUpload(x0, u); break;
    case 6: r = cuGraphLaunch(x0, u); break;
    case 7: r = cuGraphExecDestroy(x0); x0 = 0; break;
    case 8: r = cuGraphDestroy(g0); g0 = 0; break;
    case 9: r = cuUserObjectCreate(&uo, NULL, noop, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC); break;
    case 10: r = cuEventRecord(e1, u); break;
    case 11: r = cuStreamWaitEvent(s1, e1, 0); break;
    }
    if (relaxed) MUST(cuThreadExchangeStreamCaptureMode(&m));
    CUstreamCaptureStatus st = 99; cuStreamIsCapturing(O, &st);
    CUgraph g = 0; CUresult re = cuStreamEndCapture(O, &g);
    printf("  %-34s %-40s O's status after: %d; its end: %s\n", names[i], nm(r), (int)st, nm(re)); fflush(stdout);
    if (g) cuGraphDestroy(g);
    if (s2) cuStreamDestroy(s2);
    if (e2_) cuEventDestroy(e2_);
    if (x1) cuGraphExecDestroy(x1);
    if (s1) cuStreamDestroy(s1);
    if (e1) cuEventDestroy(e1);
    cuStreamSynchronize(u);
    if (!x0 && g0) MUST(cuGraphInstantiateWithFlags(&x0, g0, 0));
    if (!g0) { MUST(cuStreamBeginCapture(u, CU_STREAM_CAPTURE_MODE_RELAXED)); MUST(cuLaunchHostFunc(u, noop, NULL)); MUST(cuStreamEndCapture(u, &g0)); }
  }
}

static void *end_elsewhere(void *p) {
  (void)p; cuCtxSetCurrent(ctx);
  CUgraph g = 0;
  STEP(cuStreamEndCapture(O, &g));
  if (g) STEP(cuGraphDestroy(g));
  return NULL;
}

static void *destroy_elsewhere(void *p) { (void)p; cuCtxSetCurrent(ctx); STEP(cuStreamDestroy(O)); return NULL; }

static void run(int which) {
  setup();
  pthread_t th;
  switch (which) {
  case 0: puts("ended: wait on, record of, query of an event recorded in a capture that ended (graph kept, then destroyed)");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamEndCapture(O, &G));
    STEP(cuStreamWaitEvent(u, e, 0)); STEP(cuEventQuery(e)); STEP(cuStreamWaitEvent(u, e2, 0));
    STEP(cuGraphDestroy(G));
    STEP(cuStreamWaitEvent(u, e, 0)); STEP(cuEventQuery(e)); STEP(cuEventSynchronize(e));
    STEP(cuEventRecord(e, u)); STEP(cuStreamWaitEvent(t, e, 0)); STEP(cuEventQuery(e));
    break;
  case 1: puts("origin destroyed: O captures, t joined, O destroyed without EndCapture");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuStreamDestroy(O));
    status("t (joined)", t); STEP(cuStreamQuery(t)); STEP(cuEventQuery(e)); STEP(cuStreamWaitEvent(u, e, 0));
    STEP(cuEventRecord(e2, t)); STEP(cuLaunchHostFunc(t, noop, NULL)); STEP(cuStreamSynchronize(t));
    STEP(cuEventRecord(e, u)); STEP(cuEventQuery(e)); STEP(cuStreamDestroy(t));
    break;
  case 2: puts("joined destroyed: O captures, t joined with work of its own, t destroyed, then EndCapture(O)");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); MUST(cuLaunchHostFunc(t, noop, NULL));
    STEP(cuStreamDestroy(t));
    status("O", O); STEP(cuLaunchHostFunc(O, noop, NULL));
    STEP(cuStreamEndCapture(O, &G)); status("O after end", O);
    if (G) { STEP(cuGraphInstantiateWithFlags(&X, G, 0)); STEP(cuGraphLaunch(X, u)); STEP(cuStreamSynchronize(u)); }
    break;
  case 3: puts("joined destroyed after joining back: t's work waited for by O, t destroyed, EndCapture(O)");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); MUST(cuLaunchHostFunc(t, noop, NULL));
    MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamDestroy(t));
    STEP(cuStreamEndCapture(O, &G));
    if (G) { STEP(cuGraphInstantiateWithFlags(&X, G, 0)); STEP(cuGraphLaunch(X, u)); STEP(cuStreamSynchronize(u)); }
    break;
  case 4: puts("event destroyed while recorded in a capture going on");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuEventDestroy(e)); MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamEndCapture(O, &G));
    if (G) { STEP(cuGraphInstantiateWithFlags(&X, G, 0)); STEP(cuGraphLaunch(X, u)); STEP(cuStreamSynchronize(u)); }
    break;
  case 5: puts("global capture ended from another thread");
    begin(CU_STREAM_CAPTURE_MODE_GLOBAL); MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    pthread_create(&th, NULL, end_elsewhere, NULL); pthread_join(th, NULL);
    status("O", O); status("t", t); STEP(cuStreamEndCapture(O, &G)); STEP(cuStreamWaitEvent(u, e, 0));
    break;
  case 6: puts("global capture's origin destroyed from another thread");
    begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    pthread_create(&th, NULL, destroy_elsewhere, NULL); pthread_join(th, NULL);
    status("t", t); STEP(cuStreamQuery(t)); STEP(cuStreamWaitEvent(u, e, 0)); STEP(cuEventRecord(e, u));
    break;
  case 7: puts("EndCapture of a joined stream (not the origin)");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuStreamEndCapture(t, &G)); status("O", O); status("t", t);
    MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamEndCapture(O, &G));
    break;
  case 8: puts("a second capture: wait on an event recorded in the first, which ended");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamEndCapture(O, &G));
    STEP(cuStreamBeginCapture(O, CU_STREAM_CAPTURE_MODE_RELAXED));
    STEP(cuStreamWaitEvent(O, e, 0)); status("O", O); STEP(cuStreamWaitEvent(u, e, 0)); status("u", u);
    break;
  case 9: puts("a wait on an event of another capture going on (merge)");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuStreamBeginCapture(u, CU_STREAM_CAPTURE_MODE_RELAXED));
    STEP(cuStreamWaitEvent(u, e, 0)); status("u", u); status("O", O);
    break;
  case 10: puts("graph launch and exec launch on a joined stream; joined stream's query and synchronize");
    MUST(cuStreamBeginCapture(u, CU_STREAM_CAPTURE_MODE_RELAXED)); MUST(cuLaunchHostFunc(u, noop, NULL));
    MUST(cuStreamEndCapture(u, &G)); MUST(cuGraphInstantiateWithFlags(&X, G, 0));
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuGraphLaunch(X, t)); status("O", O); STEP(cuStreamQuery(t)); STEP(cuStreamSynchronize(t));
    break;
  case 11: puts("origin destroyed while invalidated, joined stream left");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuStreamQuery(O)); status("O", O); status("t", t);
    STEP(cuStreamDestroy(O)); status("t", t); STEP(cuStreamQuery(t)); STEP(cuStreamWaitEvent(u, e, 0));
    break;
  case 12: puts("EndCapture of an invalidated capture: the joined streams");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuStreamQuery(O)); STEP(cuStreamEndCapture(O, &G)); status("O", O); status("t", t);
    STEP(cuStreamQuery(t)); STEP(cuStreamWaitEvent(u, e, 0));
    break;
  case 13: puts("the capture's graph destroyed by GetCaptureInfo's graph handle? (no): graph destroyed after end, exec kept");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamEndCapture(O, &G)); STEP(cuGraphInstantiateWithFlags(&X, G, 0)); STEP(cuGraphDestroy(G));
    STEP(cuGraphLaunch(X, u)); STEP(cuStreamSynchronize(u)); STEP(cuGraphExecDestroy(X));
    break;
  case 14: puts("user object kept by a capture: ended, graph destroyed (the control)");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); keep_in_capture(O); MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamEndCapture(O, &G)); STEP(cuGraphDestroy(G)); kept("cuGraphDestroy");
    break;
  case 15: puts("user object kept by a capture invalidated, then ended (no graph)");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); keep_in_capture(O); STEP(cuStreamQuery(O));
    STEP(cuStreamEndCapture(O, &G)); kept("the failed cuStreamEndCapture");
    break;
  case 16: puts("user object kept by a capture whose origin is destroyed during it");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); keep_in_capture(O);
    STEP(cuStreamDestroy(O)); kept("cuStreamDestroy(O)");
    STEP(cuStreamDestroy(t)); kept("cuStreamDestroy(t), the joined stream");
    break;
  case 17: puts("user object kept by a capture that fails unjoined at its end");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); keep_in_capture(O); MUST(cuLaunchHostFunc(t, noop, NULL));
    STEP(cuStreamEndCapture(O, &G)); kept("the failed cuStreamEndCapture"); status("t", t);
    break;
  case 18: puts("user object kept by a capture ended from a joined stream, then from its origin");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); keep_in_capture(O);
    STEP(cuStreamEndCapture(t, &G)); STEP(cuStreamEndCapture(O, &G)); kept("both ends");
    break;
  case 19: puts("user object kept by a capture, its graph instantiated, destroyed, the exec launched and destroyed");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); keep_in_capture(O); MUST(cuEventRecord(e2, t)); MUST(cuStreamWaitEvent(O, e2, 0));
    STEP(cuStreamEndCapture(O, &G)); STEP(cuGraphInstantiateWithFlags(&X, G, 0)); STEP(cuGraphDestroy(G));
    STEP(cuGraphLaunch(X, u)); STEP(cuGraphExecDestroy(X)); kept("cuGraphExecDestroy (its launch may still run)");
    break;
  case 20: puts("user object kept by a capture invalidated, its origin destroyed without an end");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED); keep_in_capture(O); STEP(cuStreamQuery(O));
    STEP(cuStreamDestroy(O)); kept("cuStreamDestroy(O)");
    break;
  case 21: puts("waits of a capturing stream on a never-recorded event, on one recorded outside; work after an isolation error");
    { CUevent n, r; MUST(cuEventCreate(&n, CU_EVENT_DISABLE_TIMING)); MUST(cuEventCreate(&r, CU_EVENT_DISABLE_TIMING));
      MUST(cuEventRecord(r, u)); MUST(cuStreamSynchronize(u));
      MUST(cuStreamBeginCapture(O, CU_STREAM_CAPTURE_MODE_RELAXED));
      STEP(cuStreamWaitEvent(O, n, 0)); status("O", O); STEP(cuEventRecord(e, O));
      STEP(cuStreamWaitEvent(O, r, 0)); status("O", O);
      STEP(cuEventRecord(e2, O)); STEP(cuStreamWaitEvent(O, n, 0)); STEP(cuStreamWaitEvent(O, e, 0)); STEP(cuLaunchHostFunc(O, noop, NULL));
      STEP(cuStreamWaitEvent(t, e, 0)); status("t", t); STEP(cuEventQuery(e)); STEP(cuEventSynchronize(e));
      STEP(cuStreamBeginCapture(t, CU_STREAM_CAPTURE_MODE_RELAXED)); STEP(cuStreamWaitEvent(t, e, 0)); status("t", t);
      STEP(cuStreamWaitEvent(t, e, 0)); STEP(cuStreamEndCapture(t, &G));
      STEP(cuStreamEndCapture(O, &G)); }
    break;
  case 22: puts("a query of an event recorded in a capture going on, then a second, then its synchronize");
    MUST(cuStreamBeginCapture(O, CU_STREAM_CAPTURE_MODE_RELAXED)); MUST(cuEventRecord(e, O));
    STEP(cuEventQuery(e)); status("O", O); STEP(cuEventQuery(e)); STEP(cuEventSynchronize(e)); STEP(cuStreamWaitEvent(t, e, 0));
    STEP(cuStreamEndCapture(O, &G));
    break;
  case 23: puts("a begin on a stream joined to a capture; a wait of a joined stream on its own capture's event after invalidation");
    begin(CU_STREAM_CAPTURE_MODE_RELAXED);
    STEP(cuStreamBeginCapture(t, CU_STREAM_CAPTURE_MODE_RELAXED)); status("O", O); status("t", t);
    STEP(cuStreamEndCapture(O, &G));
    break;
  case 24: puts("the calls a capture in global mode on this thread refuses");
    unsafe(CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
    break;
  case 25: puts("the calls a capture in thread-local mode on this thread refuses");
    unsafe(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 0);
    break;
  case 26: puts("the same calls with the thread's mode relaxed around them, a global capture on this thread");
    unsafe(CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
    break;
  case 27: puts("other work on a stream whose capture is invalidated");
    { CUdeviceptr dp; static char host[64]; MUST(cuMemAlloc(&dp, 64));
      MUST(cuStreamBeginCapture(u, CU_STREAM_CAPTURE_MODE_RELAXED)); MUST(cuLaunchHostFunc(u, noop, NULL));
      MUST(cuStreamEndCapture(u, &G)); MUST(cuGraphInstantiateWithFlags(&X, G, 0));
      MUST(cuStreamBeginCapture(O, CU_STREAM_CAPTURE_MODE_RELAXED)); MUST(cuLaunchHostFunc(O, noop, NULL));
      STEP(cuGraphLaunch(X, O)); status("O", O); STEP(cuGraphLaunch(X, O));
      STEP(cuMemcpyHtoDAsync(dp, host, 64, O)); STEP(cuMemsetD8Async(dp, 0, 64, O)); STEP(cuStreamQuery(O)); STEP(cuStreamSynchronize(O));
      STEP(cuStreamEndCapture(O, &G)); }
    break;
  default: exit(2);
  }
  fflush(stdout);
  exit(0);
}

int main(int argc, char **argv) {
  int only = argc > 1 ? atoi(argv[1]) : -1;
  for (int which = 0; which < 28; which++) {
    if (only >= 0 && which != only) continue;
    printf("case %d: ", which); fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) run(which);
    int st; waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) printf("  => CRASHED: signal %d (%s)\n", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else printf("  => exit %d\n", WEXITSTATUS(st));
  }
  return 0;
}
