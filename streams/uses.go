package streams

import (
	"sync/atomic"

	"github.com/streambridge/streambridge/internal/driver"
)

// uses is an object's open state and its calls in flight, after cuda.core's resource
// handles: while a call holds the object, its driver handle is valid. Every method that
// hands the handle to the driver takes a use first (enter) and gives it back when the
// driver has answered (leave); Close marks the object closed, and whichever of Close and
// the last call in flight comes last destroys the handle. So a Close racing a call on
// another goroutine never sends a destroyed handle to the driver (the real one crashes on
// it), and Close never waits for a call in flight: a host function that closes the stream
// whose Synchronize is waiting for it must not deadlock.
//
// The calls are counted in two places. The goroutine that first uses the object owns it:
// its calls count in busy, with plain instructions (addBusy), which only it writes.
// Every other goroutine's calls count in word, with an atomic add each way. A locked add
// costs about 5 ns on the H100 machines' Xeons, and a record and a wait took eight of them
// (bench/RESULTS.md); the owner's calls now take none. The price is paid by whoever would
// destroy the object from another goroutine than its owner: it cannot read the owner's
// busy until every thread has passed a barrier, which fenceOthers (membarrier(2)) makes
// them do, about a microsecond. Whoever finds the object closed after giving its own use
// back (settle) looks at the other half, so the last one out destroys it, whichever half
// that is. Where the barrier is not to be had (another OS or architecture), no goroutine
// owns anything and every call takes the shared count.
type uses struct {
	word  atomic.Int32   // closed, destroyed, and the other goroutines' calls in flight
	busy  int32          // the owner's calls in flight: only the owner writes it (addBusy)
	owner atomic.Uintptr // the goroutine whose calls count in busy (goroutine()); 0 until the first use
}

// destroyer is an object with uses: destroy gives its driver handle back, once.
type destroyer interface{ destroy() error }

const (
	usesClosed    = 1 // Close was called: no new use may begin
	usesDestroyed = 2 // the destroy is claimed: it runs once
	usesOne       = 4 // one call in flight
)

// enterFast takes a use for goroutine g where g owns u, no host function runs anywhere
// and u is open: no call and no locked instruction, inlined where a method takes its use.
// Where it reports false the use is not taken, and the caller goes on to take it with
// enter (which does what this does, and every case it leaves) before anything else can
// fail: a refusal may come after the use was counted for a moment and o read closed, and a
// Close from another goroutine may have seen that use and left the destroy to it, which
// enter's leave then does (TestStreamClosedUnderFailingRecordsIsDestroyed).
func (u *uses) enterFast(g uintptr) bool {
	if u.owner.Load() != g || driver.HostFuncRuns() {
		return false
	}
	u.addBusy(1) // counted in busy before word is read: see ownerIdle
	if u.word.Load()&usesClosed == 0 {
		return true
	}
	u.addBusy(-1) // closed: enter counts it again and settles
	return false
}

// enter takes a use of o for a call into the driver by goroutine g (goroutine(), asked
// once a call, however many objects it takes): ErrInHostFunc inside a host function,
// where CUDA forbids every CUDA call, and ErrClosed once o is closed; the caller gives
// back only a use it got, with the same g.
func (u *uses) enter(o destroyer, g uintptr) error {
	settle, err := u.take(g)
	if settle {
		u.settle(o) // Close may have seen the use take counted and left the destroy to it
	}
	return err
}

// take is enter but for the destroy, for a type that makes its own (Event: an interface
// holding the event would move it to the heap, and with it every event its maker closes
// before returning, an allocation a create and close). Where it answers ErrClosed with
// settle true, the use it counted for a moment is given back and the caller settles o, as
// after any last use (claimDestroy).
func (u *uses) take(g uintptr) (settle bool, err error) {
	if err := outsideHostFunc(); err != nil {
		return false, err
	}
	owner := u.owner.Load()
	if owner == 0 {
		owner = u.own(g)
	}
	if owner == g {
		u.addBusy(1) // counted in busy before word is read: see ownerIdle
		if u.word.Load()&usesClosed == 0 {
			return false, nil
		}
	} else if u.word.Add(usesOne)&usesClosed == 0 {
		return false, nil
	}
	return u.drop(g), ErrClosed
}

// hold takes a use of o that outlives the call taking it, for a graph that keeps o
// (Driver.keepUse): counted in word, as another goroutine's, whoever owns o; given back with
// release. ErrClosed where o is closed.
func (u *uses) hold(o destroyer) error {
	if u.word.Add(usesOne)&usesClosed == 0 {
		return nil
	}
	u.release(o)
	return ErrClosed
}

// release gives back a use hold took, destroying o where it was the last use of a closed o.
func (u *uses) release(o destroyer) {
	if u.word.Add(-usesOne)&usesClosed != 0 {
		u.settle(o)
	}
}

// own makes goroutine g the owner of a u that has none, where the barrier fenceOthers
// makes is to be had, and returns the owner.
//
//go:noinline
func (u *uses) own(g uintptr) uintptr {
	if fencesWork() {
		u.owner.CompareAndSwap(0, g)
	}
	return u.owner.Load()
}

// leave gives back a use of o that goroutine g took, destroying o where it was the last
// use of a closed o. The destroy's error has no caller to go to: Close returned long ago.
func (u *uses) leave(o destroyer, g uintptr) {
	if u.drop(g) {
		u.settle(o)
	}
}

// drop is leave but for the destroy: it gives back a use g took and reports whether o is
// closed, when the caller settles it (leave). The hot methods' doneBy call it themselves
// so that it is inlined there, no call made.
func (u *uses) drop(g uintptr) (closed bool) {
	var w int32
	if u.owner.Load() == g {
		u.addBusy(-1)
		w = u.word.Load()
	} else {
		w = u.word.Add(-usesOne)
	}
	return w&usesClosed != 0
}

// settle destroys o, once, where it is closed and no call of either half is in flight.
func (u *uses) settle(o destroyer) {
	if u.claimDestroy() {
		_ = o.destroy()
	}
}

// claimDestroy reports whether the caller is to destroy the object now, once: it is closed,
// no call of either half is in flight, and nobody claimed the destroy before.
//
//go:noinline
func (u *uses) claimDestroy() bool {
	return u.word.Load() == usesClosed && u.ownerIdle() && u.word.CompareAndSwap(usesClosed, usesClosed|usesDestroyed)
}

// ownerIdle reports whether the owner has no call in flight. The owner knows its own
// count; another goroutine reads it after fenceOthers, so that an owner's call counted
// before it read word open is seen (and an owner that reads word closed after this settles
// itself). Read after the caller marked o closed.
func (u *uses) ownerIdle() bool {
	owner := u.owner.Load()
	if owner == 0 { // nobody owns it: a goroutine that takes it from now on reads it closed
		return true
	}
	if owner != goroutine() && !fenceOthers() {
		return false // no barrier: take it for busy (the handle stays undestroyed)
	}
	return atomic.LoadInt32(&u.busy) == 0
}

// close marks o closed and destroys it where no call is in flight (else the last to leave
// does). It reports whether this was the first close, and the destroy's error. Inside a
// host function, where CUDA forbids CUDA calls, the destroy runs on a goroutine of its
// own, its error lost.
func (u *uses) close(o destroyer) (bool, error) {
	first, destroy := u.shut()
	switch {
	case !destroy:
		return first, nil
	case driver.InHostFunc():
		go o.destroy()
		return true, nil
	}
	return true, o.destroy()
}

// shut is close but for the destroy (see take): it reports whether this was the first
// close, and whether the caller is to destroy the object now (else the last call in flight
// does), on a goroutine of its own inside a host function.
func (u *uses) shut() (first, destroy bool) {
	w := u.word.Or(usesClosed)
	if w&usesClosed != 0 {
		return false, false
	}
	return true, w == 0 && u.ownerIdle() && u.word.CompareAndSwap(usesClosed, usesClosed|usesDestroyed)
}

// claim closes o where it is open with no call in flight, and claims its destroy for the
// caller, who gives the handle away instead (Event.Disown). Where the owner turns out to
// have a call in flight, o is open again (a call that began meanwhile got ErrClosed).
func (u *uses) claim() bool {
	if !u.word.CompareAndSwap(0, usesClosed|usesDestroyed) {
		return false
	}
	if u.ownerIdle() {
		return true
	}
	u.word.Add(-(usesClosed | usesDestroyed)) // calls that read it closed meanwhile leave it alone: it reads destroyed
	return false
}

// closed reports whether o was closed.
func (u *uses) closed() bool { return u.word.Load()&usesClosed != 0 }

// addBusy counts the owner's calls. Only the owner writes busy: a plain add, which the
// race detector is not told of (others read busy after fenceOthers' barrier).
//
//go:norace
func (u *uses) addBusy(d int32) { u.busy += d }
