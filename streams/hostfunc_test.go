package streams

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// capturePanics routes host-function panics to the returned func for the test's length.
func capturePanics(t *testing.T) func() []error {
	var mu sync.Mutex
	var got []error
	SetHostFuncPanicHandler(func(err error) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
	})
	t.Cleanup(func() { SetHostFuncPanicHandler(nil) })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), got...)
	}
}

func TestHostFuncPanicIsReportedAndStreamGoesOn(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		panics := capturePanics(t)
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		var j journal
		require.NoError(t, s.LaunchHostFunc(func() { panic("boom") }))
		require.NoError(t, s.LaunchHostFunc(j.add("after the panic")))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []string{"after the panic"}, j.get())
		got := panics()
		require.Len(t, got, 1)
		var p *HostFuncPanic
		require.True(t, errors.As(got[0], &p))
		assert.Equal(t, "boom", p.Value)
		assert.NotEmpty(t, p.Stack)
	})
}

// t.FailNow inside a host function calls runtime.Goexit: on the real driver's thread, which
// Go did not make, Go allows none. The process ends, saying why, on both drivers (the
// software driver's stream would hang); the child process shows it.
func TestHostFuncGoexitEndsTheProcessSayingWhy(t *testing.T) {
	child := os.Getenv("STREAMBRIDGE_TEST_GOEXIT") == "1"
	eachDriver(t, func(t *testing.T, d *Driver) {
		if child {
			s := newStream(t, primary(t, d, 0), StreamOptions{})
			require.NoError(t, s.LaunchHostFunc(func() { runtime.Goexit() }))
			_ = s.Synchronize()
			t.Fatal("the process went on after a host function's Goexit")
		}
		name := t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostFuncGoexitEndsTheProcessSayingWhy$/^"+name+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), "STREAMBRIDGE_TEST_GOEXIT=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
		assert.Equal(t, driver.GoexitExitCode, exit.ExitCode(), "%s", out)
		assert.Contains(t, string(out), ErrHostFuncGoexit.Error())
		assert.NotContains(t, string(out), "the process went on")
	})
}

func TestHostFuncRunsInStreamOrder(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		var j journal
		for _, name := range []string{"a", "b", "c", "d"} {
			require.NoError(t, s.LaunchHostFunc(j.add(name)))
		}
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []string{"a", "b", "c", "d"}, j.get())
	})
}

func TestHostFuncNil(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		s := newStream(t, primary(t, d, 0), StreamOptions{})
		require.Error(t, s.LaunchHostFunc(nil))
	})
}

// A million host functions: far more than purego's callback slots, so this shows the one
// trampoline and the handle table at work, and that the table does not grow.
func TestMillionHostFuncs(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		before := settledHostFuncs()
		var count atomic.Int64
		fn := func() { count.Add(1) }
		const batch = 10_000
		for i := 0; i < n; i += batch {
			for range batch {
				if err := s.LaunchHostFunc(fn); err != nil {
					require.NoError(t, err)
				}
			}
			require.NoError(t, s.Synchronize())
		}
		assert.Equal(t, int64(n), count.Load())
		assert.Equal(t, before, LiveHostFuncs(), "every one-shot entry was freed")
	})
}

// CUDA forbids CUDA calls in a host function: the driver runs host functions one at a
// time, so one that synchronizes a stream (its own, or another with a host function
// queued behind this one) would wait forever. Every call that would reach the driver gets
// ErrInHostFunc instead, and the streams go on. A Close is taken: its destroy runs later,
// off the driver's thread.
func TestEveryDriverCallFromAHostFunctionFails(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		doomed := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		dev := c.Device()
		calls := map[string]func() error{
			"Stream.Synchronize":          s.Synchronize,
			"other.Synchronize":           other.Synchronize,
			"Event.Synchronize":           e.Synchronize,
			"Stream.Query":                func() error { _, err := other.Query(); return err },
			"Stream.Record":               func() error { return other.Record(e) },
			"Stream.WaitEvent":            func() error { return other.WaitEvent(e) },
			"Stream.WaitStream":           func() error { return other.WaitStream(s) },
			"Stream.LaunchHostFunc":       func() error { return other.LaunchHostFunc(func() {}) },
			"Stream.Priority":             func() error { _, err := other.Priority(); return err },
			"Stream.BeginCapture":         func() error { return other.BeginCapture(CaptureRelaxed) },
			"Event.Query":                 func() error { _, err := e.Query(); return err },
			"Context.NewStream":           func() error { _, err := c.NewStream(StreamOptions{}); return err },
			"Context.NewEvent":            func() error { _, err := c.NewEvent(EventOptions{}); return err },
			"Context.WrapStream":          func() error { _, err := c.WrapStream(PerThreadStream); return err },
			"Context.Alloc":               func() error { _, err := c.Alloc(64); return err },
			"Context.Do":                  func() error { return c.Do(func() error { return nil }) },
			"Context.StreamPriorityRange": func() error { _, _, err := c.StreamPriorityRange(); return err },
			"Driver.WrapStream":           func() error { _, err := d.WrapStream(other.Handle()); return err },
			"Driver.DeviceCount":          func() error { _, err := d.DeviceCount(); return err },
			"Driver.Version":              func() error { _, err := d.Version(); return err },
			"Device.Name":                 func() error { _, err := dev.Name(); return err },
			"Device.PrimaryContext":       func() error { _, err := dev.PrimaryContext(); return err },
		}
		got := make(chan map[string]error, 1)
		closed := make(chan error, 1)
		require.NoError(t, s.LaunchHostFunc(func() {
			errs := map[string]error{}
			for name, call := range calls {
				errs[name] = call()
			}
			got <- errs
			closed <- doomed.Close()
		}))
		require.NoError(t, other.WaitStream(s)) // other's host function waits for the one above
		ran := make(chan struct{})
		require.NoError(t, other.LaunchHostFunc(func() { close(ran) }))
		require.NoError(t, other.Record(e))
		select {
		case errs := <-got:
			require.Len(t, errs, len(calls))
			for name, err := range errs {
				assert.ErrorIs(t, err, ErrInHostFunc, name)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a call inside a host function hung")
		}
		require.NoError(t, <-closed, "a Close inside a host function is taken")
		require.NoError(t, other.Synchronize(), "outside a host function it works")
		<-ran
		_, err := doomed.Query()
		assert.ErrorIs(t, err, ErrClosed)
	})
}

// While a host function runs, calls from other goroutines are not in it.
func TestCallsBesideARunningHostFunctionWork(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		inside, release := make(chan struct{}), make(chan struct{})
		require.NoError(t, s.LaunchHostFunc(func() { close(inside); <-release }))
		<-inside
		for range 100 {
			_, err := other.Query()
			require.NoError(t, err)
			require.NoError(t, other.Synchronize())
		}
		close(release)
		require.NoError(t, s.Synchronize())
	})
}
