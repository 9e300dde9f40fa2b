package streams

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hostile integers handed to WrapStream: each must fail with ErrInvalidHandle, on the real
// driver before libcuda (which would crash on them) sees them. That this test returns at
// all is the proof that none crashed.
func TestWrapStreamRefusesWhatIsNotALiveStream(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		goHeap := make([]uint64, 64)
		var onStack [8]uint64
		event := newEvent(t, c, EventOptions{})
		destroyed, err := c.NewStream(StreamOptions{})
		require.NoError(t, err)
		destroyedHandle := destroyed.Handle()
		require.NoError(t, destroyed.Close())

		cases := []struct {
			name   string
			handle uintptr
		}{
			{"small", 3},
			{"page zero", 0x800},
			{"odd", 0x12345679},
			{"garbage", 0xdeadbeef},
			{"unmapped", 0x100000000},
			{"top of user space", 1<<47 - 8},
			{"kernel half", 0xffff800000000000},
			{"all ones", ^uintptr(0)},
			{"negative one as uint", ^uintptr(0) - 7},
			{"Go heap", uintptr(unsafe.Pointer(&goHeap[8]))},
			{"Go stack", uintptr(unsafe.Pointer(&onStack[0]))},
			{"code", reflect.ValueOf(TestMain).Pointer() &^ 7},
			{"an event", event.Handle()},
			{"a context", c.Handle()},
			{"a destroyed stream", destroyedHandle},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := d.WrapStream(tc.handle)
				assert.ErrorIs(t, err, ErrInvalidHandle, "%#x", tc.handle)
				_, err = c.WrapStream(tc.handle)
				assert.ErrorIs(t, err, ErrInvalidHandle, "%#x", tc.handle)
			})
		}
		rng := rand.New(rand.NewPCG(1, 2))
		refused := 0
		for range 100_000 {
			h := uintptr(rng.Uint64())
			if h <= 2 {
				continue
			}
			if _, err := d.WrapStream(h); err != nil {
				refused++
			}
		}
		assert.Equal(t, 100_000, refused, "random integers are never taken for streams")

		live := newStream(t, c, StreamOptions{})
		s, err := d.WrapStream(live.Handle())
		require.NoError(t, err, "a live stream still wraps after all that")
		require.NoError(t, s.Synchronize())
	})
}

// Every device's streams pass the check and are found on their own device.
func TestWrapStreamOnEveryDevice(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		n, err := d.DeviceCount()
		require.NoError(t, err)
		for i := range n {
			c := primary(t, d, i)
			for _, opts := range []StreamOptions{{}, {NonBlocking: true, Priority: -1}} {
				s := newStream(t, c, opts)
				w, err := d.WrapStream(s.Handle())
				require.NoError(t, err, "device %d", i)
				assert.Equal(t, i, w.Device().Ordinal())
			}
		}
	})
}
