// How deep a stream's queue is: how many calls the driver takes on a stream whose work is
// held up by a running host callback before a call blocks, the probe behind the software
// driver's queue (internal/sim). A thread that holds the GIL through an enqueue that blocks
// there waits for the callback, which may be waiting for the GIL (python/native/holds.inc).
// For each kind of call: a host callback that sleeps SLEEP_MS is launched on stream A, and
// calls are made on A until one takes more than 20 ms (or LIMIT are made); printed: how many
// returned at once and how long the blocked one took (twice), then, with A nearly full,
// whether calls on another stream B block.
// Build: gcc -O2 bench/queue_depth.c -I/usr/local/cuda/include -lcuda -lpthread -o queue_depth
// Run: ./queue_depth
#include <cuda.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "floor.h"

enum { SLEEP_MS = 400, LIMIT = 200000 };
static atomic_int started;
static void CUDA_CB sleeper(void *p) { (void)p; atomic_store(&started, 1); usleep(SLEEP_MS * 1000); }
static void CUDA_CB noop(void *p) { (void)p; }
static double now_ms(void) { return floor_now_ns() / 1e6; }

static CUstream A, B;
static CUevent E, F, T; /* T: an event with timing (cuEventCreate's default) */

// call(s, i): the i-th call of a kind on s.
static CUresult record(CUstream s, int i) { (void)i; return cuEventRecord(E, s); }
static CUresult wait_event(CUstream s, int i) { (void)i; return cuStreamWaitEvent(s, F, 0); }
static CUresult pair(CUstream s, int i) { return i % 2 ? cuStreamWaitEvent(s, E, 0) : cuEventRecord(E, s); }
static CUresult host(CUstream s, int i) { (void)i; return cuLaunchHostFunc(s, noop, 0); }
static CUresult record_timing(CUstream s, int i) { (void)i; return cuEventRecord(T, s); }
static CUresult pair_timing(CUstream s, int i) { return i % 2 ? cuStreamWaitEvent(s, T, 0) : cuEventRecord(T, s); }

// Fills A behind a sleeping callback until a call blocks; returns how many returned at once.
static int probe(const char *name, CUresult (*call)(CUstream, int)) {
    atomic_store(&started, 0);
    cuLaunchHostFunc(A, sleeper, 0);
    while (!atomic_load(&started))
        ;
    double t0 = now_ms(), blocked = 0, at = 0;
    int n = 0;
    CUresult r = CUDA_SUCCESS;
    for (; n < LIMIT && r == CUDA_SUCCESS; n++) {
        double t = now_ms();
        r = call(A, n);
        if ((blocked = now_ms() - t) > 20) {
            at = t - t0;
            break;
        }
    }
    cuStreamSynchronize(A);
    const char *rn = "?";
    cuGetErrorName(r, &rn);
    printf("%-22s %6d calls at once (%s), then one blocked %6.1f ms (from %.1f ms after the callback began)\n",
           name, n, rn, blocked, at);
    fflush(stdout);
    return n;
}

// With A nearly full (n - margin calls behind a sleeping callback): how long 1000 calls on
// another stream take, and whether 2 * margin more on A block.
static void other(const char *name, CUresult (*call)(CUstream, int), int n, int margin) {
    atomic_store(&started, 0);
    cuLaunchHostFunc(A, sleeper, 0);
    while (!atomic_load(&started))
        ;
    for (int i = 0; i < n - margin; i++)
        call(A, i);
    double t = now_ms();
    for (int i = 0; i < 1000; i++)
        call(B, i);
    double onB = now_ms() - t;
    t = now_ms();
    for (int i = 0; i < 2 * margin; i++)
        call(A, i);
    double onA = now_ms() - t;
    cuStreamSynchronize(A);
    cuStreamSynchronize(B);
    printf("%-22s A holding %d: 1000 calls on B took %.1f ms; %d more on A took %.1f ms\n", name, n - margin, onB,
           2 * margin, onA);
    fflush(stdout);
}

int main(void) {
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
        printf("no CUDA device\n");
        return 2;
    }
    int v = 0;
    cuDriverGetVersion(&v);
    printf("driver API %d\n", v);
    cuStreamCreate(&A, CU_STREAM_NON_BLOCKING);
    cuStreamCreate(&B, CU_STREAM_NON_BLOCKING);
    cuEventCreate(&E, CU_EVENT_DISABLE_TIMING);
    cuEventCreate(&F, CU_EVENT_DISABLE_TIMING);
    cuEventCreate(&T, 0);
    cuEventRecord(F, B);
    cuStreamSynchronize(B);
    struct { const char *name; CUresult (*call)(CUstream, int); } kinds[] = {
        {"cuEventRecord", record}, {"cuStreamWaitEvent", wait_event}, {"record+wait pairs", pair},
        {"cuLaunchHostFunc", host}, {"cuEventRecord, timing", record_timing},
        {"pairs, timing event", pair_timing}};
    for (int k = 0; k < 6; k++) {
        int n = probe(kinds[k].name, kinds[k].call);
        probe(kinds[k].name, kinds[k].call);
        other(kinds[k].name, kinds[k].call, n, n / 10 + 1);
    }
    return 0;
}
