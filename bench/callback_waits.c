// Which driver calls wait while a host callback runs: the probe behind the GIL rules of the
// Python package (python/native/holds.inc, MAY_WAIT; pyshim's Close) and docs/python.md,
// "Host callbacks". A Python host callback waits for the GIL when it starts and, running
// Python, each time it gives the GIL up; a thread that holds the GIL through a call that
// waits for that callback never returns. Each call below is made while a callback on another
// stream sleeps 300 ms; "WAITED" marks one that returned only after the callback did.
// Part two asks what the calls that waited wait for: each is made again while something
// else holds a stream for 300 ms: a kernel spinning on a stream of the same context, a
// callback sleeping in another context, a kernel spinning in another context, and a stream of
// this context waiting for a callback sleeping in another (its work pending, none running).
// Part three asks what else waits meanwhile: while a callback sleeps and another thread is
// inside one of the calls that waited for it (a context synchronization), the main thread
// makes the calls that do not wait for a callback themselves.
// Build: gcc -O2 bench/callback_waits.c -I/usr/local/cuda/include -lcuda -lpthread -o callback_waits
// Run: ./callback_waits
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "floor.h"

static atomic_int started;
static void CUDA_CB sleeper(void *p) { (void)p; atomic_store(&started, 1); usleep(300000); }
static void CUDA_CB noop(void *p) { (void)p; }
static void destroy_nothing(void *p) { (void)p; }
static double now_ms(void) { return floor_now_ns() / 1e6; }
static const char empty_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry k() { ret; }\n";

// A holder starts holding a stream for 300 ms (a callback sleeping, or a kernel spinning)
// and returns it; the call is timed from there, and the stream synchronized after it.
static CUcontext C, C2;
static CUstream A, A2;
static CUfunction SPIN, SPIN2;
static CUstream hold(CUcontext ctx, CUstream s, CUfunction kernel) {
    cuCtxSetCurrent(ctx);
    if (kernel) {
        unsigned long long ns = 300000000ull;
        void *args[] = {&ns};
        cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, s, args, 0);
        usleep(20000); /* running by then: a launch takes microseconds */
    } else {
        atomic_store(&started, 0);
        cuLaunchHostFunc(s, sleeper, 0);
        while (!atomic_load(&started))
            ;
    }
    cuCtxSetCurrent(C);
    return s;
}
static void let_go(CUstream s) {
    cuCtxSetCurrent(s == A2 ? C2 : C);
    cuStreamSynchronize(s);
    cuCtxSetCurrent(C);
}
static CUstream by_callback(void) { return hold(C, A, NULL); }
static CUstream by_kernel(void) { return hold(C, A, SPIN); }
static CUstream by_callback_elsewhere(void) { return hold(C2, A2, NULL); }
static CUstream by_kernel_elsewhere(void) { return hold(C2, A2, SPIN2); }
/* A stream of this context that waits for a callback sleeping in another: nothing of this
   context runs, but its work is not done. */
static CUevent FAR;
static CUstream by_waiting_on_elsewhere(void) {
    hold(C2, A2, NULL);
    cuCtxSetCurrent(C2);
    cuEventRecord(FAR, A2);
    cuCtxSetCurrent(C);
    cuStreamWaitEvent(A, FAR, 0);
    return A;
}

/* One row: what held the callback or synchronized, the call, its result and how long it took. */
static void report(const char *label, const char *name, CUresult r, double ms) {
    const char *n = "?";
    cuGetErrorName(r, &n);
    printf("%-20s %-40s %-24s %9.3f ms %s\n", label, name, n, ms, ms > 100 ? "WAITED" : "");
    fflush(stdout);
}

#define TH(holder, label, name, call)                                                      \
    do {                                                                                   \
        CUstream held = holder();                                                          \
        double t0 = now_ms();                                                              \
        CUresult r = (call);                                                               \
        double ms = now_ms() - t0;                                                         \
        let_go(held);                                                                      \
        report(label, name, r, ms);                                                        \
    } while (0)
#define T(name, call) TH(by_callback, "callback", name, call)

/* Part two: the calls that waited for a callback, and controls, behind each holder. */
static void waits_behind(CUstream (*holder)(void), const char *holder_name) {
    CUdeviceptr P;
    CUmodule M;
    CUstream S;
    CUevent E;
    void *H;
#define W(name, call) TH(holder, holder_name, name, call)
    W("cuMemAlloc", cuMemAlloc(&P, 1 << 20));
    W("cuMemFree", cuMemFree(P));
    W("cuMemHostAlloc", cuMemHostAlloc(&H, 1 << 20, 0));
    W("cuMemFreeHost", cuMemFreeHost(H));
    W("cuModuleLoadData", cuModuleLoadData(&M, empty_ptx));
    W("cuModuleUnload", cuModuleUnload(M));
    W("cuStreamCreate", cuStreamCreate(&S, CU_STREAM_NON_BLOCKING));
    W("cuStreamDestroy", cuStreamDestroy(S));
    W("cuEventCreate", cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
    W("cuEventDestroy", cuEventDestroy(E));
    W("cuCtxSynchronize", cuCtxSynchronize());
#undef W
}

/* Part three: while one thread is inside a call that synchronizes the context (waiting for
   a callback sleeping 300 ms), the calls another thread makes on a stream of that context
   that has nothing pending. */
static CUmodule LOADED;
static CUdeviceptr FREED;
static void *load_module(void *p) { (void)p; cuCtxSetCurrent(C); cuModuleLoadData(&LOADED, empty_ptx); return 0; }
static void *unload_module(void *p) { (void)p; cuCtxSetCurrent(C); cuModuleUnload(LOADED); return 0; }
static void *free_memory(void *p) { (void)p; cuCtxSetCurrent(C); cuMemFree(FREED); return 0; }
static void *sync_context(void *p) { (void)p; cuCtxSetCurrent(C); cuCtxSynchronize(); return 0; }

static void beside(void *(*syncing)(void *), const char *syncing_name) {
    CUstream B, S;
    CUcontext current;
    CUevent E, E2, E3;
    CUstreamCaptureStatus cs;
    cuuint64_t id;
    CUmodule M;
    CUfunction K;
    CUdeviceptr P;
    CUdevice dev;
    unsigned long long stream_id;
    int least, greatest;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    float ms_between;
    CUevent EI;
    CUipcEventHandle ih;
    CUuserObject U;
    CUgraph G, G2;
    CUgraphExec X;
    cuCtxSetCurrent(C);
    cuEventCreate(&EI, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
    cuGraphCreate(&G, 0);
    cuModuleLoadData(&M, empty_ptx);
    cuModuleGetFunction(&K, M, "k");
    cuStreamCreate(&B, CU_STREAM_NON_BLOCKING);
    cuEventCreate(&E, CU_EVENT_DISABLE_TIMING);
    cuEventCreate(&E2, CU_EVENT_DISABLE_TIMING);
    cuEventRecord(E2, B);
    cuStreamSynchronize(B);
#define B3(name, call)                                                                     \
    do {                                                                                   \
        if (syncing == free_memory)                                                        \
            cuMemAlloc(&FREED, 1 << 20);                                                   \
        if (syncing == unload_module)                                                      \
            cuModuleLoadData(&LOADED, empty_ptx);                                          \
        CUstream held = by_callback();                                                     \
        pthread_t t;                                                                       \
        pthread_create(&t, NULL, syncing, NULL);                                           \
        usleep(30000); /* inside it by then, waiting */                                    \
        double t0 = now_ms();                                                              \
        CUresult r = (call);                                                               \
        double ms = now_ms() - t0;                                                         \
        pthread_join(t, NULL);                                                             \
        if (syncing == load_module)                                                        \
            cuModuleUnload(LOADED);                                                        \
        let_go(held);                                                                      \
        cuStreamSynchronize(B);                                                            \
        report(syncing_name, name, r, ms);                                                 \
    } while (0)
    B3("cuCtxGetCurrent", cuCtxGetCurrent(&current));
    B3("cuStreamQuery", cuStreamQuery(B));
    B3("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo(B, &cs, &id, 0, 0, 0, 0));
    B3("cuEventQuery", cuEventQuery(E2));
    B3("cuEventRecord", cuEventRecord(E, B));
    B3("cuStreamWaitEvent", cuStreamWaitEvent(B, E2, 0));
    B3("cuEventCreate", cuEventCreate(&E3, CU_EVENT_DISABLE_TIMING));
    B3("cuEventDestroy", cuEventDestroy(E3));
    B3("cuStreamCreate", cuStreamCreate(&S, CU_STREAM_NON_BLOCKING));
    B3("cuStreamDestroy", cuStreamDestroy(S));
    B3("cuLaunchKernel", cuLaunchKernel(K, 1, 1, 1, 1, 1, 1, 0, B, 0, 0));
    B3("cuLaunchHostFunc", cuLaunchHostFunc(B, noop, 0));
    B3("cuMemAlloc", cuMemAlloc(&P, 1 << 20));
    B3("cuMemFree (its own allocation)", cuMemFree(P));
    B3("cuStreamSynchronize (nothing pending)", cuStreamSynchronize(B));
    /* the rest of the entry points the Python package's C core calls (tables.h) */
    B3("cuCtxSetCurrent", cuCtxSetCurrent(C));
    B3("cuCtxGetDevice", cuCtxGetDevice(&dev));
    B3("cuCtxGetStreamPriorityRange", cuCtxGetStreamPriorityRange(&least, &greatest));
    B3("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode(&mode));
    B3("cuStreamGetId", cuStreamGetId(B, &stream_id));
    B3("cuStreamGetCtx", cuStreamGetCtx(B, &current));
    B3("cuEventSynchronize (a done event)", cuEventSynchronize(E2));
    B3("cuEventElapsedTime", cuEventElapsedTime(&ms_between, E2, E2));
    B3("cuIpcGetEventHandle", cuIpcGetEventHandle(&ih, EI));
    B3("cuUserObjectCreate", cuUserObjectCreate(&U, 0, destroy_nothing, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    B3("cuGraphRetainUserObject", cuGraphRetainUserObject(G, U, 1, CU_GRAPH_USER_OBJECT_MOVE));
    B3("cuUserObjectCreate", cuUserObjectCreate(&U, 0, destroy_nothing, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    B3("cuUserObjectRelease", cuUserObjectRelease(U, 1));
    B3("cuStreamBeginCapture", cuStreamBeginCapture(B, CU_STREAM_CAPTURE_MODE_RELAXED));
    B3("cuStreamEndCapture", cuStreamEndCapture(B, &G2));
    B3("cuGraphDestroy", cuGraphDestroy(G2));
    B3("cuGraphInstantiate", cuGraphInstantiate(&X, G, 0));
    B3("cuGraphLaunch", cuGraphLaunch(X, B));
    B3("cuGraphExecDestroy", cuGraphExecDestroy(X));
    /* the rest of what the Go handle checks call (internal/cuda: eachActivePrimary, otherContext) */
    CUcontext primary, green;
    unsigned int pflags;
    int active, count;
    B3("cuDeviceGetCount", cuDeviceGetCount(&count));
    B3("cuDeviceGet", cuDeviceGet(&dev, 0));
    B3("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState(dev, &pflags, &active));
    B3("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&primary, dev));
    B3("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(dev));
    B3("cuStreamGetCtx_v2", cuStreamGetCtx_v2(B, &primary, (CUgreenCtx *)&green));
#undef B3
    cuGraphDestroy(G);
    cuEventDestroy(EI);
    cuModuleUnload(M);
    cuEventDestroy(E);
    cuEventDestroy(E2);
    cuStreamDestroy(B);
}

int main(void) {
    CUdevice d;
    CUcontext c, c2;
    CUstream B, S;
    CUevent E, E2, EI;
    CUdeviceptr P, Q;
    CUgraph G;
    CUgraphExec X;
    CUuserObject U;
    CUmodule M;
    CUfunction K;
    CUipcEventHandle ih;
    CUstreamCaptureStatus cs;
    cuuint64_t id;
    void *H;
    float f;
    size_t free_b, total_b;
    static const char spin_ptx[] =
        ".version 7.0\n.target sm_50\n.address_size 64\n"
        ".visible .entry spin(.param .u64 ns) {\n"
        "  .reg .u64 %t<4>;\n  .reg .pred %p;\n"
        "  ld.param.u64 %t0, [ns];\n  mov.u64 %t1, %globaltimer;\n"
        "L: mov.u64 %t2, %globaltimer;\n  sub.u64 %t3, %t2, %t1;\n"
        "  setp.lt.u64 %p, %t3, %t0;\n  @%p bra L;\n  ret;\n}\n";
    CUmodule SM, SM2;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
        printf("no CUDA device\n");
        return 2;
    }
    C = c;
    if (cuModuleLoadData(&SM, spin_ptx) || cuModuleGetFunction(&SPIN, SM, "spin") ||
        cuCtxCreate(&C2, NULL, 0, d) || cuStreamCreate(&A2, CU_STREAM_NON_BLOCKING) ||
        cuModuleLoadData(&SM2, spin_ptx) || cuModuleGetFunction(&SPIN2, SM2, "spin") ||
        cuEventCreate(&FAR, CU_EVENT_DISABLE_TIMING) || cuCtxSetCurrent(C)) {
        printf("setup failed\n");
        return 2;
    }
    cuStreamCreate(&A, CU_STREAM_NON_BLOCKING);
    cuStreamCreate(&B, CU_STREAM_NON_BLOCKING);
    cuEventCreate(&E, 0);
    cuEventCreate(&E2, 0);
    cuEventRecord(E2, B);
    cuStreamSynchronize(B);
    T("cuCtxGetCurrent", cuCtxGetCurrent(&c));
    T("cuStreamQuery (another stream)", cuStreamQuery(B));
    T("cuStreamQuery (the callback's stream)", cuStreamQuery(A));
    T("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo(B, &cs, &id, 0, 0, 0, 0));
    T("cuStreamIsCapturing", cuStreamIsCapturing(B, &cs));
    T("cuEventQuery", cuEventQuery(E2));
    T("cuEventElapsedTime", cuEventElapsedTime(&f, E2, E2));
    T("cuEventCreate", cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
    T("cuEventRecord (another stream)", cuEventRecord(E, B));
    T("cuEventRecord (the callback's stream)", cuEventRecord(E, A));
    T("cuStreamWaitEvent", cuStreamWaitEvent(B, E2, 0));
    T("cuEventSynchronize (a done event)", cuEventSynchronize(E2));
    T("cuEventDestroy", cuEventDestroy(E));
    T("cuStreamCreate", cuStreamCreate(&S, CU_STREAM_NON_BLOCKING));
    T("cuStreamSynchronize (an empty stream)", cuStreamSynchronize(S));
    T("cuStreamDestroy", cuStreamDestroy(S));
    T("cuLaunchHostFunc (another stream)", cuLaunchHostFunc(B, noop, 0));
    cuStreamSynchronize(B);
    T("cuMemGetInfo", cuMemGetInfo(&free_b, &total_b));
    T("cuMemAlloc", cuMemAlloc(&P, 1 << 20));
    T("cuMemsetD8Async", cuMemsetD8Async(P, 0, 1 << 20, B));
    cuStreamSynchronize(B);
    T("cuMemFree", cuMemFree(P));
    T("cuMemAllocAsync", cuMemAllocAsync(&Q, 1 << 20, B));
    T("cuMemFreeAsync", cuMemFreeAsync(Q, B));
    cuStreamSynchronize(B);
    T("cuMemHostAlloc", cuMemHostAlloc(&H, 1 << 20, 0));
    T("cuMemFreeHost", cuMemFreeHost(H));
    T("cuStreamBeginCapture", cuStreamBeginCapture(B, CU_STREAM_CAPTURE_MODE_RELAXED));
    T("cuLaunchHostFunc (capturing)", cuLaunchHostFunc(B, noop, 0));
    T("cuStreamEndCapture", cuStreamEndCapture(B, &G));
    T("cuGraphInstantiate", cuGraphInstantiate(&X, G, 0));
    T("cuGraphLaunch", cuGraphLaunch(X, B));
    cuStreamSynchronize(B);
    T("cuGraphExecDestroy", cuGraphExecDestroy(X));
    T("cuGraphDestroy", cuGraphDestroy(G));
    T("cuUserObjectCreate", cuUserObjectCreate(&U, 0, destroy_nothing, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    T("cuUserObjectRelease", cuUserObjectRelease(U, 1));
    T("cuModuleLoadData", cuModuleLoadData(&M, empty_ptx));
    T("cuModuleGetFunction", cuModuleGetFunction(&K, M, "k"));
    T("cuLaunchKernel", cuLaunchKernel(K, 1, 1, 1, 1, 1, 1, 0, B, 0, 0));
    cuStreamSynchronize(B);
    T("cuModuleUnload", cuModuleUnload(M));
    T("cuEventCreate (interprocess)", cuEventCreate(&EI, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    T("cuIpcGetEventHandle", cuIpcGetEventHandle(&ih, EI));
    T("cuEventDestroy (interprocess)", cuEventDestroy(EI));
    T("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&c2, d));
    T("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(d));
    T("cuCtxSynchronize (waits for it by design)", cuCtxSynchronize());
    printf("\npart two: what the calls that waited wait for\n");
    waits_behind(by_callback, "callback");
    waits_behind(by_kernel, "kernel");
    waits_behind(by_callback_elsewhere, "callback, other ctx");
    waits_behind(by_kernel_elsewhere, "kernel, other ctx");
    waits_behind(by_waiting_on_elsewhere, "waiting on other ctx");
    printf("\npart three: what another thread's calls wait for while a call synchronizes the context\n");
    beside(load_module, "cuModuleLoadData");
    beside(unload_module, "cuModuleUnload");
    beside(free_memory, "cuMemFree");
    beside(sync_context, "cuCtxSynchronize");
    return 0;
}
