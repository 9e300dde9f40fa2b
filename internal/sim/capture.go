package sim

// Stream capture into graphs, and graph launches.

import (
	"fmt"
	"syscall"

	"github.com/streambridge/streambridge/internal/driver"
)

func (d *Driver) StreamBeginCapture(h driver.Stream, mode driver.CaptureMode) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return r
	}
	if mode > driver.CaptureModeRelaxed {
		return driver.ErrorInvalidValue
	}
	if s.legacy {
		return driver.ErrorCaptureUnsupported
	}
	if s.capture != nil {
		return driver.ErrorIllegalState
	}
	if s.waits > 0 {
		crashSynchronized("began")
	}
	d.nextID++
	g := &graph{owns: owned{}, capturing: true}
	g.handle = driver.Graph(d.newHandle(g))
	s.capture = &capture{id: d.nextID, mode: mode, thread: syscall.Gettid(), origin: s, graph: g, streams: map[*stream]struct{}{s: {}}}
	d.ongoing[s.capture] = struct{}{}
	s.frontier = nil
	return driver.Success
}

// crashSynchronized ends the process where a capture begins or ends on a stream another
// thread is synchronizing in the driver: the real driver crashed there (SIGSEGV, an H200,
// driver 580: bench/capture_races.c, cases 38 and 44 in every capture mode, the
// synchronizing thread's own mode relaxed or not, and case 39 where it was not). A
// synchronize of a stream whose capture, begun before, went on was refused and survived
// (case 42), as this driver's streamSynchronize refuses it.
func crashSynchronized(what string) {
	crash(what + " a capture on a stream another thread is synchronizing (cuStreamSynchronize)")
}

func (d *Driver) StreamEndCapture(h driver.Stream) (driver.Graph, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return 0, r
	}
	c := s.capture
	if c == nil {
		return 0, driver.ErrorIllegalState
	}
	if s.waits > 0 {
		crashSynchronized("ended")
	}
	if c.origin != s { // and the capture is invalidated (H100, driver 580: bench/capture_lifetimes.c, case 7)
		c.invalid = true
		return 0, driver.ErrorCaptureUnmatched
	}
	joined := ancestors(s.frontier)
	unjoined := false
	for t := range c.streams {
		for _, n := range t.frontier {
			if _, ok := joined[n]; !ok {
				unjoined = true
			}
		}
	}
	c.end()
	delete(d.ongoing, c)
	r = driver.Success
	switch {
	case c.mode != driver.CaptureModeRelaxed && c.thread != syscall.Gettid():
		r = driver.ErrorCaptureWrongThread // and the capture is over, as on the real driver (H100, 580)
	case c.invalid:
		r = driver.ErrorCaptureInvalidated
	case unjoined:
		r = driver.ErrorCaptureUnjoined
	}
	if r != driver.Success { // the graph captured so far is destroyed
		d.forget(uintptr(c.graph.handle))
		d.releaseAll(c.graph.owns)
		return 0, r
	}
	return c.graph.handle, driver.Success
}

// end ends c: no stream captures into it from now on, and its graph is no longer being
// captured. Caller holds d.mu.
func (c *capture) end() {
	for t := range c.streams {
		t.capture, t.frontier = nil, nil
	}
	c.ended = true
	c.graph.capturing = false
}

// discard ends c, whose origin stream is destroyed, and destroys the graph captured so far,
// as the real driver does: every stream joined to it is out of it. Caller holds d.mu.
func (d *Driver) discard(c *capture) {
	c.end()
	delete(d.ongoing, c)
	d.forget(uintptr(c.graph.handle))
	d.releaseAll(c.graph.owns)
}

func ancestors(frontier []*node) map[*node]struct{} {
	seen := map[*node]struct{}{}
	var visit func(n *node)
	visit = func(n *node) {
		if _, ok := seen[n]; ok {
			return
		}
		seen[n] = struct{}{}
		for _, p := range n.deps {
			visit(p)
		}
	}
	for _, n := range frontier {
		visit(n)
	}
	return seen
}

func (d *Driver) StreamIsCapturing(h driver.Stream) (driver.CaptureStatus, driver.Result) {
	st, _, r := d.StreamGetCaptureInfo(0, h)
	return st, r
}

func (d *Driver) StreamGetCaptureInfo(ch driver.Context, h driver.Stream) (driver.CaptureStatus, uint64, driver.Result) {
	st, id, _, r := d.captureInfo(ch, h)
	return st, id, r
}

func (d *Driver) StreamCaptureGraph(ch driver.Context, h driver.Stream) (driver.CaptureStatus, driver.Graph, driver.Result) {
	st, _, g, r := d.captureInfo(ch, h)
	return st, g, r
}

// captureInfo is cuStreamGetCaptureInfo's status, capture id and, while the capture is
// active, the graph being captured.
func (d *Driver) captureInfo(ch driver.Context, h driver.Stream) (driver.CaptureStatus, uint64, driver.Graph, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.streamIn(ch, h)
	if r != driver.Success {
		return 0, 0, 0, r
	}
	switch {
	case len(blockedBy(s)) > 0:
		return 0, 0, 0, driver.ErrorCaptureImplicit // and the captures go on
	case s.capture == nil:
		return driver.CaptureStatusNone, 0, 0, driver.Success
	case s.capture.invalid:
		return driver.CaptureStatusInvalidated, s.capture.id, 0, driver.Success
	}
	return driver.CaptureStatusActive, s.capture.id, s.capture.graph.handle, driver.Success
}

func (d *Driver) GraphGetNodes(h driver.Graph) (int, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := live[*graph](d, uintptr(h))
	return len(g.nodes), driver.Success
}

// GraphInstantiateWithFlags is relaxed, as driver.API has it: no capture refuses it (the
// real driver's, in a thread's global or thread-local mode, does while that thread
// captures: bench/capture_lifetimes.c, cases 24-26).
func (d *Driver) GraphInstantiateWithFlags(h driver.Graph, flags uint64) (driver.GraphExec, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := live[*graph](d, uintptr(h))
	for _, n := range g.nodes {
		// The real driver reads a copy node's memory here: freed, it crashed (SIGSEGV, H200,
		// driver 580: TestDifferentialSequences, seed 728, before Buffer was kept by graphs).
		if n.mem != nil && d.objects[n.mem.base] != n.mem {
			crash(fmt.Sprintf("was given a graph whose copy names memory freed since its capture (%#x)", n.mem.base))
		}
	}
	e := &graphExec{nodes: append([]*node(nil), g.nodes...), owns: owned{}}
	for o, n := range g.owns {
		o.refs += n
		e.owns[o] = n
	}
	e.handle = driver.GraphExec(d.newHandle(e))
	return e.handle, driver.Success
}

// GraphLaunch runs the nodes in the order they were captured, which respects every
// dependency: a node is captured after the nodes it depends on.
func (d *Driver) GraphLaunch(h driver.GraphExec, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := live[*graphExec](d, uintptr(h))
	s, r := d.workStream(0, sh)
	if r != driver.Success {
		return r
	}
	if s.capture != nil {
		// the real driver refuses a graph launched into a capture, in every mode, and the
		// capture is invalidated (H100, driver 580)
		return uncapturable(s)
	}
	if s.waits > 0 && len(e.owns) > 0 {
		// the real driver crashed (SIGSEGV), or failed the launch CUDA_ERROR_UNKNOWN, where
		// another thread synchronized the stream and the graph kept a user object (an H200,
		// driver 580: bench/capture_races.c, cases 22 and 24); the same graph
		// without the user object was launched safely. A query at once did the same (cases
		// 26 and 27), which this driver, whose calls take no time, cannot meet.
		crash("launched a graph that keeps a user object on a stream another thread is synchronizing (cuStreamSynchronize)")
	}
	nodes := e.nodes
	e.inFlight++
	run := func() {
		for _, n := range nodes {
			n.run()
		}
		d.mu.Lock()
		if e.inFlight--; e.inFlight == 0 && e.closed {
			d.releaseAll(e.owns)
		}
		d.mu.Unlock()
	}
	d.submit(s, run)
	return driver.Success
}

func (d *Driver) GraphUpload(h driver.GraphExec, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	live[*graphExec](d, uintptr(h))
	_, r := d.stream(sh)
	return r
}

// GraphExecDestroy destroys e; launches in flight still run, and its references to user
// objects go once they have. Relaxed, as GraphInstantiateWithFlags.
func (d *Driver) GraphExecDestroy(h driver.GraphExec) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := live[*graphExec](d, uintptr(h))
	d.forget(uintptr(h))
	e.closed = true
	if e.inFlight == 0 {
		d.releaseAll(e.owns)
	}
	return driver.Success
}

func (d *Driver) GraphDestroy(h driver.Graph) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := live[*graph](d, uintptr(h))
	if g.capturing {
		return driver.ErrorInvalidHandle
	}
	d.forget(uintptr(h))
	d.releaseAll(g.owns)
	return driver.Success
}

func (d *Driver) destroy(h uintptr, is func(any) bool) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o, ok := d.objects[h]; !ok || !is(o) {
		return driver.ErrorInvalidHandle
	}
	d.forget(h)
	return driver.Success
}

// ThreadExchangeStreamCaptureMode is cuThreadExchangeStreamCaptureMode: the calling OS
// thread's capture interaction mode (global until set), which unsafeCall reads.
func (d *Driver) ThreadExchangeStreamCaptureMode(mode driver.CaptureMode) (driver.CaptureMode, driver.Result) {
	if mode > driver.CaptureModeRelaxed {
		return 0, driver.ErrorInvalidValue
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	tid := syscall.Gettid()
	before := d.modes[tid]
	if mode == driver.CaptureModeGlobal {
		delete(d.modes, tid)
	} else {
		d.modes[tid] = mode
	}
	return before, driver.Success
}

// unsafeCall is what a potentially unsafe call (a query, a synchronize: of any stream or
// event) meets where captures go on, as the real driver has it (seen on the H100, driver
// 580): a thread in global mode (the default) may not make one while any thread captures
// in global mode, nor while it captures itself in global or thread-local mode; a thread in
// thread-local mode only the latter; a relaxed thread always may. A refused call fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures that forbade it.
// relaxed: the call runs in relaxed mode whatever the thread's (driver.API's queries and
// synchronizes). Caller holds d.mu.
func (d *Driver) unsafeCall(relaxed bool) driver.Result {
	if len(d.ongoing) == 0 || relaxed {
		return driver.Success
	}
	tid := syscall.Gettid()
	mode := d.modes[tid]
	if mode == driver.CaptureModeRelaxed {
		return driver.Success
	}
	r := driver.Success
	for c := range d.ongoing {
		mine := c.thread == tid && c.mode != driver.CaptureModeRelaxed
		global := mode == driver.CaptureModeGlobal && c.mode == driver.CaptureModeGlobal
		if mine || global {
			c.invalid = true
			r = driver.ErrorCaptureUnsupported
		}
	}
	return r
}
