package sim

// Stream capture into graphs, and graph launches.

import "github.com/streambridge/streambridge/internal/driver"

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
	d.nextID++
	s.capture = &capture{id: d.nextID, mode: mode, origin: s, streams: map[*stream]struct{}{s: {}}}
	s.frontier = nil
	return driver.Success
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
	if c.origin != s {
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
		t.capture, t.frontier = nil, nil
	}
	c.ended = true
	switch {
	case c.invalid:
		return 0, driver.ErrorCaptureInvalidated
	case unjoined:
		return 0, driver.ErrorCaptureUnjoined
	}
	g := &graph{nodes: c.nodes}
	g.handle = driver.Graph(d.newHandle(g))
	return g.handle, driver.Success
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
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.streamIn(ch, h)
	if r != driver.Success {
		return 0, 0, r
	}
	switch {
	case s.capture == nil:
		return driver.CaptureStatusNone, 0, driver.Success
	case s.capture.invalid:
		return driver.CaptureStatusInvalidated, s.capture.id, driver.Success
	}
	return driver.CaptureStatusActive, s.capture.id, driver.Success
}

func (d *Driver) GraphGetNodes(h driver.Graph) (int, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := lookup[*graph](d, uintptr(h))
	if !ok {
		return 0, driver.ErrorInvalidHandle
	}
	return len(g.nodes), driver.Success
}

func (d *Driver) GraphInstantiateWithFlags(h driver.Graph, flags uint64) (driver.GraphExec, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := lookup[*graph](d, uintptr(h))
	if !ok {
		return 0, driver.ErrorInvalidHandle
	}
	e := &graphExec{nodes: append([]*node(nil), g.nodes...)}
	e.handle = driver.GraphExec(d.newHandle(e))
	return e.handle, driver.Success
}

// GraphLaunch runs the nodes in the order they were captured, which respects every
// dependency: a node is captured after the nodes it depends on.
func (d *Driver) GraphLaunch(h driver.GraphExec, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := lookup[*graphExec](d, uintptr(h))
	if !ok {
		return driver.ErrorInvalidHandle
	}
	s, r := d.stream(sh)
	if r != driver.Success {
		return r
	}
	nodes := e.nodes
	run := func() {
		for _, n := range nodes {
			n.run()
		}
	}
	d.submit(s, run)
	return driver.Success
}

func (d *Driver) GraphUpload(h driver.GraphExec, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := lookup[*graphExec](d, uintptr(h)); !ok {
		return driver.ErrorInvalidHandle
	}
	_, r := d.stream(sh)
	return r
}

func (d *Driver) GraphExecDestroy(h driver.GraphExec) driver.Result {
	return d.destroy(uintptr(h), func(o any) bool { _, ok := o.(*graphExec); return ok })
}

func (d *Driver) GraphDestroy(h driver.Graph) driver.Result {
	return d.destroy(uintptr(h), func(o any) bool { _, ok := o.(*graph); return ok })
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
