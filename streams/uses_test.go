package streams

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchedObject is an object with uses whose destroy checks that no call is in flight.
type watchedObject struct {
	uses     uses
	inCall   atomic.Int64 // calls between their use and its giving back
	destroys atomic.Int64
	early    atomic.Int64 // destroys that came while a call was in flight
}

func (o *watchedObject) destroy() error {
	if o.inCall.Load() != 0 {
		o.early.Add(1)
	}
	o.destroys.Add(1)
	return nil
}

// call takes a use of o as a method does (inline where it can, else enter), holds it for a
// moment and gives it back; false once o is closed.
func (o *watchedObject) call(spin int) bool {
	g := goroutine()
	if !o.uses.enterFast(g) && o.uses.enter(o, g) != nil {
		return false
	}
	o.inCall.Add(1)
	for range spin {
		runtime.Gosched()
	}
	o.inCall.Add(-1)
	o.uses.leave(o, g)
	return true
}

// The owner's calls take no locked instruction and the others' do (uses); whoever closes,
// owner or not, the object is destroyed once, never under a call of either half. Each
// round has one owner (the goroutine that used the object first), two other callers, and
// a closer that is the owner or a goroutine of its own.
func TestUsesDestroyOnceAfterTheLastCallWhoeverCloses(t *testing.T) {
	if !fencesWork() {
		t.Log("no membarrier here: no goroutine owns an object, every call takes the shared count")
	}
	for _, closer := range []string{"the owner", "another goroutine", "a caller that does not own it"} {
		t.Run(closer, func(t *testing.T) {
			for round := range 300 {
				o := &watchedObject{}
				var wg sync.WaitGroup
				owned, stop := make(chan struct{}), make(chan struct{})
				closeNow := func() {
					first, err := o.uses.close(o)
					assert.True(t, first)
					assert.NoError(t, err)
				}
				wg.Add(1)
				go func() { // the owner
					defer wg.Done()
					require.True(t, o.call(0))
					if fencesWork() {
						assert.Equal(t, goroutine(), o.uses.owner.Load(), "the first to use it owns it")
					}
					close(owned)
					for n := 0; o.call(n % 3); n++ {
						if closer == "the owner" && n == round%50 {
							closeNow()
						}
					}
				}()
				<-owned
				for i := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n := 0; o.call(n % 2); n++ {
							if closer == "a caller that does not own it" && i == 0 && n == round%50 {
								closeNow()
							}
						}
					}()
				}
				if closer == "another goroutine" {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
					closeNow()
				}
				go func() { wg.Wait(); close(stop) }()
				select {
				case <-stop:
				case <-time.After(10 * time.Second):
					t.Fatalf("round %d: the callers did not see the close", round)
				}
				require.Equal(t, int64(1), o.destroys.Load(), "round %d: destroyed once", round)
				require.Zero(t, o.early.Load(), "round %d: destroyed under a call in flight", round)
			}
		})
	}
}

// ownersCallInFlight starts a call of o's on a goroutine of its own, the first to use o
// and so its owner, and holds the call in flight until end is called; then the call gives
// its use back, after runs on that goroutine, and end returns. (Failures there are
// asserted, not required: FailNow belongs to the test's own goroutine.)
func ownersCallInFlight(t *testing.T, o *watchedObject, after func()) (end func()) {
	inCall, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		g := goroutine()
		entered := assert.True(t, o.uses.enterFast(g) || o.uses.enter(o, g) == nil, "the owner's call takes its use")
		o.inCall.Add(1)
		close(inCall)
		<-release
		o.inCall.Add(-1)
		if entered {
			o.uses.leave(o, g)
		}
		after()
	}()
	<-inCall
	return func() { close(release); <-done }
}

// A Close from another goroutine while the owner's call is in flight leaves the destroy to
// that call; once it returns, the object is destroyed, and calls after Close are refused.
func TestUsesOwnersCallInFlightDestroysAfterAnotherGoroutinesClose(t *testing.T) {
	if !fencesWork() {
		t.Skip("SKIP: no membarrier here: no goroutine owns an object")
	}
	o := &watchedObject{}
	end := ownersCallInFlight(t, o, func() { assert.False(t, o.call(0), "a call of the owner's after Close") })
	first, err := o.uses.close(o)
	require.True(t, first)
	require.NoError(t, err)
	assert.Zero(t, o.destroys.Load(), "destroyed under the owner's call")
	assert.False(t, o.call(0), "a call of another goroutine's after Close")
	end()
	assert.Equal(t, int64(1), o.destroys.Load())
	assert.Zero(t, o.early.Load())
}

// Disown from another goroutine than the owner's while the owner's call is in flight
// fails and leaves the object open; once the call has returned it succeeds.
func TestUsesClaimWaitsForTheOwnersCall(t *testing.T) {
	if !fencesWork() {
		t.Skip("SKIP: no membarrier here: no goroutine owns an object")
	}
	o := &watchedObject{}
	end := ownersCallInFlight(t, o, func() {})
	assert.False(t, o.uses.claim(), "claimed under the owner's call")
	assert.False(t, o.uses.closed(), "a failed claim leaves it open")
	end()
	assert.True(t, o.uses.claim())
	assert.True(t, o.uses.closed())
	assert.Zero(t, o.destroys.Load(), "a claimed object is given away, not destroyed")
}

// goroutine tells goroutines apart and stays the same within one, across a reschedule and
// a stack that grew (where no goroutine owns anything it is one value for all: fencesWork).
func TestGoroutineIdentifiesTheCallingGoroutine(t *testing.T) {
	if !fencesWork() {
		t.Skip("SKIP: no membarrier here: goroutine() is not used to tell goroutines apart")
	}
	mine := goroutine()
	require.NotZero(t, mine)
	var deep func(n int) uintptr
	deep = func(n int) uintptr {
		var pad [256]byte
		if n == 0 {
			runtime.Gosched()
			return goroutine() + uintptr(pad[0])
		}
		return deep(n - 1)
	}
	assert.Equal(t, mine, deep(200), "after the stack grew and the goroutine was rescheduled")
	others := make(chan uintptr, 8)
	for range cap(others) {
		go func() { others <- goroutine() }()
	}
	seen := map[uintptr]bool{mine: true}
	for range cap(others) {
		g := <-others
		assert.NotEqual(t, mine, g)
		seen[g] = true
	}
	assert.Greater(t, len(seen), 1)
}

// BenchmarkFenceOthers is the barrier a destroy from another goroutine than the owner's
// waits for (membarrier(2)), with the benchmark's other threads idle.
func BenchmarkFenceOthers(b *testing.B) {
	if !fencesWork() {
		b.Skip("SKIP: no membarrier here")
	}
	for b.Loop() {
		if !fenceOthers() {
			b.Fatal("membarrier refused")
		}
	}
}

// An event is made and closed as often as a record (EventCreateClose): its allocation stays
// in Go's 48-byte size class, uses included.
func TestAnEventFitsIn48Bytes(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Event{}), uintptr(48))
}
