package streams

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/streambridge/streambridge/internal/driver"
)

// Many goroutines on every device at once: each call that needs a current context must
// get the right one whatever thread the goroutine is on, and must leave the thread's own
// current context as it found it.
func TestContextsAcrossGoroutinesAndDevices(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		n, err := d.DeviceCount()
		require.NoError(t, err)
		ctxs := make([]*Context, n)
		for i := range n {
			ctxs[i] = primary(t, d, i)
		}
		t.Logf("%d device(s)", n)
		const goroutines, iterations = 64, 50
		var group errgroup.Group
		for g := range goroutines {
			group.Go(func() error { return exercise(d, ctxs, g, iterations) })
		}
		require.NoError(t, group.Wait())
	})
}

// exercise runs one goroutine's share. Half the goroutines lock their thread and set a
// context of their own (or none) current first, as an unrelated library would, and check
// it is still there after every call.
func exercise(d *Driver, ctxs []*Context, g, iterations int) error {
	locked := g%2 == 0
	var mine driver.Context
	if locked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if g%4 == 0 {
			mine = ctxs[(g/4)%len(ctxs)].handle
		}
		if r := d.api.CtxSetCurrent(mine); r != driver.Success {
			return r
		}
		defer d.api.CtxSetCurrent(0)
	}
	for i := range iterations {
		c := ctxs[(g+i)%len(ctxs)]
		s, err := c.NewStream(StreamOptions{NonBlocking: i%2 == 0})
		if err != nil {
			return err
		}
		owner, r := d.api.StreamGetCtx(driver.Stream(s.Handle()))
		if r != driver.Success {
			return r
		}
		if owner != c.handle {
			return fmt.Errorf("goroutine %d: stream made in context %#x, want %#x", g, owner, c.handle)
		}
		legacy, err := c.WrapStream(NullStream)
		if err != nil {
			return err
		}
		e, err := c.NewEvent(EventOptions{DisableTiming: true})
		if err != nil {
			return err
		}
		if err := s.Record(e); err != nil {
			return err
		}
		if err := legacy.WaitEvent(e); err != nil {
			return err
		}
		if err := legacy.Synchronize(); err != nil {
			return err
		}
		if err := s.Close(); err != nil {
			return err
		}
		if err := e.Close(); err != nil {
			return err
		}
		if err := legacy.Close(); err != nil {
			return err
		}
		runtime.Gosched()
		if locked {
			cur, r := d.api.CtxGetCurrent()
			if r != driver.Success {
				return r
			}
			if cur != mine {
				return fmt.Errorf("goroutine %d: thread's current context changed from %#x to %#x", g, mine, cur)
			}
		}
	}
	return nil
}
