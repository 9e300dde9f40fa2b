package streams

import (
	"sync/atomic"

	"github.com/streambridge/streambridge/internal/driver"
)

// uses is an object's open state and its calls in flight, in one word, after cuda.core's
// resource handles: while a call holds the object, its driver handle is valid. Every method
// that hands the handle to the driver takes a use first (enter) and gives it back when the
// driver has answered (leave); Close marks the object closed, and whichever of Close and
// the last call in flight comes last destroys the handle. So a Close racing a call on
// another goroutine never sends a destroyed handle to the driver (the real one crashes on
// it), and Close never waits for a call in flight: a host function that closes the stream
// whose Synchronize is waiting for it must not deadlock.
//
// A call costs two uncontended atomic adds.
type uses struct{ word atomic.Int64 }

// destroyer is an object with uses: destroy gives its driver handle back, once.
type destroyer interface{ destroy() error }

const (
	usesClosed    = 1 // Close was called: no new use may begin
	usesDestroyed = 2 // the destroy is claimed: it runs once
	usesOne       = 4 // one call in flight
)

// enter takes a use of o for a call into the driver: ErrInHostFunc inside a host
// function, where CUDA forbids every CUDA call, and ErrClosed once o is closed; the
// caller gives back only a use it got.
func (u *uses) enter(o destroyer) error {
	if err := outsideHostFunc(); err != nil {
		return err
	}
	if u.word.Add(usesOne)&usesClosed == 0 {
		return nil
	}
	u.leave(o) // Close may have seen this use and left the destroy to it
	return ErrClosed
}

// leave gives a use of o back, destroying o where it was the last use of a closed o. The
// destroy's error has no caller to go to: Close returned long ago. It is inlined into
// every method (the rare destroy is out of line): the use counts are most of the streams
// layer's time around a record and a wait.
func (u *uses) leave(o destroyer) {
	if u.word.Add(-usesOne) == usesClosed {
		u.destroyLast(o)
	}
}

// destroyLast destroys o, once, after its last use left it closed.
//
//go:noinline
func (u *uses) destroyLast(o destroyer) {
	if u.word.CompareAndSwap(usesClosed, usesClosed|usesDestroyed) {
		_ = o.destroy()
	}
}

// close marks o closed and destroys it where no call is in flight (else the last to leave
// does). It reports whether this was the first close, and the destroy's error. Inside a
// host function, where CUDA forbids CUDA calls, the destroy runs on a goroutine of its
// own, its error lost.
func (u *uses) close(o destroyer) (bool, error) {
	w := u.word.Or(usesClosed)
	if w&usesClosed != 0 {
		return false, nil
	}
	if w == 0 && u.word.CompareAndSwap(usesClosed, usesClosed|usesDestroyed) {
		if driver.InHostFunc() {
			go o.destroy()
			return true, nil
		}
		return true, o.destroy()
	}
	return true, nil
}

// claim closes o where it is open with no call in flight, and claims its destroy for the
// caller, who gives the handle away instead (Event.Disown).
func (u *uses) claim() bool { return u.word.CompareAndSwap(0, usesClosed|usesDestroyed) }

// closed reports whether o was closed.
func (u *uses) closed() bool { return u.word.Load()&usesClosed != 0 }
