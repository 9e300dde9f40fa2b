// Which calls the real driver lets race a capture on other threads: two or three threads
// loop on one pair of calls each, for a few seconds, in a child process per case, so a crash
// is seen as its signal. The probe behind streambridge's capture lock (streams/graph.go,
// docs/lifetimes.md, issue 49). Every call's result is counted, not checked: errors are
// expected; what is looked for is a crash or a hang.
// Build: gcc -O2 bench/capture_races.c -I/usr/local/cuda/include -lcuda -lpthread -o capture_races
// Run: ./capture_races [seconds [mode [case]]] (mode: 0 global, 1 thread-local, 2 relaxed, the default;
// BLOCKING_O=1: O is a blocking stream; SYNC_RELAXED=1: the synchronizers of cases 38-48 relaxed; PROGRESS=1: each thread's calls/failures every tenth of a second; NO_HOST_NODE=1: the executables of the graph cases record an event instead; NO_USER_OBJECT=1:
// their host node has no user object)
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static CUcontext ctx;
static CUstream O, t, u, t2;
static CUevent e, f, fence;
static volatile int stop;
static CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
static void nothing(void *p) { (void)p; }
static long calls[8], fails[8];
static int last[8]; // the last failure's code, per thread
#define COUNT(i, call) do { CUresult r_ = (call); calls[i]++; if (r_ != CUDA_SUCCESS) { fails[i]++; last[i] = r_; } } while (0)

// capturer: Begin, a record of e into the capture, End, the graph destroyed, on O.
static void *capturer(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) {
    CUgraph g = 0;
    COUNT(i, cuStreamBeginCapture(O, mode));
    COUNT(i, cuEventRecord(e, O));
    COUNT(i, cuStreamEndCapture(O, &g));
    if (g) cuGraphDestroy(g);
  }
  return NULL;
}
static void *waiter(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); while (!stop) COUNT(i, cuStreamWaitEvent(t, e, 0)); return NULL; }
static void *waiter2(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); while (!stop) COUNT(i, cuStreamWaitEvent(t2, e, 0)); return NULL; }
static void *recorder(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); while (!stop) COUNT(i, cuEventRecord(e, O)); return NULL; }
static void *outside_recorder(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); while (!stop) COUNT(i, cuEventRecord(e, u)); return NULL; }
static void *isolated(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { COUNT(i, cuEventRecord(f, u)); COUNT(i, cuStreamWaitEvent(O, f, 0)); }
  return NULL;
}
static void *fencer(void *p) { // WaitStream(t, O): O's one fence, recorded on O and waited on by t
  long i = (long)p; cuCtxSetCurrent(ctx);
  CUstream to = i % 2 ? t : t2;
  while (!stop) { COUNT(i, cuEventRecord(fence, O)); COUNT(i, cuStreamWaitEvent(to, fence, 0)); }
  return NULL;
}
static void *asker(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx); CUstreamCaptureStatus st;
  while (!stop) COUNT(i, cuStreamIsCapturing(O, &st));
  return NULL;
}
static void *event_maker(void *p) { // an event recorded into the capture, then destroyed
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { CUevent x; if (cuEventCreate(&x, CU_EVENT_DISABLE_TIMING)) continue; COUNT(i, cuEventRecord(x, O)); COUNT(i, cuEventDestroy(x)); }
  return NULL;
}
static void *joiner_leaver(void *p) { // t joins O's capture and joins back: the documented fork and join
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { COUNT(i, cuStreamWaitEvent(t, e, 0)); COUNT(i, cuEventRecord(f, t)); COUNT(i, cuStreamWaitEvent(O, f, 0)); }
  return NULL;
}

static void *stream_maker(void *p) { // other streams made and destroyed
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { CUstream x; COUNT(i, cuStreamCreate(&x, CU_STREAM_NON_BLOCKING)); cuStreamDestroy(x); }
  return NULL;
}
static void *plain_event_maker(void *p) { // events never recorded, made and destroyed
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { CUevent x; COUNT(i, cuEventCreate(&x, CU_EVENT_DISABLE_TIMING)); cuEventDestroy(x); }
  return NULL;
}
static void *info_asker(void *p) { // the unversioned entry point streambridge's Go core calls
  long i = (long)p; cuCtxSetCurrent(ctx);
  CUresult (*info)(CUstream, CUstreamCaptureStatus *, unsigned long long *) =
    (CUresult (*)(CUstream, CUstreamCaptureStatus *, unsigned long long *))dlsym(RTLD_DEFAULT, "cuStreamGetCaptureInfo");
  CUstreamCaptureStatus st; unsigned long long id;
  while (!stop) COUNT(i, info(O, &st, &id));
  return NULL;
}
// self_asker: Begin, the capture status asked (the versioned entry point the C core calls),
// a record of e into the capture, asked again, End, on O: the asks never meet a begin or an end.
static void *self_asker(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  CUstreamCaptureStatus st; cuuint64_t id; CUgraph cg;
  while (!stop) {
    CUgraph g = 0;
    COUNT(i, cuStreamBeginCapture(O, mode));
    COUNT(i, cuStreamGetCaptureInfo(O, &st, &id, &cg, NULL, NULL, NULL));
    COUNT(i, cuEventRecord(e, O));
    COUNT(i, cuStreamGetCaptureInfo(O, &st, &id, &cg, NULL, NULL, NULL));
    COUNT(i, cuStreamEndCapture(O, &g));
    if (g) cuGraphDestroy(g);
  }
  return NULL;
}
// sample_maker: what the Go check's first learning makes and destroys (internal/cuda,
// streamsMadeOtherWays): a blocking stream, one of the greatest priority, an event.
static void *sample_maker(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  int least, greatest; cuCtxGetStreamPriorityRange(&least, &greatest);
  while (!stop) {
    CUstream b, g; CUevent x;
    COUNT(i, cuStreamCreate(&b, 0));
    COUNT(i, cuStreamCreateWithPriority(&g, CU_STREAM_NON_BLOCKING, greatest));
    COUNT(i, cuEventCreate(&x, CU_EVENT_DISABLE_TIMING));
    cuEventDestroy(x); cuStreamDestroy(g); cuStreamDestroy(b);
  }
  return NULL;
}
static void *unrelated(void *p) { // record and wait on streams and an event the capture never sees
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { COUNT(i, cuEventRecord(f, u)); COUNT(i, cuStreamWaitEvent(t2, f, 0)); }
  return NULL;
}
static void *syncer(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); while (!stop) COUNT(i, cuStreamSynchronize(u)); return NULL; }
static void *querier(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&m);
  while (!stop) COUNT(i, cuStreamQuery(O));
  return NULL;
}
static void *host_launcher(void *p) { // host functions on the capturing stream from another thread
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) COUNT(i, cuLaunchHostFunc(O, nothing, NULL));
  return NULL;
}

// steady: one capture on O, begun once and left going while the others run (no begin or
// end races them), into which it records e, over and over: do calls that touch a capture,
// but not its begin or end, race each other safely?
static void *steady(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  COUNT(i, cuStreamBeginCapture(O, mode));
  while (!stop) COUNT(i, cuEventRecord(e, O));
  return NULL;
}

// Executable graphs as streambridge's Go core makes them: captured on t (relaxed), a host
// function whose user object the graph keeps (destroyed by the driver after the graph's
// and every executable's end, their launches run). launcher launches the current one on u;
// remaker destroys it and makes the next; both under gm, as the core's capture lock
// serializes every call on a graph object (CUDA synchronizes none).
static pthread_mutex_t gm = PTHREAD_MUTEX_INITIALIZER;
static CUgraphExec exec;
static int keep_host_node = 1, keep_user_object = 1;
static CUgraphExec make_exec(void) {
  CUgraph g = 0; CUgraphExec x = 0; CUuserObject obj;
  if (cuStreamBeginCapture(t, CU_STREAM_CAPTURE_MODE_RELAXED)) return 0;
  if (keep_host_node) {
    cuLaunchHostFunc(t, nothing, NULL);
    if (keep_user_object && cuUserObjectCreate(&obj, NULL, nothing, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) == CUDA_SUCCESS) {
      CUgraph cg; CUstreamCaptureStatus st;
      if (cuStreamGetCaptureInfo(t, &st, NULL, &cg, NULL, NULL, NULL) == CUDA_SUCCESS)
        cuGraphRetainUserObject(cg, obj, 1, CU_GRAPH_USER_OBJECT_MOVE);
    }
  } else {
    cuEventRecord(f, t);
  }
  if (cuStreamEndCapture(t, &g) || !g) return 0;
  if (cuGraphInstantiateWithFlags(&x, g, 0)) x = 0;
  cuGraphDestroy(g);
  return x;
}
static void *launcher(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { pthread_mutex_lock(&gm); if (exec) COUNT(i, cuGraphLaunch(exec, u)); pthread_mutex_unlock(&gm); }
  return NULL;
}
static void *remaker(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) {
    pthread_mutex_lock(&gm);
    if (exec) COUNT(i, cuGraphExecDestroy(exec));
    exec = make_exec();
    pthread_mutex_unlock(&gm);
    usleep(200);
  }
  return NULL;
}
static void *u_querier(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); while (!stop) COUNT(i, cuStreamQuery(u)); return NULL; }
static void *u_host_launcher(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); while (!stop) COUNT(i, cuLaunchHostFunc(u, nothing, NULL)); return NULL; }
static void *event_syncer(void *p) { // records f on u and waits for it
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { COUNT(i, cuEventRecord(fence, u)); COUNT(i, cuEventSynchronize(fence)); }
  return NULL;
}

// Host functions as the Python package's C core launches them: the stream's capture status
// asked first (under the capture lock shared, which a synchronize does not take), then the
// launch; slow_host_launcher's host function takes 20 us, as one into Python waiting for
// the GIL does.
static void napping(void *p) { (void)p; usleep(20); }
static void *info_host_launcher_of(long i, void (*fn)(void *)) {
  cuCtxSetCurrent(ctx);
  CUstreamCaptureStatus st; unsigned long long id; CUgraph g;
  while (!stop) { COUNT(i, cuStreamGetCaptureInfo(u, &st, &id, &g, NULL, NULL, NULL)); COUNT(i, cuLaunchHostFunc(u, fn, NULL)); }
  return NULL;
}
static void *info_host_launcher(void *p) { return info_host_launcher_of((long)p, nothing); }
static void *slow_host_launcher(void *p) { return info_host_launcher_of((long)p, napping); }
// A synchronize of the capturing stream itself, and of the event recorded into its capture,
// from another thread, as the capture begins and ends; slow_capturer first puts a host function
// of 200 us on the stream, outside any capture, so that the synchronize is waiting as the
// begin comes (docs/lifetimes.md, "A Synchronize already waiting").
static void long_nap(void *p) { (void)p; usleep(200); }
static void *slow_capturer(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) {
    CUgraph g = 0;
    COUNT(i, cuLaunchHostFunc(O, long_nap, NULL));
    COUNT(i, cuStreamBeginCapture(O, mode));
    COUNT(i, cuEventRecord(e, O));
    COUNT(i, cuStreamEndCapture(O, &g));
    if (g) cuGraphDestroy(g);
  }
  return NULL;
}
static void *steady_plain(void *p) { // one capture on O, begun once, nothing recorded into it
  long i = (long)p; cuCtxSetCurrent(ctx);
  COUNT(i, cuStreamBeginCapture(O, mode));
  while (!stop) usleep(1000);
  return NULL;
}
static void *bare_capturer(void *p) { // Begin and End on O, nothing between
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { CUgraph g = 0; COUNT(i, cuStreamBeginCapture(O, mode)); COUNT(i, cuStreamEndCapture(O, &g)); if (g) cuGraphDestroy(g); }
  return NULL;
}
static void *slow_host_launcher_O(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { COUNT(i, cuLaunchHostFunc(O, long_nap, NULL)); usleep(100); }
  return NULL;
}
// SYNC_RELAXED=1: the synchronizing threads' capture mode relaxed first, as streambridge's waits run.
static void sync_mode(void) {
  if (getenv("SYNC_RELAXED")) { CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&m); }
}
static void *f_syncer(void *p) { // an event recorded once on u, outside any capture, synchronized
  long i = (long)p; cuCtxSetCurrent(ctx); sync_mode();
  COUNT(i, cuEventRecord(f, u));
  while (!stop) COUNT(i, cuEventSynchronize(f));
  return NULL;
}
static void *keeping_capturer(void *p) { // as capturer, its graphs never destroyed
  long i = (long)p; cuCtxSetCurrent(ctx);
  while (!stop) { CUgraph g = 0; COUNT(i, cuStreamBeginCapture(O, mode)); COUNT(i, cuEventRecord(e, O)); COUNT(i, cuStreamEndCapture(O, &g)); }
  return NULL;
}
static void *O_syncer(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); sync_mode(); while (!stop) COUNT(i, cuStreamSynchronize(O)); return NULL; }
static void *e_syncer(void *p) { long i = (long)p; cuCtxSetCurrent(ctx); sync_mode(); while (!stop) COUNT(i, cuEventSynchronize(e)); return NULL; }
static void *u_info_asker(void *p) {
  long i = (long)p; cuCtxSetCurrent(ctx);
  CUstreamCaptureStatus st; unsigned long long id; CUgraph g;
  while (!stop) COUNT(i, cuStreamGetCaptureInfo(u, &st, &id, &g, NULL, NULL, NULL));
  return NULL;
}

typedef void *(*worker)(void *);
static const struct { const char *name; worker w[3]; } cases[] = {
  {"capture + wait on its event (join) from another thread", {capturer, waiter}},
  {"capture + wait on its event from two other threads", {capturer, waiter, waiter2}},
  {"capture + record on the capturing stream from another thread", {capturer, recorder}},
  {"capture + re-record of its event on another stream", {capturer, outside_recorder}},
  {"capture + wait of the capturing stream on an outside event", {capturer, isolated}},
  {"capture + two threads recording one fence on it and waiting", {capturer, fencer, fencer}},
  {"capture + capture status asked from another thread", {capturer, asker}},
  {"capture + events recorded into it and destroyed", {capturer, event_maker}},
  {"capture + fork and join from another thread", {capturer, joiner_leaver}},
  {"two threads capturing one stream", {capturer, capturer}},
  {"no capture: record and wait from three threads (control)", {outside_recorder, waiter, waiter2}},
  {"capture + other streams made and destroyed", {capturer, stream_maker}},
  {"capture + events never recorded made and destroyed", {capturer, plain_event_maker}},
  {"capture + cuStreamGetCaptureInfo of the capturing stream", {capturer, info_asker}},
  {"capture + record and wait on streams and an event it never sees", {capturer, unrelated}},
  {"capture + synchronize of another stream", {capturer, syncer}},
  {"capture + relaxed query of the capturing stream", {capturer, querier}},
  {"capture + host functions launched on the capturing stream", {capturer, host_launcher}},
  {"steady capture (no begin or end racing) + waits on its event from two threads", {steady, waiter, waiter2}},
  {"steady capture + fork and join + a fence recorded on it and waited on", {steady, joiner_leaver, fencer}},
  {"steady capture + events recorded into it and destroyed + capture info asked", {steady, event_maker, info_asker}},
  {"steady capture + host functions launched on it + waits on its event", {steady, host_launcher, waiter}},
  {"graph launches (a host node a user object keeps) + synchronize of their stream", {launcher, syncer}},
  {"graph launches + executables destroyed and remade", {launcher, remaker}},
  {"graph launches + executables destroyed and remade + synchronize of their stream", {launcher, remaker, syncer}},
  {"graph launches + executables destroyed and remade + event synchronize on their stream", {launcher, remaker, event_syncer}},
  {"graph launches + query of their stream", {launcher, u_querier}},
  {"graph launches + executables destroyed and remade + query of their stream", {launcher, remaker, u_querier}},
  {"graph launches + host functions launched on their stream", {launcher, u_host_launcher}},
  {"no graph: host functions, capture status asked first, + synchronize of their stream", {info_host_launcher, syncer}},
  {"no graph: host functions, capture status asked first, + synchronize + query of their stream", {info_host_launcher, syncer, u_querier}},
  {"no graph: slow host functions, capture status asked first, + synchronize + query of their stream", {slow_host_launcher, syncer, u_querier}},
  {"no graph: host functions + capture status asked on another thread + synchronize of their stream", {u_host_launcher, u_info_asker, syncer}},
  {"capture, its status asked between (one thread), alone (control)", {self_asker}},
  {"capture, its status asked between + events never recorded made and destroyed", {self_asker, plain_event_maker}},
  {"capture, its status asked between + other streams made and destroyed", {self_asker, stream_maker}},
  {"capture, its status asked between + record and wait on streams it never sees", {self_asker, unrelated}},
  {"capture, its status asked between + blocking and high-priority streams and events made and destroyed", {self_asker, sample_maker}},
  {"capture + synchronize of the capturing stream", {capturer, O_syncer}},
  {"slow host functions, then a capture + synchronize of the capturing stream (waiting as it begins)", {slow_capturer, O_syncer}},
  {"slow host functions, then a capture + synchronize of the event it records", {slow_capturer, e_syncer}},
  {"slow host functions, then a capture + synchronize of the stream and of the event", {slow_capturer, O_syncer, e_syncer}},
  {"steady capture (nothing recorded) + synchronize of the capturing stream", {steady_plain, O_syncer}},
  {"steady capture + synchronize of the event recorded into it", {steady, e_syncer}},
  {"captures begun and ended, nothing between + synchronize of the stream", {bare_capturer, O_syncer}},
  {"no capture: slow host functions + synchronize of the stream (control)", {slow_host_launcher_O, O_syncer}},
  {"captures begun and ended, nothing between + synchronize of an event recorded on another stream", {bare_capturer, f_syncer}},
  {"capture + synchronize of the event it records", {capturer, e_syncer}},
  {"capture, its graphs kept + synchronize of the event it records", {keeping_capturer, e_syncer}},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void run(int which, int seconds) {
  CUdevice dev;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) exit(3);
  cuStreamCreate(&O, getenv("BLOCKING_O") ? 0 : CU_STREAM_NON_BLOCKING); cuStreamCreate(&t, CU_STREAM_NON_BLOCKING);
  cuStreamCreate(&u, CU_STREAM_NON_BLOCKING); cuStreamCreate(&t2, CU_STREAM_NON_BLOCKING);
  cuEventCreate(&e, CU_EVENT_DISABLE_TIMING); cuEventCreate(&f, CU_EVENT_DISABLE_TIMING); cuEventCreate(&fence, CU_EVENT_DISABLE_TIMING);
  if (getenv("NO_HOST_NODE")) keep_host_node = 0;
  if (getenv("NO_USER_OBJECT")) keep_user_object = 0;
  exec = make_exec();
  pthread_t th[3]; int n = 0;
  for (int i = 0; i < 3 && cases[which].w[i]; i++, n++) pthread_create(&th[i], NULL, cases[which].w[i], (void *)(long)i);
  for (int tenth = 0; tenth < 10 * seconds; tenth++) { // PROGRESS=1: the calls so far, each tenth of a second
    usleep(100000);
    if (getenv("PROGRESS")) { printf("  %.1f s:", (tenth + 1) / 10.0); for (int i = 0; i < n; i++) printf(" %ld/%ld", calls[i], fails[i]); printf("\n"); fflush(stdout); }
  }
  stop = 1;
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) printf("  thread %d: %ld calls, %ld failed (last %d)\n", i, calls[i], fails[i], last[i]);
  fflush(stdout);
  exit(0);
}

int main(int argc, char **argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 3;
  if (argc > 2) mode = (CUstreamCaptureMode)atoi(argv[2]);
  int only = argc > 3 ? atoi(argv[3]) : -1;
  printf("capture mode %d\n", (int)mode);
  for (int which = 0; which < NCASES; which++) {
    if (only >= 0 && which != only) continue;
    printf("case %d: %s\n", which, cases[which].name); fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { alarm(seconds + 20); run(which, seconds); }
    int st; waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) printf("  => CRASHED: signal %d (%s)\n", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else printf("  => exit %d\n", WEXITSTATUS(st));
  }
  return 0;
}
