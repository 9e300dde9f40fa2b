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
  default: exit(2);
  }
  fflush(stdout);
  exit(0);
}

int main(int argc, char **argv) {
  int only = argc > 1 ? atoi(argv[1]) : -1;
  for (int which = 0; which < 14; which++) {
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
