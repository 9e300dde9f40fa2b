package streams

import (
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

// The capture lock. The real driver is not safe against a capture that begins or ends while
// another thread's call touches a stream or an event: on an H100 (driver 580), a loop of
// begin, record, end on one thread crashed the process (SIGSEGV) within three seconds
// against a second thread's wait on the captured event, a record on the capturing stream,
// a re-record of the captured event on another stream, a wait of the capturing stream on
// another event, a fence recorded on it and waited on by two threads, events recorded into
// it and destroyed, or a second thread capturing the same stream; a lone waiter hung it.
// What touched neither the capturing stream nor its events was safe: other streams made,
// destroyed, recorded on, waited on and synchronized, events never recorded into it, and
// cuStreamIsCapturing; cuStreamGetCaptureInfo of the capturing stream and a relaxed query
// of it were not (bench/capture_races.c). Captures from many
// threads are what real programs do (torch.cuda.graph on one thread, a data loader's stream
// on another), so streambridge orders them itself:
//
//   - a call that hands a stream or an event to the driver takes lockOp: one of the stripes,
//     chosen by its handle, shared, while no capture of ours is counted (Driver.capturing)
//     and the event it uses was not recorded while one was (Event.capturedIn); otherwise
//     captureMu whole, so that calls during a capture run one at a time;
//   - BeginCapture, EndCapture and the end of a capture lost with its stream take
//     lockChange: captureMu and every stripe, so that no call is in flight when a capture
//     begins or ends, and the count a call reads cannot change under it;
//   - calls on a graph or an executable graph (instantiate, node count, launch, upload,
//     destroy), whose objects CUDA does not synchronize at all, take captureMu whole; a
//     launch or an upload takes its stream's stripe alone too (lockLaunch): the driver
//     did not survive a query or a synchronize of a stream beside a launch on it of a
//     graph a user object kept, and every captured host function is kept by one;
//   - a wait (Synchronize) is polled, a query at a time under lockOp (Driver.wait), never
//     the driver's own wait: that crashed where a capture began or ended on the stream,
//     or recorded the event, on another thread (bench/capture_races.c, cases 38 to 48),
//     and a wait holding a lock would hold up every capture for as long as it waits.
//
// The Python package's C core takes the same lock for its own driver calls, through its
// face in this memory (Driver.gate, driver.CaptureGate): counts by stripe that takeWhole
// waits to drain while no capture is counted, and the owner word that takeWhole takes with
// captureMu otherwise. A capture begun and left alone still crashed the H100 when two other
// threads' calls touched it at once (bench/capture_races.c, the steady cases), so calls
// during a capture run one at a time across both cores.
//
// While no capture is counted a call costs a shared lock of its stripe, two locked
// instructions on a line no other stripe shares (bench/RESULTS.md). The model, and what
// the lock does not yet order (captures other libraries begin): docs/lifetimes.md.

const captureStripes = 64

// lockOp takes the capture lock for a call on handle h (a stream's or an event's): a stripe
// shared, or captureMu whole where a capture of ours is counted or the call's event is
// linked to one (Event.linked). unlockOp gives it back.
func (d *Driver) lockOp(h uintptr, linked bool) *sync.RWMutex {
	stripe := d.stripe(h)
	stripe.RLock()
	if d.capturing.Load() == 0 && !linked {
		return stripe
	}
	stripe.RUnlock()
	d.takeWhole()
	return nil
}

// lockWhole takes captureMu whole, for a call on a graph or an executable graph: CUDA does
// not synchronize graph objects at all, and an executable's calls raced an instantiate of
// its graph into a crash (the chaos soak, H100). unlockOp(nil) gives it back.
func (d *Driver) lockWhole() *sync.RWMutex {
	d.takeWhole()
	return nil
}

// stripe is handle h's stripe of the lock.
func (d *Driver) stripe(h uintptr) *sync.RWMutex { return &d.stripes[(h>>6)%captureStripes] }

// lockLaunch takes the lock for a graph's launch or upload on stream h: captureMu whole, as
// every call on a graph object, and h's stripe alone, so that no call of ours on the stream
// runs beside it. The real driver did not survive a query or a synchronize of a stream at
// once with a launch on it of a graph whose host node a user object keeps: SIGSEGV, or the
// launch failing CUDA_ERROR_UNKNOWN (an H200, driver 580: bench/capture_races.c,
// cases 22, 24, 26 and 27; the same graph without the user object ran clean), and every
// host function captured through streambridge is kept by one (Stream.LaunchHostFunc). A
// synchronize's queries take the stripe shared (Driver.wait). The C core's calls stay out
// while the lock is held whole. unlockLaunch gives it back.
func (d *Driver) lockLaunch(h uintptr) *sync.RWMutex {
	d.takeWhole()
	stripe := d.stripe(h)
	stripe.Lock()
	return stripe
}

func (d *Driver) unlockLaunch(stripe *sync.RWMutex) {
	stripe.Unlock()
	d.giveWhole()
}

// takeWhole takes captureMu and the gate's Owner, and waits until no call of the C core's
// is in flight (driver.CaptureGate). giveWhole gives both back.
func (d *Driver) takeWhole() {
	d.captureMu.Lock()
	d.gate.Closed.Add(1)
	for try := 0; !d.gate.Owner.CompareAndSwap(0, 1); try++ {
		backOff(try)
	}
	for i := range d.gate.Busy {
		for try := 0; d.gate.Busy[i].N.Load() != 0; try++ {
			backOff(try)
		}
	}
}

func (d *Driver) giveWhole() {
	d.gate.Owner.Store(0)
	d.gate.Closed.Add(-1)
	d.captureMu.Unlock()
}

// backOff waits before the next try at the gate, which the C core holds for a call of a
// microsecond or so: yields for the first 64 tries, then naps from a microsecond, doubling
// to 100 us (a nap is a timer's wake, tens of microseconds at least).
func backOff(try int) {
	if try < 64 {
		runtime.Gosched()
		return
	}
	time.Sleep(min(time.Microsecond<<min(try-64, 7), 100*time.Microsecond))
}

// CaptureGate is the address of the capture lock's face to code in another language in
// this process (driver.CaptureGate), for the Python package's C core, which orders its own
// driver calls with Go's through it. It lives as long as d; 0 for a nil d.
func (d *Driver) CaptureGate() uintptr {
	if d == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(&d.gate))
}

// wait waits until the work behind handle h (a stream's, or event e's) is done: query, each
// time under the capture lock (lockOp: h's stripe shared, or captureMu whole where a capture
// of ours is counted or e is linked to one; whole, query's argument), until it answers other
// than CUDA_ERROR_NOT_READY; back to back for waitSpin, as the driver's own wait spins by
// default (yielding the P between questions: what it waits for may be a goroutine, or a
// host function that needs a P to run Go, and GOMAXPROCS may be 1), then with naps of a
// two-hundredth of the time waited so far (10 us to 1 ms), so that it answers about 0.5%
// late at worst, as the C core's waits (python/native/wait.inc). Never
// the driver's own wait, which would hold no lock of ours while it waits: the real driver
// crashed (SIGSEGV, an H200, driver 580: bench/capture_races.c, cases 38, 40, 41, 44, 47
// and 48, the waiting thread's capture mode relaxed or not) where its synchronize of a
// stream met a capture's begin or end on that stream, or its synchronize of an event met a
// capture recording it, on other threads; and a wait holding the lock would hold up every
// capture for as long as it waits (a host function a capture's end waits for could never
// run). A question under the lock meets no begin, end or graph launch on the stream
// (lockChange, lockLaunch); between questions no lock is held.
func (d *Driver) wait(h uintptr, e *Event, query func(whole bool) driver.Result) driver.Result {
	start := time.Now()
	for {
		lock := d.lockOp(h, e != nil && e.linked())
		r := query(lock == nil)
		d.unlockOp(lock)
		if r != driver.ErrorNotReady {
			return r
		}
		if waited := time.Since(start); waited > waitSpin {
			time.Sleep(min(max(waited/200, 10*time.Microsecond), time.Millisecond))
		} else {
			runtime.Gosched() // what the wait waits for may be a goroutine, or a host function wanting this P
		}
	}
}

// waitSpin is how long wait asks back to back before it naps.
const waitSpin = 50 * time.Millisecond

// What a query made holding the capture lock answers where it did not reach the driver:
// the stream captures (Stream.queryHeld), or the event was recorded since its capture was
// asked (Event.queryHeld). Not driver results (those are not negative).
const (
	resultRecordedAgain driver.Result = -1 - iota
	resultCapturing
)

// unlockOp gives back what lockOp took.
func (d *Driver) unlockOp(stripe *sync.RWMutex) {
	if stripe != nil {
		stripe.RUnlock()
		return
	}
	d.giveWhole()
}

// lockChange takes the capture lock whole, for a call that begins or ends a capture: no
// other call of ours is in flight until unlockChange.
func (d *Driver) lockChange() {
	d.takeWhole()
	for i := range d.stripes {
		d.stripes[i].Lock()
	}
}

// unlockChange gives back what lockChange took.
func (d *Driver) unlockChange() {
	for i := range d.stripes {
		d.stripes[i].Unlock()
	}
	d.giveWhole()
}
