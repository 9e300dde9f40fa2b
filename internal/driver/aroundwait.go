package driver

import (
	"sync"
	"sync/atomic"
)

// The handle checks' waits, on both drivers. An embedder may hold a lock while it calls a
// check that a host callback it runs also takes: the Python module holds the GIL (or, with
// none, its core lock) across the checks it makes often, which are reads. The real driver's
// checks (internal/cuda) make a driver call that may wait now and then: a layout's learning
// (the first stream check and the first event check of a process) makes streams and events,
// an event check its sentinel (once a context); and those calls wait while another thread's
// cuModuleLoadData or cuMemFree synchronizes the context, which waits for every host callback
// pending there (bench/callback_waits.c, part three), one of which may wait for that lock.
// So the embedder hands over a pair of functions (LetGoAroundWaits): one lets its lock go,
// returning what the other takes it back with; those calls are made between them
// (AroundWait), as is the wait for a learning another thread is making (Learning). Nothing
// else of a check runs outside the embedder's lock, and no lock of the drivers is held across
// them. Other threads run meanwhile: the embedder holds what it uses across a check (the
// Python core holds its objects: python/native/gate.inc). The software driver has nothing to
// learn, but its checks let the lock go where the real driver's do, its first ones and an
// event check that makes a sentinel (internal/sim), so that what runs meanwhile is tested
// on a CPU too.
type embedderLock struct {
	letGo    func() uintptr
	takeBack func(uintptr)
}

var embedder atomic.Pointer[embedderLock]

// LetGoAroundWaits hands over an embedder's pair: letGo() lets its lock go where the calling
// thread holds it and returns what takeBack(that) needs to take it back (anything, 0
// included, where it let nothing go). Given once, before the first check; nil takes it back.
func LetGoAroundWaits(letGo func() uintptr, takeBack func(uintptr)) {
	if letGo == nil {
		embedder.Store(nil)
		return
	}
	embedder.Store(&embedderLock{letGo, takeBack})
}

// AroundWait runs f, a check's driver calls that may wait, outside the embedder's lock.
func AroundWait(f func()) {
	if e := embedder.Load(); e != nil {
		held := e.letGo()
		defer e.takeBack(held)
	}
	f()
}

// Learning is a layout learned once a process (Do), and whether it is (Done): its answer
// readable without the once.
type Learning struct {
	once    sync.Once
	learned atomic.Bool
}

// Do runs learn once a process, outside the embedder's lock; so does a check that waits for
// another check's learning.
func (l *Learning) Do(learn func()) {
	if !l.learned.Load() {
		AroundWait(func() { l.once.Do(func() { learn(); l.learned.Store(true) }) })
	}
}

// Done reports whether the learning ran.
func (l *Learning) Done() bool { return l.learned.Load() }

// PointerLike reports whether w could be the address of a block of words: what a handle
// check takes further (both drivers refuse anything else before they learn).
func PointerLike(w uint64) bool { return w >= 4096 && w%8 == 0 && w < 1<<47 }
