package driver

import "sync/atomic"

// GateStripes is how many stripes CaptureGate counts the other code's calls in: the C core
// gives each thread one (round-robin), so that threads calling at once on streams of their
// own share no counter up to this many threads.
const GateStripes = 32

// GateStreams is how many stripes CaptureGate keeps streams' synchronizes and graph
// launches apart in, chosen by the stream's handle (GateStream); GateStreamShift is the
// handle's low bits left out (a stream is a driver object of more than 64 bytes).
const (
	GateStreams     = 64
	GateStreamShift = 6
)

// GateStream is the stripe of Waits and Launches of the stream with handle h.
func GateStream(h uintptr) int { return int((h >> GateStreamShift) % GateStreams) }

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
// Waits and Launches keep a stream's synchronize and a graph's launch on it apart, which
// the real driver does not survive at once (an H200, driver 580: SIGSEGV, or the launch
// failing CUDA_ERROR_UNKNOWN, where the graph keeps a user object; bench/capture_races.c,
// cases 22 and 24). By stripe of the stream's handle (GateStream), Waits counts the synchronizes
// in the driver, Launches the launches and uploads: each side adds one to its own count,
// then reads the other's, and where it is not 0 gives its count back and waits for it to
// be (KeepApart). Neither side holds any other lock while it waits.
type CaptureGate struct {
	Closed   atomic.Int64
	Owner    atomic.Int64
	_        [48]byte
	Busy     [GateStripes]GateStripe
	Waits    [GateStreams]atomic.Int32
	Launches [GateStreams]atomic.Int32
}

// KeepApart takes mine, one side of a stripe of Waits and Launches, once the other side is
// 0: adds one to mine, then reads other; where it is not 0, gives mine back and waits with
// wait (called with the tries so far) until it is, then tries again. The caller gives
// mine back (Add(-1)) when its call returns.
func KeepApart(mine, other *atomic.Int32, wait func(try int)) {
	for {
		mine.Add(1)
		if other.Load() == 0 {
			return
		}
		mine.Add(-1)
		for try := 0; other.Load() != 0; try++ {
			wait(try)
		}
	}
}

// GateStripe is one stripe of CaptureGate.Busy, on a cache line of its own.
type GateStripe struct {
	N atomic.Int64
	_ [56]byte
}
