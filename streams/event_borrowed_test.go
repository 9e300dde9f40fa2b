package streams

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hostile integers handed to WrapEvent: each must fail with ErrInvalidHandle, on the real
// driver before libcuda (which crashes on a garbage CUevent) sees them. That this test
// returns at all is the proof that none crashed.
func TestWrapEventRefusesWhatIsNotALiveEvent(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		goHeap := make([]uint64, 64)
		stream := newStream(t, c, StreamOptions{NonBlocking: true})
		destroyed, err := c.NewEvent(EventOptions{})
		require.NoError(t, err)
		destroyedHandle := destroyed.Handle()
		require.NoError(t, destroyed.Close())
		cases := map[string]uintptr{
			"zero": 0, "small": 3, "odd": 0x12345679, "garbage": 0xdeadbeef, "unmapped": 0x100000000,
			"kernel half": 0xffff800000000000, "all ones": ^uintptr(0),
			"Go heap": uintptr(unsafe.Pointer(&goHeap[8])), "code": reflect.ValueOf(TestMain).Pointer() &^ 7,
			"a stream": stream.Handle(), "a context": c.Handle(), "a destroyed event": destroyedHandle,
		}
		for name, h := range cases {
			_, err := d.WrapEvent(h)
			assert.ErrorIs(t, err, ErrInvalidHandle, "%s %#x", name, h)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		refused := 0
		for range 100_000 {
			if _, err := d.WrapEvent(uintptr(rng.Uint64())); err != nil {
				refused++
			}
		}
		assert.Equal(t, 100_000, refused, "random integers are never taken for events")
	})
}

// A borrowed event works as an owned one (record, wait, query, synchronize, elapsed time),
// knows its device, and is never destroyed by its wrapper: the owner's event stays usable
// after the wrapper closes.
func TestWrapEventBorrowsALiveEvent(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		start, end := newEvent(t, c, EventOptions{}), newEvent(t, c, EventOptions{})
		b1, err := d.WrapEvent(start.Handle())
		require.NoError(t, err)
		b2, err := d.WrapEvent(end.Handle())
		require.NoError(t, err)
		assert.False(t, b1.Owned())
		assert.Equal(t, 0, b1.Context().Device().Ordinal())
		assert.Contains(t, b1.String(), "borrowed")
		dev, id, err := d.EventIdentity(start.Handle())
		require.NoError(t, err)
		assert.Equal(t, 0, dev.Ordinal())
		assert.Equal(t, b1.id, id)
		require.NoError(t, s.Record(b1))
		require.NoError(t, s.WaitEvent(b1))
		require.NoError(t, b2.Record(s))
		require.NoError(t, b2.Synchronize())
		done, err := b2.Query()
		require.NoError(t, err)
		assert.True(t, done)
		ms, err := b1.ElapsedTime(b2)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ms, time.Duration(0))
		_, err = b1.Disown()
		assert.Error(t, err, "a borrowed event is not ours to give away")
		require.NoError(t, b1.Close())
		require.NoError(t, b2.Close())
		assert.ErrorIs(t, b1.Synchronize(), ErrClosed)
		require.NoError(t, end.Record(s), "the owner's event outlives the wrapper")
		require.NoError(t, end.Synchronize())
	})
}

// An event alone in its context (no other event made there) is proven live all the same.
func TestWrapEventOfTheOnlyEventInItsContext(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		b, err := d.WrapEvent(e.Handle())
		require.NoError(t, err)
		defer b.Close()
		_, err = b.Query()
		require.NoError(t, err)
	})
}

// A borrowed event is its identity, not its address: once the event is destroyed, every
// use fails with ErrInvalidHandle before the driver sees the handle, also when the address
// names a new event.
func TestBorrowedEventIsRefusedAfterItsAddressIsReused(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		keep := newEvent(t, c, EventOptions{DisableTiming: true}) // a neighbour that stays
		theirs, err := c.NewEvent(EventOptions{DisableTiming: true})
		require.NoError(t, err)
		borrowed, err := d.WrapEvent(theirs.Handle())
		require.NoError(t, err)
		defer borrowed.Close()
		require.NoError(t, s.Record(borrowed), "live: usable")
		require.NoError(t, theirs.Close())
		calls := map[string]func() error{
			"Query":       func() error { _, err := borrowed.Query(); return err },
			"Synchronize": borrowed.Synchronize,
			"Record":      func() error { return s.Record(borrowed) },
			"Wait":        func() error { return s.WaitEvent(borrowed) },
			"ElapsedTime": func() error { _, err := borrowed.ElapsedTime(keep); return err },
		}
		for name, call := range calls {
			err := call()
			assert.ErrorIs(t, err, ErrInvalidHandle, name)
			assert.ErrorContains(t, err, "was destroyed", name)
		}
		reused := false
		for range 2000 {
			e := newEvent(t, c, EventOptions{DisableTiming: true})
			if e.Handle() == borrowed.Handle() {
				reused = true
				break
			}
		}
		t.Logf("address reused by a new event: %v", reused)
		if d.Name() == "sim" {
			require.True(t, reused, "the software driver reuses a freed address at once")
		}
		for name, call := range calls {
			err := call()
			assert.ErrorIs(t, err, ErrInvalidHandle, name)
			if reused {
				assert.ErrorContains(t, err, "now names another event", name)
			}
		}
	})
}
