package streams

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/boundary"
	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/sim"
)

// On a driver whose layout cannot be learned nothing foreign can be proven: a stream handle
// is refused with an error matching ErrNotSupported that names the way to take it anyway,
// and taken on the caller's word (Vouched) it works as any borrowed stream. Learning happens
// once per process, so this runs in a child with STREAMBRIDGE_LAYOUT=unlearnable, which
// makes both drivers behave so (the real one, on a GPU, too).
func TestAnUnlearnableLayout(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnlearnableLayoutChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), driver.LayoutSetting+"=unlearnable")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	assert.Contains(t, string(out), "--- PASS: TestUnlearnableLayoutChild/sim", "child:\n%s", out)
	assert.Contains(t, string(out), "--- PASS: TestUnlearnableLayoutChild/before_12.5", "child:\n%s", out)
	t.Logf("child:\n%s", out)
}

// TestUnlearnableLayoutChild is the other process of TestAnUnlearnableLayout; run alone it
// has nothing to do.
func TestUnlearnableLayoutChild(t *testing.T) {
	if never, _ := driver.Unlearnable(); !never {
		t.Skip("SKIP: runs only as the child of TestAnUnlearnableLayout")
	}
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		theirs := newStream(t, c, StreamOptions{NonBlocking: true}) // another library's, say
		e := newEvent(t, c, EventOptions{DisableTiming: true})

		_, err := d.WrapStream(theirs.Handle())
		require.ErrorIs(t, err, ErrNotSupported)
		assert.Contains(t, err.Error(), "layout could not be learned")
		assert.Contains(t, err.Error(), "streams.Vouched()", "the error names the way to take it anyway")
		_, _, err = d.StreamIdentity(theirs.Handle())
		require.ErrorIs(t, err, ErrNotSupported)

		s, err := d.WrapStream(theirs.Handle(), Vouched())
		require.NoError(t, err)
		assert.False(t, s.Owned())
		assert.Equal(t, 0, s.Device().Ordinal())
		dev, id, err := d.StreamIdentity(theirs.Handle(), Vouched())
		require.NoError(t, err)
		assert.Equal(t, 0, dev.Ordinal())
		assert.Zero(t, id, "nothing to check before each use")
		ran := make(chan struct{})
		require.NoError(t, s.LaunchHostFunc(func() { close(ran) }))
		require.NoError(t, s.Record(e))
		require.NoError(t, s.Synchronize())
		<-ran
		done, err := e.Query()
		require.NoError(t, err)
		assert.True(t, done)
		require.NoError(t, s.Close()) // borrowed: forgotten, not destroyed
		_, err = theirs.Query()
		require.NoError(t, err, "the owner's stream lives on")

		// an event likewise: refused bare, taken on the caller's word in the current context
		_, err = d.WrapEvent(e.Handle())
		require.ErrorIs(t, err, ErrNotSupported)
		assert.Contains(t, err.Error(), "streams.Vouched()", "the error names the way to take it anyway")
		ve, err := d.WrapEvent(e.Handle(), Vouched())
		require.NoError(t, err)
		assert.False(t, ve.Owned())
		assert.Equal(t, 0, ve.Context().Device().Ordinal())
		_, id, err = d.EventIdentity(e.Handle(), Vouched())
		require.NoError(t, err)
		assert.Equal(t, boundary.VouchedEventID, id, "nothing to check before each use")
		if n, err := d.DeviceCount(); err == nil && n > 1 { // a stated device is the one it is taken on
			on, _, err := d.EventIdentity(e.Handle(), VouchedOn(1))
			require.NoError(t, err)
			assert.Equal(t, 1, on.Ordinal())
		}
		require.NoError(t, d.VerifyEvent(e.Handle(), id))
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		require.NoError(t, theirs.LaunchHostFunc(func() { time.Sleep(20 * time.Millisecond) }))
		require.NoError(t, ve.Record(theirs))
		require.NoError(t, other.WaitEvent(ve))
		require.NoError(t, other.Synchronize())
		done, err = ve.Query()
		require.NoError(t, err)
		assert.True(t, done, "the wait held the other stream until the record")
		require.NoError(t, ve.Close()) // borrowed: forgotten, not destroyed
		_, err = e.Query()
		require.NoError(t, err, "the owner's event lives on")

		// a vouched stream wrapped inside its framework's capture (torch.cuda.graph, global
		// mode) leaves the capture going: its context is asked with cuStreamGetCtx_v2, where
		// cuStreamGetCtx would be refused and invalidate the capture
		func() {
			runtime.LockOSThread() // the framework begins and ends on one thread
			defer runtime.UnlockOSThread()
			capturing := newStream(t, c, StreamOptions{NonBlocking: true})
			require.NoError(t, d.check("cuStreamBeginCapture", d.api.StreamBeginCapture(driver.Stream(capturing.Handle()), driver.CaptureModeGlobal)))
			w, err := d.WrapStream(capturing.Handle(), Vouched())
			require.NoError(t, err)
			require.NoError(t, w.LaunchHostFunc(func() {}))
			st, _, err := w.CaptureInfo()
			require.NoError(t, err)
			assert.Equal(t, CaptureActive, st, "the wrap left the capture going")
			g, r := d.api.StreamEndCapture(driver.Stream(capturing.Handle()))
			require.Equal(t, driver.Success, r, "the framework ends its capture")
			require.Equal(t, driver.Success, d.api.GraphDestroy(g))
			require.NoError(t, w.Close())
		}()

		proven, why, err := d.HandleProof()
		require.NoError(t, err)
		assert.False(t, proven)
		assert.Equal(t, "STREAMBRIDGE_LAYOUT=unlearnable", why)
	})

	// A driver before CUDA 12.5 has no cuStreamGetCtx_v2: a vouched stream's context is
	// asked with cuStreamGetCtx there (the software driver, reporting 12.4).
	t.Run("before 12.5", func(t *testing.T) {
		t.Setenv(sim.VersionSetting, "12040")
		d := newDriver(sim.New())
		c := primary(t, d, 0)
		theirs := newStream(t, c, StreamOptions{NonBlocking: true})
		s, err := d.WrapStream(theirs.Handle(), Vouched())
		require.NoError(t, err)
		assert.Equal(t, 0, s.Device().Ordinal())
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		require.NoError(t, s.Record(e))
		require.NoError(t, s.Synchronize())
		require.NoError(t, s.Close())
	})
}

// HandleProof says the layout is learned, on both drivers, where nothing says otherwise
// (the child above checks the other answer), and where each word lies, as the driver's
// description says: on the software driver's layouts with a level of indirection more and
// with the identity elsewhere too; on its layout that cannot be learned, that it cannot.
func TestHandleProofIsTheLearnedLayout(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		proven, why, err := d.HandleProof()
		require.NoError(t, err)
		assert.True(t, proven, why)
		assert.Contains(t, why, "learned")
		m, em := d.api.StreamMemory(), d.api.EventMemory()
		assert.Contains(t, why, fmt.Sprintf("holds the handle at word %d and the context at word %d", m.BackAt, m.CtxAt))
		assert.Contains(t, why, fmt.Sprintf("whose context is at word %d", em.CtxAt))
	})
	for layout, says := range map[string]string{
		"0": "a handle leads to the object its block points to, which holds the handle at word 3 and the context at word 1; " +
			"the identity is at word 6",
		"3": "a handle leads to the object one block further (word 3 of the block its block points to), which holds the " +
			"handle at word 7 and the context at word 5; the identity is at word 2",
		"4": "the identity is at word 6 of the block the object's word 9 points to; event handles likewise: an event " +
			"handle leads to the object it points to, whose context is at word 4, whose neighbours in its context's " +
			"list are at words 13 and 10, and whose identity is at word 2 of the block the object's word 7 points to",
		"3+": "event handles likewise: an event handle leads to the object word 2 of its block points to, which holds " +
			"the handle at word 9, whose context is at word 6",
		"5": "the driver's stream objects are laid out as none this version can learn",
	} {
		t.Setenv(sim.LayoutSetting, strings.TrimSuffix(layout, "+"))
		_, why, err := newDriver(sim.New()).HandleProof()
		require.NoError(t, err)
		assert.Contains(t, why, says, "layout %s", layout)
	}
}

// Streams made every way are proven (the layout, checked on such streams before it is
// trusted, holds for them): blocking, of the greatest priority, made on another OS thread.
func TestStreamsMadeEveryWayAreProven(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		_, greatest, err := c.StreamPriorityRange()
		require.NoError(t, err)
		made := map[string]*Stream{
			"blocking":          newStream(t, c, StreamOptions{}),
			"greatest priority": newStream(t, c, StreamOptions{NonBlocking: true, Priority: greatest}),
		}
		var other *Stream
		made2 := make(chan error)
		go func() {
			runtime.LockOSThread() // a thread of its own while the test's goroutine waits
			defer runtime.UnlockOSThread()
			var err error
			other, err = c.NewStream(StreamOptions{NonBlocking: true})
			made2 <- err
		}()
		require.NoError(t, <-made2)
		t.Cleanup(func() { assert.NoError(t, other.Close()) })
		made["another thread"] = other
		for name, theirs := range made {
			s, err := d.WrapStream(theirs.Handle())
			require.NoError(t, err, name)
			want, err := theirs.ID()
			require.NoError(t, err)
			got, err := s.ID()
			require.NoError(t, err)
			assert.Equal(t, want, got, name)
			assert.Equal(t, 0, s.Device().Ordinal(), name)
		}
	})
}

// Events made every way are proven likewise (the event layout, checked on such events
// before it is trusted, holds for them): timing, blocking sync, interprocess, made on
// another OS thread; each orders work as a wrapped event.
func TestEventsMadeEveryWayAreProven(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		made := map[string]*Event{
			"timing":        newEvent(t, c, EventOptions{}),
			"blocking sync": newEvent(t, c, EventOptions{BlockingSync: true, DisableTiming: true}),
			"interprocess":  newEvent(t, c, EventOptions{Interprocess: true, DisableTiming: true}),
		}
		made2 := make(chan error)
		go func() {
			runtime.LockOSThread() // a thread of its own while the test's goroutine waits
			defer runtime.UnlockOSThread()
			e, err := c.NewEvent(EventOptions{DisableTiming: true})
			made["another thread"] = e
			made2 <- err
		}()
		require.NoError(t, <-made2)
		t.Cleanup(func() { assert.NoError(t, made["another thread"].Close()) })
		a := newStream(t, c, StreamOptions{NonBlocking: true})
		b := newStream(t, c, StreamOptions{NonBlocking: true})
		for name, theirs := range made {
			e, err := d.WrapEvent(theirs.Handle())
			require.NoError(t, err, name)
			assert.False(t, e.Owned(), name)
			assert.Equal(t, 0, e.Context().Device().Ordinal(), name)
			var j journal
			require.NoError(t, a.LaunchHostFunc(func() { time.Sleep(10 * time.Millisecond); j.add("a")() }))
			require.NoError(t, e.Record(a), name)
			require.NoError(t, b.WaitEvent(e), name)
			require.NoError(t, b.LaunchHostFunc(j.add("b")))
			require.NoError(t, b.Synchronize())
			assert.Equal(t, []string{"a", "b"}, j.get(), name)
			require.NoError(t, e.Close())
		}
	})
}

// The handle checks let an embedder's lock go (driver.AroundWait: the Python core's GIL) at
// the same points on both drivers: the first stream check and the first event check of a
// process, where the real driver learns its layout, and an event check that makes a sentinel
// beside an event alone in its context; nowhere else. The software driver has nothing to
// learn and keeps no object lists, so it says where the real one would, and this holds it to
// the real one on a GPU. Learning happens once per process: in a child.
func TestTheChecksLetAnEmbeddersLockGoWhereTheRealDriversDo(t *testing.T) {
	needsLearnedLayout(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLetGoPointsChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "STREAMBRIDGE_LETGO_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	assert.Contains(t, string(out), "--- PASS: TestLetGoPointsChild/sim", "child:\n%s", out)
	if requireGPU {
		assert.Contains(t, string(out), "--- PASS: TestLetGoPointsChild/cuda", "child:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

// TestLetGoPointsChild is the other process of TestTheChecksLetAnEmbeddersLockGoWhereTheRealDriversDo;
// run alone it has nothing to do.
func TestLetGoPointsChild(t *testing.T) {
	if os.Getenv("STREAMBRIDGE_LETGO_CHILD") != "1" {
		t.Skip("SKIP: runs only as the child of TestTheChecksLetAnEmbeddersLockGoWhereTheRealDriversDo")
	}
	var lets atomic.Int32
	driver.LetGoAroundWaits(func() uintptr { lets.Add(1); return 1 }, func(uintptr) {})
	t.Cleanup(func() { driver.LetGoAroundWaits(nil, nil) })
	eachDriver(t, func(t *testing.T, d *Driver) {
		needsLearnedLayout(t)
		c := primary(t, d, 0)
		theirs := newStream(t, c, StreamOptions{NonBlocking: true})
		ctx := driver.Context(c.Handle())
		var events [2]driver.Event // another library's: made and destroyed on the driver
		for i := range events {
			var r driver.Result
			events[i], r = d.api.EventCreate(ctx, driver.EventDisableTiming)
			require.Equal(t, driver.Success, r)
		}
		alone, neighbour := events[0], events[1]
		t.Cleanup(func() { d.api.EventDestroy(alone) })
		before := lets.Load()
		letGo := func(step string, want int32, check func() error) {
			t.Helper()
			from := lets.Load()
			require.NoError(t, check(), step)
			assert.Equal(t, want, lets.Load()-from, "%s: the embedder's lock let go so many times", step)
		}
		stream := func() error { _, _, err := d.StreamIdentity(theirs.Handle()); return err }
		event := func() error { _, _, err := d.EventIdentity(uintptr(alone)); return err }
		letGo("the first stream check", 1, stream)
		letGo("a stream check after it", 0, stream)
		letGo("the first event check, of an event with a neighbour", 1, event)
		letGo("an event check after it", 0, event)
		require.Equal(t, driver.Success, d.api.EventDestroy(neighbour))
		letGo("the check of an event alone in its context (a sentinel made)", 1, event)
		letGo("its check again, beside its sentinel", 0, event)
		assert.Equal(t, int32(3), lets.Load()-before)
	})
}
