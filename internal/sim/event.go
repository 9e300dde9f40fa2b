package sim

// Events: records, queries, waits on them, timing, IPC handles.

import (
	"encoding/binary"
	"os"
	"time"

	"github.com/streambridge/streambridge/internal/driver"
)

func (d *Driver) EventCreate(ch driver.Context, flags uint32) (driver.Event, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.ctxIn(ch)
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	all := driver.EventBlockingSync | driver.EventDisableTiming | driver.EventInterprocess
	if flags&^all != 0 ||
		(flags&driver.EventInterprocess != 0 && flags&driver.EventDisableTiming == 0) {
		return 0, driver.ErrorInvalidValue
	}
	e := &event{ctx: c, state: &eventState{flags: flags}}
	e.handle = driver.Event(d.placeEvent(e))
	return e.handle, driver.Success
}

// EventCheck looks the handle up: the software driver knows every event it made. As the
// real driver's check (internal/cuda, eventProver.check), where the event has no neighbour
// in its context's list it makes one there (a sentinel, never destroyed), with an
// embedder's lock let go (driver.AroundWait), and answers for what the handle names then.
func (d *Driver) EventCheck(h driver.Event) (driver.Context, uint64, driver.Result) {
	if !driver.PointerLike(uint64(h)) { // as the real check: before it learns
		return 0, 0, driver.ErrorInvalidHandle
	}
	eventLearning.Do(func() {}) // as StreamCheck's
	if d.unlearnable {
		return 0, 0, driver.ErrorNotSupported
	}
	ctx, id, alone, r := d.eventNow(h)
	if r != driver.Success || !alone {
		return ctx, id, r
	}
	driver.AroundWait(func() { _, r = d.EventCreate(ctx, driver.EventDisableTiming) })
	if r != driver.Success {
		return 0, 0, driver.ErrorInvalidHandle
	}
	now, id, alone, r := d.eventNow(h) // read again, as the real check reads the links again
	if r != driver.Success || now != ctx || alone {
		return 0, 0, driver.ErrorInvalidHandle
	}
	return ctx, id, driver.Success
}

// eventNow is the event h names now: its context and identity, and whether it is alone in
// its context's list (in the slab with no neighbour: the real driver keeps every event in
// one, so a check meets that only for a context's only event).
func (d *Driver) eventNow(h driver.Event) (driver.Context, uint64, bool, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := lookup[*event](d, uintptr(h))
	if !ok {
		return 0, 0, false, driver.ErrorInvalidHandle
	}
	alone := false
	if m := d.events.at(uintptr(h) - d.layout.eventHandleAt()); m != nil {
		alone = m.obj[d.layout.eventPrevAt] == 0 && m.obj[d.layout.eventNextAt] == 0
	}
	return e.ctx.handle, e.id, alone, driver.Success
}

func (d *Driver) EventDestroy(h driver.Event) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	live[*event](d, uintptr(h))
	d.forget(uintptr(h))
	return driver.Success
}

func (d *Driver) EventRecord(ch driver.Context, eh driver.Event, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := live[*event](d, uintptr(eh))
	s, r := d.captureWork(ch, sh)
	if r != driver.Success {
		return r
	}
	if (e.ctx.own || s.ctx.own) && e.ctx.objects() != s.ctx.objects() {
		return driver.ErrorInvalidHandle // contexts.go: a context of its own shares no events
	}
	if s.capture != nil {
		if e.state.waits > 0 {
			// the real driver crashed (SIGSEGV, an H200, driver 580) where captures recorded
			// an event another thread synchronized, relaxed or not (bench/capture_races.c,
			// cases 40, 47 and 48); one recorded outside any capture was safe (case 46)
			crash("recorded an event into a capture while another thread synchronizes it (cuEventSynchronize)")
		}
		e.state.captured = &capturedRecord{capture: s.capture, frontier: append([]*node(nil), s.frontier...)}
		return driver.Success
	}
	timed := e.state.flags&driver.EventDisableTiming == 0
	for timed && s.timed >= TimedRecordsPerStream {
		d.room.Wait() // lets mu go meanwhile: other streams' calls go on
	}
	if timed {
		s.timed++
	}
	rec := &record{}
	rec.done = d.enqueue(s, func() {
		rec.at = time.Now()
		if timed {
			d.mu.Lock()
			s.timed--
			d.room.Broadcast()
			d.mu.Unlock()
		}
	})
	e.state.rec, e.state.captured = rec, nil
	return driver.Success
}

// TimedRecordsPerStream is how many records of events with timing a stream holds before
// its work reaches them: one more blocks until one of them has run, as the real driver's
// cuEventRecord does (1,021 on an H200, driver 580: bench/queue_depth.c; records of events
// made with CU_EVENT_DISABLE_TIMING, waits and host functions did not block at 240,000).
// The handles were read before the wait, as the driver read them: the record then goes to
// that stream, whatever was destroyed meanwhile. A thread that holds what a host function
// at the head of the stream needs (Python's GIL) through such a record never returns
// (python/native/holds.inc, MAY_WAIT).
const TimedRecordsPerStream = 1021

func (d *Driver) EventRecordAndWait(ch driver.Context, e driver.Event, from, to driver.Stream) (driver.Result, bool) {
	if r := d.EventRecord(ch, e, from); r != driver.Success {
		return r, false
	}
	return d.StreamWaitEvent(ch, to, e, 0), true
}

// unsafeEvent is event for a query or a synchronize, which, of an event recorded in a
// capture going on, the real driver refuses in every mode and invalidates the capture
// (seen on an H200, driver 580).
func (d *Driver) unsafeEvent(h driver.Event) (*eventState, driver.Result) {
	e, r := d.event(h)
	if r == driver.ErrorCapturedEvent {
		live[*event](d, uintptr(h)).state.captured.capture.invalid = true
	}
	return e, r
}

func (d *Driver) event(h driver.Event) (*eventState, driver.Result) {
	e := live[*event](d, uintptr(h))
	if c := e.state.captured; c != nil {
		if c.capture.ended || c.capture.invalid { // what the real driver answers once the capture is over or failed (H200; H100: bench/capture_lifetimes.c, cases 21, 22)
			return nil, driver.ErrorInvalidValue
		}
		return nil, driver.ErrorCapturedEvent
	}
	return e.state, driver.Success
}

// EventQuery is cuEventQuery in relaxed capture mode, as driver.API has it; the C entry
// point is the driver's own, in the thread's mode.
func (d *Driver) EventQuery(h driver.Event) driver.Result { return d.eventQuery(h, true) }

func (d *Driver) eventQuery(h driver.Event, relaxed bool) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, r := d.unsafeEvent(h)
	if r != driver.Success {
		return r
	}
	if r := d.unsafeCall(relaxed); r != driver.Success {
		return r
	}
	if e.rec == nil || closed(e.rec.done) {
		return driver.Success
	}
	return driver.ErrorNotReady
}

// EventSynchronize is cuEventSynchronize in relaxed capture mode, as driver.API has it;
// the C entry point is the driver's own, in the thread's mode.
func (d *Driver) EventSynchronize(h driver.Event) driver.Result { return d.eventSynchronize(h, true) }

func (d *Driver) eventSynchronize(h driver.Event, relaxed bool) driver.Result {
	d.mu.Lock()
	e, r := d.unsafeEvent(h)
	if r != driver.Success {
		d.mu.Unlock()
		return r
	}
	if r := d.unsafeCall(relaxed); r != driver.Success {
		d.mu.Unlock()
		return r
	}
	rec := e.rec
	e.waits++
	d.mu.Unlock()
	if rec != nil {
		<-rec.done
	}
	d.mu.Lock()
	e.waits--
	d.mu.Unlock()
	return driver.Success
}

func (d *Driver) EventElapsedTime(start, end driver.Event) (float32, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.event(start)
	if r != driver.Success {
		return 0, r
	}
	e, r := d.event(end)
	if r != driver.Success {
		return 0, r
	}
	if (s.flags|e.flags)&driver.EventDisableTiming != 0 || s.rec == nil || e.rec == nil {
		return 0, driver.ErrorInvalidHandle
	}
	if !closed(s.rec.done) || !closed(e.rec.done) {
		return 0, driver.ErrorNotReady
	}
	return float32(e.rec.at.Sub(s.rec.at).Seconds() * 1e3), driver.Success
}

// The software driver's IPC handle names the event and the process that made it; it can be
// opened in that process only, where the real driver refuses it (CUDA_ERROR_INVALID_CONTEXT,
// H200, driver 580): a program's waits on an opened event can be tested here, in one process.
// Any other 64 bytes (another process's handle, which the software driver cannot reach, or
// garbage) are refused as the real driver refuses 64 zero bytes: CUDA_ERROR_MAP_FAILED.
const ipcMagic = "streambridge-sim-ipc"

func (d *Driver) IpcGetEventHandle(h driver.Event) (driver.IPCEventHandle, driver.Result) {
	var out driver.IPCEventHandle
	d.mu.Lock()
	defer d.mu.Unlock()
	e := live[*event](d, uintptr(h))
	if e.state.flags&driver.EventInterprocess == 0 {
		return out, driver.ErrorInvalidHandle // as the real driver answers (seen on an H100, driver 580)
	}
	n := copy(out[:], ipcMagic)
	binary.LittleEndian.PutUint64(out[n:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(out[n+8:], uint64(h))
	return out, driver.Success
}

func (d *Driver) IpcOpenEventHandle(in driver.IPCEventHandle) (driver.Event, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.currentCtx()
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	n := len(ipcMagic)
	if string(in[:n]) != ipcMagic || binary.LittleEndian.Uint64(in[n:]) != uint64(os.Getpid()) {
		return 0, driver.ErrorMapFailed
	}
	src, ok := lookup[*event](d, uintptr(binary.LittleEndian.Uint64(in[n+8:])))
	if !ok {
		return 0, driver.ErrorMapFailed
	}
	e := &event{ctx: c, state: src.state, opened: true}
	e.handle = driver.Event(d.placeEvent(e))
	return e.handle, driver.Success
}
