// Which driver calls wait while a host callback runs: the probe behind the GIL rules of the
// Python package (python/native/holds.inc, MAY_WAIT; pyshim's Close) and docs/python.md,
// "Host callbacks". A Python host callback waits for the GIL when it starts and, running
// Python, each time it gives the GIL up; a thread that holds the GIL through a call that
// waits for that callback never returns. Each call below is made while a callback on another
// stream sleeps 300 ms; "WAITED" marks one that returned only after the callback did.
// Build: gcc -O2 bench/callback_waits.c -I/usr/local/cuda/include -lcuda -lpthread -o callback_waits
// Run: ./callback_waits
#include <cuda.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "floor.h"

static atomic_int started;
static void CUDA_CB sleeper(void *p) { (void)p; atomic_store(&started, 1); usleep(300000); }
static void CUDA_CB noop(void *p) { (void)p; }
static void destroy_nothing(void *p) { (void)p; }
static double now_ms(void) { return floor_now_ns() / 1e6; }

static CUstream A;
#define T(name, call)                                                                      \
    do {                                                                                   \
        atomic_store(&started, 0);                                                         \
        cuLaunchHostFunc(A, sleeper, 0);                                                   \
        while (!atomic_load(&started))                                                     \
            ;                                                                              \
        double t0 = now_ms();                                                              \
        CUresult r = (call);                                                               \
        double ms = now_ms() - t0;                                                         \
        cuStreamSynchronize(A);                                                            \
        const char *n = "?";                                                               \
        cuGetErrorName(r, &n);                                                             \
        printf("%-40s %-24s %9.3f ms %s\n", name, n, ms, ms > 100 ? "WAITED" : "");       \
        fflush(stdout);                                                                    \
    } while (0)

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
    static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry k() { ret; }\n";
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
        printf("no CUDA device\n");
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
    T("cuModuleLoadData", cuModuleLoadData(&M, ptx));
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
    return 0;
}
