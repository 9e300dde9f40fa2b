// What a capture in each mode lets another thread do, and what the relaxed capture mode
// costs: the probe behind streambridge's relaxed queries (bench/RESULTS.md, issue 25).
// Build: nvcc -O2 bench/capture_modes.c -lcuda -lpthread -o capture_modes
// Run: ./capture_modes internal/kernels/kernels.ptx
// Prints, for each capture mode and stream kind, what each call from another thread, then
// from the capturing thread itself (in its own mode, then relaxed), returns and what becomes
// of the capture; then the costs. The capturing thread's own case is what a collection run
// inside a capture does (a finalizer that frees memory or unloads a module). The
// calls include allocation, synchronous copies and modules (cuMemFree and cuModuleUnload
// synchronize the context: bench/callback_waits.c), and streams' and events' creates and
// destroys (what a collection of another library's objects may run on any thread).
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { const char *n_ = "?"; \
  cuGetErrorName(r_, &n_); fprintf(stderr, "%d: %s: %s\n", __LINE__, #call, n_); exit(1); } } while (0)
static const char *nm(CUresult r) { const char *n = "?"; cuGetErrorName(r, &n); return n; }
static CUcontext ctx;
static CUstream cap, other, tl;
static CUevent done_ev, cap_ev;
static CUfunction empty;
static int which, relax, itself;
static CUresult got;
static const char *names[] = {"StreamQuery(other)", "EventQuery(done)", "StreamSynchronize(other)",
  "EventSynchronize(done)", "StreamQuery(legacy)", "StreamQuery(ptds)", "StreamQuery(capturing)",
  "EventRecord+Wait(other)", "StreamIsCapturing(other)", "EventQuery(recorded in capture)",
  "MemAlloc", "MemFree", "MemcpyHtoD", "MemcpyDtoH", "ModuleLoadData", "ModuleUnload", "CtxSynchronize",
  "StreamCreate", "StreamDestroy", "EventCreate", "EventDestroy"};
#define NCALLS 21
static CUdeviceptr mem, allocated; /* mem: 64 bytes made before the capture; allocated: by case 10 */
static CUmodule loaded, spare;     /* loaded: by case 14; spare: made before the capture, for case 15 */
static CUstream made_stream, spare_stream; /* made: by case 17; spare: made before the capture, for case 18 */
static CUevent made_event, spare_event;    /* made: by case 19; spare: made before the capture, for case 20 */
static char host[64];
static const char empty_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry k() { ret; }\n";
static void *bystander(void *p) {
  (void)p;
  CHECK(cuCtxSetCurrent(ctx));
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (relax) CHECK(cuThreadExchangeStreamCaptureMode(&m));
  CUstreamCaptureStatus st;
  switch (which) {
  case 0: got = cuStreamQuery(other); break;
  case 1: got = cuEventQuery(done_ev); break;
  case 2: got = cuStreamSynchronize(other); break;
  case 3: got = cuEventSynchronize(done_ev); break;
  case 4: got = cuStreamQuery((CUstream)0); break;
  case 5: got = cuStreamQuery(CU_STREAM_PER_THREAD); break;
  case 6: got = cuStreamQuery(cap); break;
  case 7: got = cuEventRecord(done_ev, other); if (!got) got = cuStreamWaitEvent(tl, done_ev, 0); break;
  case 8: got = cuStreamIsCapturing(other, &st); break;
  case 9: got = cuEventQuery(cap_ev); break;
  case 10: got = cuMemAlloc(&allocated, 64); break;
  case 11: got = cuMemFree(mem); if (!got) mem = 0; break;
  case 12: got = cuMemcpyHtoD(mem, host, 64); break;
  case 13: got = cuMemcpyDtoH(host, mem, 64); break;
  case 14: got = cuModuleLoadData(&loaded, empty_ptx); break;
  case 15: got = cuModuleUnload(spare); if (!got) spare = NULL; break;
  case 16: got = cuCtxSynchronize(); break;
  case 17: got = cuStreamCreate(&made_stream, CU_STREAM_NON_BLOCKING); break;
  case 18: got = cuStreamDestroy(spare_stream); if (!got) spare_stream = NULL; break;
  case 19: got = cuEventCreate(&made_event, CU_EVENT_DISABLE_TIMING); break;
  case 20: got = cuEventDestroy(spare_event); if (!got) spare_event = NULL; break;
  }
  if (relax) CHECK(cuThreadExchangeStreamCaptureMode(&m));
  return NULL;
}
static double now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
int main(int argc, char **argv) {
  CUdevice dev; CUmodule mod;
  CHECK(cuInit(0)); CHECK(cuDeviceGet(&dev, 0)); CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx)); CHECK(cuModuleLoad(&mod, argv[1])); CHECK(cuModuleGetFunction(&empty, mod, "empty"));
  CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&tl, CU_STREAM_NON_BLOCKING));
  CHECK(cuEventCreate(&done_ev, CU_EVENT_DISABLE_TIMING));
  CHECK(cuEventCreate(&cap_ev, CU_EVENT_DISABLE_TIMING));
  CHECK(cuEventRecord(done_ev, other)); CHECK(cuStreamSynchronize(other));
  CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_RELAXED};
  const char *mn[] = {"global", "thread-local", "relaxed"};
  for (int blocking = 0; blocking < 2; blocking++)
  for (int mi = 0; mi < 3; mi++) for (which = 0; which < NCALLS; which++) for (itself = 0; itself < 2; itself++)
  for (relax = 0; relax < 2; relax++) {
    CHECK(cuStreamCreate(&cap, blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
    if (!mem) CHECK(cuMemAlloc(&mem, 64));
    if (!spare) CHECK(cuModuleLoadData(&spare, empty_ptx));
    if (!spare_stream) CHECK(cuStreamCreate(&spare_stream, CU_STREAM_NON_BLOCKING));
    if (!spare_event) CHECK(cuEventCreate(&spare_event, CU_EVENT_DISABLE_TIMING));
    allocated = 0; loaded = NULL; made_stream = NULL; made_event = NULL;
    CHECK(cuStreamBeginCapture(cap, modes[mi]));
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, cap, NULL, NULL));
    CHECK(cuEventRecord(cap_ev, cap));
    if (itself) bystander(NULL);
    else { pthread_t t; pthread_create(&t, NULL, bystander, NULL); pthread_join(t, NULL); }
    CUresult before = cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, cap, NULL, NULL);
    CUgraph g = NULL; CUresult end = cuStreamEndCapture(cap, &g);
    printf("%-9s %-12s %-34s %-9s %-7s -> %-36s; capture then %-36s end %s\n", blocking ? "blocking" : "nonblock",
           mn[mi], names[which], itself ? "itself" : "bystander", relax ? "relaxed" : "as is", nm(got), nm(before), nm(end));
    if (g) cuGraphDestroy(g);
    cuStreamSynchronize(other); cuCtxSynchronize();
    if (allocated) cuMemFree(allocated);
    if (loaded) cuModuleUnload(loaded);
    if (made_stream) cuStreamDestroy(made_stream);
    if (made_event) cuEventDestroy(made_event);
    CHECK(cuStreamDestroy(cap));
  }
  // cost
  long n = 5000000;
  CUstreamCaptureMode m;
  for (int round = 0; round < 3; round++) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) cuStreamQuery(other);
    double q = (now_ns() - t0) / n;
    t0 = now_ns();
    for (long i = 0; i < n; i++) { m = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&m); cuStreamQuery(other); cuThreadExchangeStreamCaptureMode(&m); }
    double qr = (now_ns() - t0) / n;
    t0 = now_ns();
    for (long i = 0; i < n; i++) { m = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&m); cuThreadExchangeStreamCaptureMode(&m); }
    double xr = (now_ns() - t0) / n;
    t0 = now_ns();
    for (long i = 0; i < n; i++) cuEventQuery(done_ev);
    double eq = (now_ns() - t0) / n;
    t0 = now_ns();
    for (long i = 0; i < n; i++) { m = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&m); cuEventQuery(done_ev); cuThreadExchangeStreamCaptureMode(&m); }
    double eqr = (now_ns() - t0) / n;
    CUstreamCaptureStatus st;
    t0 = now_ns();
    for (long i = 0; i < n; i++) cuStreamIsCapturing(other, &st);
    double ic = (now_ns() - t0) / n;
    printf("cost: StreamQuery %.1f ns, with exchange %.1f ns, exchange pair alone %.1f ns; EventQuery %.1f, with exchange %.1f; StreamIsCapturing %.1f\n", q, qr, xr, eq, eqr, ic);
  }
  return 0;
}
