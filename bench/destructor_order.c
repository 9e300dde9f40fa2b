// When the real driver runs the destructor of a user object an executable graph keeps,
// against that graph's launches: before a launch queued behind other work has run its host
// node, while the node runs, or after? streambridge frees a captured Python host callback in
// that destructor (python/native/callbacks.inc), so a destructor before the node's last run
// would free what the node then calls.
// Build: gcc -O2 bench/destructor_order.c -I/usr/local/cuda/include -lcuda -lpthread -o destructor_order
// Run: ./destructor_order [rounds]
#include <cuda.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_int node_started, node_done, destroyed, destroyed_before_start, destroyed_during;

static void blocker(void *p) { usleep((useconds_t)(long)p); } // holds the stream: the launch queues behind it
static void node(void *p) {
  (void)p;
  atomic_store(&node_started, 1);
  usleep(50000); // a node that runs a while (a Python callback waiting for the GIL)
  atomic_store(&node_done, 1);
}
static void dtor(void *p) {
  (void)p;
  if (!atomic_load(&node_started)) atomic_fetch_add(&destroyed_before_start, 1);
  else if (!atomic_load(&node_done)) atomic_fetch_add(&destroyed_during, 1);
  atomic_store(&destroyed, 1);
}
#define MUST(call) do { CUresult r_ = (call); if (r_) { printf("%s: %d\n", #call, (int)r_); exit(3); } } while (0)

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 10;
  CUdevice dev; CUcontext ctx; CUstream t, u;
  MUST(cuInit(0)); MUST(cuDeviceGet(&dev, 0)); MUST(cuDevicePrimaryCtxRetain(&ctx, dev)); MUST(cuCtxSetCurrent(ctx));
  MUST(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING)); MUST(cuStreamCreate(&u, CU_STREAM_NON_BLOCKING));
  // exec destroyed: 0 while its launch waits behind a 200 ms host function, 1 while its node runs
  for (int when = 0; when < 2; when++) {
    atomic_store(&destroyed_before_start, 0); atomic_store(&destroyed_during, 0);
    int after = 0;
    for (int i = 0; i < rounds; i++) {
      atomic_store(&node_started, 0); atomic_store(&node_done, 0); atomic_store(&destroyed, 0);
      CUgraph g, cg; CUgraphExec x; CUuserObject obj; CUstreamCaptureStatus st;
      MUST(cuStreamBeginCapture(t, CU_STREAM_CAPTURE_MODE_RELAXED));
      MUST(cuLaunchHostFunc(t, node, NULL));
      MUST(cuUserObjectCreate(&obj, NULL, dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
      MUST(cuStreamGetCaptureInfo(t, &st, NULL, &cg, NULL, NULL, NULL));
      MUST(cuGraphRetainUserObject(cg, obj, 1, CU_GRAPH_USER_OBJECT_MOVE));
      MUST(cuStreamEndCapture(t, &g));
      MUST(cuGraphInstantiateWithFlags(&x, g, 0));
      MUST(cuGraphDestroy(g)); // the exec's references alone keep the object now
      MUST(cuLaunchHostFunc(u, blocker, (void *)200000L));
      MUST(cuGraphLaunch(x, u));
      if (when == 1) while (!atomic_load(&node_started)) usleep(100);
      MUST(cuGraphExecDestroy(x));
      MUST(cuStreamSynchronize(u));
      for (int w = 0; w < 1000 && !atomic_load(&destroyed); w++) usleep(1000);
      if (atomic_load(&destroyed) && atomic_load(&node_done) && !atomic_load(&destroyed_before_start) && !atomic_load(&destroyed_during)) after++;
    }
    printf("exec destroyed %s: %d rounds; destructor before the node started %d, while it ran %d, after it %d\n",
           when ? "while its host node runs" : "while its launch waits behind other work", rounds,
           atomic_load(&destroyed_before_start), atomic_load(&destroyed_during), after);
  }
  return 0;
}
