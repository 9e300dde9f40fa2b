package sim

// Streams: in-order queues of goroutines, waits between them, host functions.

import (
	"slices"

	"github.com/streambridge/streambridge/internal/driver"
)

func (d *Driver) StreamCreateWithPriority(ch driver.Context, flags uint32, priority int) (driver.Stream, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.ctxIn(ch)
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	if flags&^driver.StreamNonBlocking != 0 {
		return 0, driver.ErrorInvalidValue
	}
	priority = min(max(priority, greatestPriority), leastPriority) // the driver clamps
	s := &stream{ctx: c, flags: flags, priority: priority, id: d.streamID()}
	s.handle = driver.Stream(d.place(s))
	if flags&driver.StreamNonBlocking == 0 {
		c.blocking[s] = struct{}{}
	}
	return s.handle, driver.Success
}

// ctxIn is the context a call names, or else the thread's current one. Caller holds d.mu.
func (d *Driver) ctxIn(h driver.Context) *context {
	if h == 0 {
		return d.currentCtx()
	}
	c, _ := lookup[*context](d, uintptr(h))
	return c
}

// stream resolves a handle, the special ones through the current context. Caller holds
// d.mu.
func (d *Driver) stream(h driver.Stream) (*stream, driver.Result) { return d.streamIn(0, h) }

// streamIn resolves a handle, the special ones through context ch (0: the current one).
// Caller holds d.mu.
func (d *Driver) streamIn(ch driver.Context, h driver.Stream) (*stream, driver.Result) {
	if h.IsSpecial() {
		c := d.ctxIn(ch)
		if c == nil {
			return nil, driver.ErrorInvalidContext
		}
		if h == driver.StreamPerThread {
			return d.perThread(c), driver.Success
		}
		return c.legacy, driver.Success
	}
	return live[*stream](d, uintptr(h)), driver.Success
}

// workStream resolves a stream that a call uses (a query, a synchronize, a record, a wait, a
// host function, a graph launch, a copy): streamIn, and refused as the real driver refuses
// the legacy stream while a blocking stream captures (implicit). Caller holds d.mu.
func (d *Driver) workStream(ch driver.Context, h driver.Stream) (*stream, driver.Result) {
	s, r := d.streamIn(ch, h)
	if r == driver.Success {
		r = implicit(s)
	}
	return s, r
}

// captureWork is workStream for work a capture takes in (a record, a wait, a host
// function): on a stream whose capture is invalidated the real driver refuses it with
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED before anything else (H100, driver 580:
// bench/capture_lifetimes.c, case 21). Caller holds d.mu.
func (d *Driver) captureWork(ch driver.Context, h driver.Stream) (*stream, driver.Result) {
	s, r := d.workStream(ch, h)
	if r == driver.Success && s.capture != nil && s.capture.invalid {
		return nil, driver.ErrorCaptureInvalidated
	}
	return s, r
}

// The first stream check and the first event check of a process: the real driver's learn
// its layout there, letting an embedder's lock go meanwhile (driver.Learning), and so do
// these, which have nothing to learn: another thread may run between a check's call and
// its answer on either driver.
var streamLearning, eventLearning driver.Learning

// StreamCheck looks the handle up: the software driver knows every stream it made. Like
// the real driver's check it reads, and so works during capture.
func (d *Driver) StreamCheck(h driver.Stream) (driver.Context, uint64, driver.Result) {
	if h.IsSpecial() {
		return 0, 0, driver.Success
	}
	if !driver.PointerLike(uint64(h)) { // as the real check: before it learns
		return 0, 0, driver.ErrorInvalidHandle
	}
	streamLearning.Do(func() {})
	if d.unlearnable {
		return 0, 0, driver.ErrorNotSupported
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := lookup[*stream](d, uintptr(h))
	if !ok {
		return 0, 0, driver.ErrorInvalidHandle
	}
	c, r := s.ctx.checkedContext()
	return c, s.id, r
}

func (d *Driver) StreamDestroy(h driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.IsSpecial() {
		return driver.ErrorInvalidHandle
	}
	s, r := d.stream(h)
	if r != driver.Success {
		return r
	}
	if c := s.capture; c != nil && c.origin == s {
		// it can no longer be ended: over, for every stream joined to it. A joined stream's
		// destroy leaves the capture going on, its work still to be joined back (else the
		// end fails with CUDA_ERROR_STREAM_CAPTURE_UNJOINED). H100, driver 580:
		// bench/capture_lifetimes.c, cases 1 to 3.
		d.discard(c)
	}
	d.forget(uintptr(h))
	delete(s.ctx.blocking, s)
	if !closed(s.tail) {
		s.ctx.orphans = append(s.ctx.orphans, s.tail) // its work still runs
	}
	return driver.Success
}

// pending is what a call that synchronizes context c waits for: the completion of each of
// its streams' last operation enqueued so far, destroyed streams' included, where not yet
// run. Caller holds d.mu.
func (d *Driver) pending(c *context) []chan struct{} {
	c.orphans = slices.DeleteFunc(c.orphans, closed)
	work := slices.Clone(c.orphans)
	add := func(s *stream) {
		if !closed(s.tail) {
			work = append(work, s.tail)
		}
	}
	add(c.legacy)
	for _, s := range c.ptds {
		add(s)
	}
	for _, o := range d.objects {
		if s, ok := o.(*stream); ok && s.ctx == c {
			add(s)
		}
	}
	return work
}

// enqueue appends run to s and returns the channel closed when it has run. Caller holds
// d.mu.
func (d *Driver) enqueue(s *stream, run func(), deps ...chan struct{}) chan struct{} {
	if s.legacy {
		for b := range s.ctx.blocking {
			deps = append(deps, b.tail)
		}
	} else if s.flags&driver.StreamNonBlocking == 0 {
		deps = append(deps, s.ctx.legacy.tail)
	}
	prev := s.tail
	done := make(chan struct{})
	s.tail = done
	go func() {
		if prev != nil {
			<-prev
		}
		for _, dep := range deps {
			if dep != nil {
				<-dep
			}
		}
		if run != nil {
			run()
		}
		close(done)
	}()
	return done
}

// submit is what an operation does with its work: add it to s's capture while s is
// capturing, else enqueue it. It returns the channel closed when the work has run, or nil
// when it was captured. Caller holds d.mu.
func (d *Driver) submit(s *stream, run func()) chan struct{} {
	if s.capture != nil {
		captureNode(s, run)
		return nil
	}
	return d.enqueue(s, run)
}

// captureNode adds run to s's capture, after s's frontier. Caller holds d.mu.
func captureNode(s *stream, run func()) {
	n := &node{run: run, deps: s.frontier}
	s.capture.graph.nodes = append(s.capture.graph.nodes, n)
	s.frontier = []*node{n}
}

// implicit is what a use of the legacy stream meets while a blocking stream of its context
// captures: the legacy stream synchronizes with every blocking stream, so the real driver
// refuses the use (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), in every capture mode, and
// invalidates those captures (H100, driver 580: bench/capture_modes.c). Caller holds d.mu.
func implicit(s *stream) driver.Result {
	blocked := blockedBy(s)
	for _, c := range blocked {
		c.invalid = true
	}
	if len(blocked) > 0 {
		return driver.ErrorCaptureImplicit
	}
	return driver.Success
}

// blockedBy is, where s is the legacy stream, the captures its context's blocking streams
// are in (cuStreamGetCaptureInfo refuses s while there are any, leaving them alone); else
// none. Caller holds d.mu.
func blockedBy(s *stream) []*capture {
	var captures []*capture
	if s.legacy {
		for b := range s.ctx.blocking {
			if b.capture != nil {
				captures = append(captures, b.capture)
			}
		}
	}
	return captures
}

// uncapturable is what an operation that may not run during capture does to it: the
// capture is invalidated and the call fails.
func uncapturable(s *stream) driver.Result {
	s.capture.invalid = true
	return driver.ErrorCaptureUnsupported
}

func closed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// StreamQuery is cuStreamQuery in relaxed capture mode, as driver.API has it; the C entry
// point is the driver's own, in the thread's mode.
func (d *Driver) StreamQuery(ch driver.Context, h driver.Stream) driver.Result {
	return d.streamQuery(ch, h, true)
}

func (d *Driver) streamQuery(ch driver.Context, h driver.Stream, relaxed bool) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.workStream(ch, h)
	if r != driver.Success {
		return r
	}
	if s.capture != nil {
		return uncapturable(s)
	}
	if r := d.unsafeCall(relaxed); r != driver.Success {
		return r
	}
	if closed(s.tail) {
		return driver.Success
	}
	return driver.ErrorNotReady
}

// StreamSynchronize is cuStreamSynchronize in relaxed capture mode, as driver.API has it;
// the C entry point is the driver's own, in the thread's mode.
func (d *Driver) StreamSynchronize(ch driver.Context, h driver.Stream) driver.Result {
	return d.streamSynchronize(ch, h, true)
}

func (d *Driver) streamSynchronize(ch driver.Context, h driver.Stream, relaxed bool) driver.Result {
	d.mu.Lock()
	s, r := d.workStream(ch, h)
	if r != driver.Success {
		d.mu.Unlock()
		return r
	}
	if s.capture != nil {
		r := uncapturable(s)
		d.mu.Unlock()
		return r
	}
	if r := d.unsafeCall(relaxed); r != driver.Success {
		d.mu.Unlock()
		return r
	}
	tail := s.tail
	s.waits++
	d.mu.Unlock()
	if tail != nil {
		<-tail
	}
	d.mu.Lock()
	s.waits--
	d.mu.Unlock()
	return driver.Success
}

func (d *Driver) StreamWaitEvent(ch driver.Context, h driver.Stream, eh driver.Event, flags uint32) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.captureWork(ch, h)
	if r != driver.Success {
		return r
	}
	e := live[*event](d, uintptr(eh))
	if flags != 0 {
		return driver.ErrorInvalidValue
	}
	if cr := e.state.captured; cr != nil {
		if cr.capture.ended || cr.capture.invalid { // a capture that ended, or failed, is no point to wait on
			if s.capture != nil {
				s.capture.invalid = true // and a capture that waits on one is invalidated (H100, driver 580: bench/capture_lifetimes.c, cases 8, 21)
			}
			return driver.ErrorInvalidValue
		}
		return d.joinCapture(s, cr)
	}
	if s.capture != nil {
		if e.state.rec == nil {
			return driver.Success // an event never recorded is no dependency (H100, driver 580: case 21)
		}
		// A captured stream may not depend on work outside its capture.
		s.capture.invalid = true
		return driver.ErrorCaptureIsolation
	}
	if e.state.rec != nil {
		d.enqueue(s, nil, e.state.rec.done)
	}
	return driver.Success
}

// joinCapture makes s wait on a point of a capture: s joins that capture (a fork) or, if
// already in it, gains the dependency (a join).
func (d *Driver) joinCapture(s *stream, cr *capturedRecord) driver.Result {
	switch {
	case s.capture == nil:
		if s.legacy {
			return driver.ErrorCaptureImplicit
		}
		s.capture = cr.capture
		s.frontier = append([]*node(nil), cr.frontier...)
		cr.capture.streams[s] = struct{}{}
	case s.capture == cr.capture:
		s.frontier = append(s.frontier, cr.frontier...)
	default: // both captures are invalidated (H100, driver 580: bench/capture_lifetimes.c, case 9)
		s.capture.invalid, cr.capture.invalid = true, true
		return driver.ErrorCaptureMerge
	}
	return driver.Success
}

func (d *Driver) StreamGetPriority(h driver.Stream) (int, driver.Result) {
	return streamGet(d, h, d.stream, func(s *stream) int { return s.priority })
}

// streamGet is one attribute of stream h, looked up under d.mu with look (d.stream, or
// d.streamAttrs for those the real driver refuses during capture).
func streamGet[T any](d *Driver, h driver.Stream, look func(driver.Stream) (*stream, driver.Result),
	get func(*stream) T) (T, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := look(h)
	if r != driver.Success {
		var zero T
		return zero, r
	}
	return get(s), driver.Success
}

// streamAttrs looks h up for a query of its attributes (cuStreamGetFlags, cuStreamGetCtx,
// cuStreamGetId), which the real driver (580) refuses on a capturing stream, in every
// capture mode and from any thread, invalidating the capture. Caller holds d.mu.
func (d *Driver) streamAttrs(h driver.Stream) (*stream, driver.Result) {
	s, r := d.stream(h)
	if r == driver.Success && s.capture != nil {
		return nil, uncapturable(s)
	}
	return s, r
}

func (d *Driver) StreamGetFlags(h driver.Stream) (uint32, driver.Result) {
	return streamGet(d, h, d.streamAttrs, func(s *stream) uint32 { return s.flags })
}

func (d *Driver) StreamGetCtx(h driver.Stream) (driver.Context, driver.Result) {
	return streamGet(d, h, d.streamAttrs, func(s *stream) driver.Context { return s.ctx.handle })
}

func (d *Driver) StreamGetId(h driver.Stream) (uint64, driver.Result) {
	return streamGet(d, h, d.streamAttrs, func(s *stream) uint64 { return s.id })
}

func (d *Driver) LaunchHostFunc(ch driver.Context, h driver.Stream, key uintptr) driver.Result {
	return d.launchHost(ch, h, func() { driver.RunHostFunc(key) })
}

// launchHost enqueues (or, capturing, captures) call as a host function: Go's, through the
// host-function table, or a C caller's fn(userData) (the cuLaunchHostFunc entry point).
// Host functions of a context run one at a time, as on the driver's one thread.
func (d *Driver) launchHost(ch driver.Context, h driver.Stream, call func()) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.captureWork(ch, h)
	if r != driver.Success {
		return r
	}
	c := s.ctx
	run := func() {
		c.hostFuncs.Lock()
		defer c.hostFuncs.Unlock()
		call()
	}
	d.submit(s, run)
	return driver.Success
}
