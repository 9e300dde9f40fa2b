package streams

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// Goroutines move between OS threads; CUDA's per-thread default stream and its rule for
// ending a capture are the thread's. These tests keep the scheduler busy so that an
// unlocked goroutine does move, as it does in a real program.

// busyScheduler keeps other goroutines runnable for the test's length, so that a goroutine
// that blocks (a sleep, a host function's wait) comes back on another thread.
func busyScheduler(t *testing.T) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				runtime.Gosched()
			}
		}()
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
}

// lockedThread is a goroutine locked to an OS thread of its own for the test's length;
// the returned func runs fn there and waits for it. Two of them are two threads.
func lockedThread(t *testing.T) func(fn func()) {
	jobs := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		for fn := range jobs {
			fn()
		}
	}()
	t.Cleanup(func() { close(jobs) })
	return func(fn func()) {
		done := make(chan struct{})
		jobs <- func() { defer close(done); fn() }
		<-done
	}
}

// A wrapper of the per-thread default stream is the wrapping thread's: work on it is in
// order from a goroutine locked there, another thread's per-thread stream is another
// stream (not held up by this one's work), and a call from another thread is refused.
func TestPerThreadStreamIsTheWrappingThreads(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		var mine *Stream
		var ended atomic.Bool
		release := make(chan struct{})
		first, second := lockedThread(t), lockedThread(t)
		first(func() {
			var err error
			mine, err = c.WrapStream(PerThreadStream)
			require.NoError(t, err)
			require.NoError(t, mine.LaunchHostFunc(func() { <-release; ended.Store(true) }))
		})
		t.Cleanup(func() { mine.Close() })
		second(func() {
			_, err := mine.Query()
			require.ErrorIs(t, err, ErrWrongThread)
			assert.ErrorContains(t, err, "runtime.LockOSThread")
			theirs, err := c.WrapStream(PerThreadStream)
			require.NoError(t, err)
			defer theirs.Close()
			ready, err := theirs.Query()
			require.NoError(t, err)
			assert.True(t, ready, "another thread's per-thread stream waits for nothing of this one's")
		})
		close(release)
		first(func() { require.NoError(t, mine.Synchronize()) })
		assert.True(t, ended.Load(), "Synchronize on the wrapping thread waited for its host function")
		_, err := mine.Query() // from this goroutine, never on first's thread, which is locked
		require.ErrorIs(t, err, ErrWrongThread)
	})
}

// The case: a host function that sleeps on a wrapper of the per-thread stream,
// other goroutines busy, then Synchronize on the same wrapper from the same, unlocked,
// goroutine. It returned before the host function ended in 14 of 20 runs; now each run
// either waits for it or is refused, never silently out of order.
func TestPerThreadStreamNeverLosesOrderOnAMovingGoroutine(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		busyScheduler(t)
		var waited, refused int
		for range 20 {
			s, err := c.WrapStream(PerThreadStream)
			require.NoError(t, err)
			var ended atomic.Bool
			err = s.LaunchHostFunc(func() { time.Sleep(20 * time.Millisecond); ended.Store(true) })
			if err == nil {
				time.Sleep(time.Millisecond)
				err = s.Synchronize()
				if err == nil {
					require.True(t, ended.Load(), "Synchronize returned before the host function ended")
					waited++
				}
			}
			if err != nil {
				require.ErrorIs(t, err, ErrWrongThread)
				refused++
			}
			require.NoError(t, s.Close())
		}
		t.Logf("%d runs waited in order, %d were refused as from another thread", waited, refused)
	})
}

// A capture in any mode, begun and ended by one ordinary goroutine while the scheduler is
// busy: CUDA wants a global or thread-local one ended on the thread that began it, which
// BeginCapture keeps the goroutine on (it failed in 19 of 20 runs, and 20 of 20).
func TestCaptureFromAnOrdinaryGoroutineInEveryMode(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		busyScheduler(t)
		for _, mode := range []CaptureMode{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed} {
			for run := range 20 {
				done := make(chan error, 1)
				go func() {
					done <- func() error {
						if err := s.BeginCapture(mode); err != nil {
							return err
						}
						if err := s.Record(e); err != nil {
							return err
						}
						time.Sleep(time.Millisecond) // the goroutine blocks, and would come back elsewhere
						runtime.Gosched()
						g, err := s.EndCapture()
						if err != nil {
							return err
						}
						return g.Close()
					}()
				}()
				require.NoError(t, <-done, "mode %d, run %d", mode, run)
			}
		}
	})
}

// EndCapture from another thread than the capture's (global or thread-local) is refused,
// and the capture goes on: the goroutine that began it ends it.
func TestEndCaptureFromAnotherThreadIsRefused(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		for _, mode := range []CaptureMode{CaptureGlobal, CaptureThreadLocal} {
			t.Run(fmt.Sprint("mode ", mode), func(t *testing.T) {
				s := newStream(t, c, StreamOptions{NonBlocking: true})
				begun, tried := make(chan error), make(chan error)
				ended := make(chan error)
				go func() {
					begun <- s.BeginCapture(mode)
					<-tried
					g, err := s.EndCapture()
					if err == nil {
						err = g.Close()
					}
					ended <- err
				}()
				require.NoError(t, <-begun)
				lockedThread(t)(func() { // a thread of its own: not the capture's, which is locked
					_, err := s.EndCapture()
					require.ErrorIs(t, err, ErrCaptureWrongThread)
					var ce *CallError
					require.True(t, errors.As(err, &ce))
					assert.Contains(t, ce.Hint, "BeginCapture")
					st, _, err := s.CaptureInfo()
					require.NoError(t, err)
					assert.Equal(t, CaptureActive, st, "the capture goes on")
				})
				tried <- nil
				require.NoError(t, <-ended)
			})
		}
	})
}

// A global capture that other code began (here the driver API itself, as torch would) and
// that is ended from another thread: the driver ends it, discarding it, and says
// CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD (seen on the H100, driver 580); the software
// driver does the same.
func TestEndOfAForeignCaptureFromAnotherThreadDiscardsIt(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		begin, end := lockedThread(t), lockedThread(t)
		begin(func() {
			require.NoError(t, c.Do(func() error {
				return d.check("cuStreamBeginCapture", d.api.StreamBeginCapture(driver.Stream(s.Handle()), CaptureGlobal))
			}))
		})
		end(func() {
			_, err := s.EndCapture()
			require.ErrorIs(t, err, ErrCaptureWrongThread)
		})
		st, _, err := s.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureNone, st, "the capture is over")
		ready, err := s.Query()
		require.NoError(t, err)
		assert.True(t, ready)
	})
}

// What a capture in each mode forbids another thread, in the driver's own entry points
// (the thread's mode: global until set), as the real driver has it (H100 and H200, driver
// 580): a query or synchronize of an unrelated stream or event from a thread in global
// mode fails and invalidates a capture begun in global mode; relaxed, it is allowed.
func TestWhatACaptureForbidsOtherThreads(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		capturer, bystander := lockedThread(t), lockedThread(t)
		entry := func(name string, h uintptr) func() driver.Result {
			return func() driver.Result {
				var r uintptr
				require.NoError(t, c.Do(func() error { r, _, _ = purego.SyscallN(d.api.Entry(name), h); return nil }))
				return driver.Result(r)
			}
		}
		calls := map[string]func() driver.Result{
			"cuStreamQuery":      entry("cuStreamQuery", other.Handle()),
			"cuEventQuery":       entry("cuEventQuery", e.Handle()),
			"cuEventSynchronize": entry("cuEventSynchronize", e.Handle()),
		}
		for name, call := range calls {
			for _, mode := range []CaptureMode{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed} {
				for _, relaxed := range []bool{false, true} {
					s := newStream(t, c, StreamOptions{NonBlocking: true})
					capturer(func() { require.NoError(t, s.BeginCapture(mode)) })
					var got driver.Result
					bystander(func() {
						if relaxed {
							before, r := d.api.ThreadExchangeStreamCaptureMode(CaptureRelaxed)
							require.Equal(t, driver.Success, r)
							defer d.api.ThreadExchangeStreamCaptureMode(before)
						}
						got = call()
					})
					st, _, err := s.CaptureInfo()
					require.NoError(t, err)
					endCapture(t, capturer, s)
					what := fmt.Sprintf("%s from another thread (relaxed: %v) during a capture in mode %d", name, relaxed, mode)
					if mode == CaptureGlobal && !relaxed {
						assert.Equal(t, driver.ErrorCaptureUnsupported, got, what)
						assert.Equal(t, CaptureInvalidated, st, what)
					} else {
						assert.Equal(t, driver.Success, got, what)
						assert.Equal(t, CaptureActive, st, what)
					}
				}
			}
		}
	})
}

// endCapture ends s's capture on the capturer's thread and drops its graph, if any.
func endCapture(t *testing.T, capturer func(func()), s *Stream) {
	capturer(func() {
		if g, err := s.EndCapture(); err == nil {
			require.NoError(t, g.Close())
		}
	})
}

// The library's queries and synchronizes, allocations and frees leave another thread's
// capture alone, in every mode, where the driver's own calls would invalidate a global one
// (above; cuMemAlloc, cuMemFree and cuModuleUnload too: bench/capture_modes.c): they run in
// relaxed mode. What every mode forbids is still refused (the capturing stream itself, an
// event recorded in the capture: TestQueryAndSynchronizeOfACapturingStreamAreRefusedFirst,
// TestQueryOfAnEventRecordedInACaptureIsRefusedFirst).
func TestCallsLeaveOtherThreadsCapturesAlone(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		require.NoError(t, other.Record(e))
		host := make([]byte, 64)
		// Each makes what its call needs, before the capture, and returns the call.
		calls := map[string]func() func() error{
			"Stream.Query":       func() func() error { return func() error { _, err := other.Query(); return err } },
			"Stream.Synchronize": func() func() error { return other.Synchronize },
			"Event.Query":        func() func() error { return func() error { _, err := e.Query(); return err } },
			"Event.Synchronize":  func() func() error { return e.Synchronize },
			"Context.Alloc": func() func() error {
				return func() error {
					b, err := c.Alloc(64)
					if err == nil {
						t.Cleanup(func() { require.NoError(t, b.Close()) })
					}
					return err
				}
			},
			"Buffer.Close":   func() func() error { return newBuffer(t, c, 64).Close },
			"CopyToDevice":   func() func() error { b := newBuffer(t, c, 64); return func() error { return CopyToDevice(b, host) } },
			"CopyFromDevice": func() func() error { b := newBuffer(t, c, 64); return func() error { return CopyFromDevice(host, b) } },
		}
		if d != Sim() { // the software driver loads no modules (TestSoftwareDriverRunsNoDeviceCode)
			calls["Module.Close"] = func() func() error {
				m, err := c.LoadModule(kernelsPTX)
				require.NoError(t, err)
				return m.Close
			}
		}
		capturer, bystander := lockedThread(t), lockedThread(t)
		for name, prepare := range calls {
			for _, mode := range []CaptureMode{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed} {
				call := prepare()
				s := newStream(t, c, StreamOptions{NonBlocking: true})
				capturer(func() { require.NoError(t, s.BeginCapture(mode)) })
				var err error
				bystander(func() { err = call() })
				st, _, infoErr := s.CaptureInfo()
				require.NoError(t, infoErr)
				var ended error
				capturer(func() {
					g, err := s.EndCapture()
					if ended = err; err == nil {
						require.NoError(t, g.Close())
					}
				})
				what := fmt.Sprintf("%s from another thread during a capture in mode %d", name, mode)
				assert.NoError(t, err, what)
				assert.Equal(t, CaptureActive, st, what)
				assert.NoError(t, ended, what)
			}
		}
	})
}
