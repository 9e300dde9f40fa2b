package driver

import "sync/atomic"

// GateStripes is how many stripes CaptureGate counts the other code's calls in: the C core
// gives each thread one (round-robin), so that threads calling at once on streams of their
// own share no counter up to this many threads.
const GateStripes = 32

// CaptureGate is the capture lock's face to code in another language in the process (the
// Python package's C core, python/native/capturelock.inc): memory that code and Go read and
// write with sequentially consistent atomic instructions. Its layout is declared here once
// and written out for C by `go generate ./internal/boundary` (tables.h).
//
// A call of the other code adds one to its stripe of Busy, then reads Closed: where it is 0
// the call goes on (Go holds none of the lock whole and counts no capture, and cannot take
// the lock whole until the call gives its count back); otherwise it gives its count back
// and takes Owner (0 to 1), waiting while another holds it. Go, taking the lock whole,
// adds one to Closed, takes Owner, and waits until every stripe of Busy is 0; a counted
// capture adds one to Closed for as long as it is counted.
//
// Neither core hands the driver a synchronize (cuStreamSynchronize, cuEventSynchronize):
// each waits by queries under this lock (streams' Driver.wait, the C core's wait_for), which
// a capture's begin and end and a graph's launch take whole, for the driver crashed where
// its synchronize met either (bench/capture_races.c, cases 22, 24 and 38 to 48).
type CaptureGate struct {
	Closed atomic.Int64
	Owner  atomic.Int64
	_      [48]byte
	Busy   [GateStripes]GateStripe
}

// GateStripe is one stripe of CaptureGate.Busy, on a cache line of its own.
type GateStripe struct {
	N atomic.Int64
	_ [56]byte
}
