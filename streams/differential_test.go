package streams

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The differential test: random single-thread sequences of the public calls on streams,
// events, graphs and executable graphs (captures in every mode, waits that join captures,
// events recorded in captures, graph launches, host functions, closes of any object at any
// point), each run on the software driver and, where there is one, on the real driver, and
// every call's outcome (success, or which error) compared. A disagreement is a bug in one of
// them: each found becomes a named test (TestCaptureLifetimesAsTheGPUHasThem holds the
// first six). STREAMBRIDGE_DIFF_SEQUENCES sets how many sequences (200 by default, which CI
// runs on the software driver alone; 10000 on the GPU machine), STREAMBRIDGE_DIFF_SEED the
// first seed.

// diffWorld is one sequence's objects: slots that a close empties and a remake fills.
type diffWorld struct {
	c       *Context
	streams [3]*Stream
	events  [3]*Event
	graphs  [2]*Graph
	execs   [2]*GraphExec
	bufs    [2]*Buffer
	host    [2][]byte // each buffer's host side, alive till the world closes (a graph may copy it)
}

// outcome names what a call returned: "ok", a sentinel's text or a CUDA result's name.
func outcome(err error) string {
	var r Result
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrCapturing):
		return "capturing (refused first)"
	case errors.Is(err, ErrNil):
		return "nil"
	case errors.As(err, &r):
		return r.Name()
	}
	return "untyped: " + err.Error()
}

// diffStep is one call of a sequence: its name (with the slots it uses) and what it did.
type diffStep struct{ name, got string }

// runSequence runs the sequence of seed on d and returns every call's outcome.
func runSequence(t *testing.T, d *Driver, seed uint64, length int) []diffStep {
	runtime.LockOSThread() // a global or thread-local capture ends on the thread that began it
	defer runtime.UnlockOSThread()
	rng := rand.New(rand.NewPCG(seed, 49))
	w := &diffWorld{c: primary(t, d, 0), host: [2][]byte{make([]byte, 64), make([]byte, 64)}}
	defer w.close()
	var steps []diffStep
	do := func(name string, err error) { steps = append(steps, diffStep{name, outcome(err)}) }
	for i := range w.streams {
		s, err := w.c.NewStream(StreamOptions{NonBlocking: true})
		require.NoError(t, err)
		w.streams[i] = s
	}
	for i := range w.events {
		e, err := w.c.NewEvent(EventOptions{DisableTiming: true})
		require.NoError(t, err)
		w.events[i] = e
	}
	modes := []CaptureMode{CaptureRelaxed, CaptureThreadLocal, CaptureGlobal}
	for range length {
		si, ti, ei, gi := rng.IntN(3), rng.IntN(3), rng.IntN(3), rng.IntN(2)
		s, t2, e, b, host := w.streams[si], w.streams[ti], w.events[ei], w.bufs[gi], w.host[gi]
		switch op := rng.IntN(24); op {
		case 0:
			_, err := s.Query()
			do(fmt.Sprintf("s%d.Query", si), err)
		case 1:
			do(fmt.Sprintf("s%d.Synchronize", si), s.Synchronize())
		case 2, 3:
			do(fmt.Sprintf("s%d.Record(e%d)", si, ei), s.Record(e))
		case 4, 5:
			do(fmt.Sprintf("s%d.WaitEvent(e%d)", si, ei), s.WaitEvent(e))
		case 6:
			do(fmt.Sprintf("s%d.WaitStream(s%d)", si, ti), s.WaitStream(t2))
		case 7:
			do(fmt.Sprintf("s%d.LaunchHostFunc", si), s.LaunchHostFunc(func() {}))
		case 8, 9:
			m := modes[rng.IntN(3)]
			do(fmt.Sprintf("s%d.BeginCapture(%d)", si, m), s.BeginCapture(m))
		case 10, 11:
			g, err := s.EndCapture()
			do(fmt.Sprintf("s%d.EndCapture", si), err)
			if err == nil {
				_ = w.graphs[gi].Close()
				w.graphs[gi] = g
			}
		case 12:
			st, _, err := s.CaptureInfo()
			got := outcome(err)
			if err == nil {
				got = fmt.Sprintf("status %d", st)
			}
			steps = append(steps, diffStep{fmt.Sprintf("s%d.CaptureInfo", si), got})
		case 13:
			_, err := e.Query()
			do(fmt.Sprintf("e%d.Query", ei), err)
		case 14:
			do(fmt.Sprintf("e%d.Synchronize", ei), e.Synchronize())
		case 15:
			x, err := w.graphs[gi].Instantiate()
			do(fmt.Sprintf("g%d.Instantiate", gi), err)
			if err == nil {
				_ = w.execs[gi].Close()
				w.execs[gi] = x
			}
		case 16:
			do(fmt.Sprintf("x%d.Launch(s%d)", gi, si), w.execs[gi].Launch(s))
		case 17: // a close, and a remake half the time
			do(fmt.Sprintf("s%d.Close", si), s.Close())
			if rng.IntN(2) == 0 {
				n, err := w.c.NewStream(StreamOptions{NonBlocking: true})
				require.NoError(t, err)
				w.streams[si] = n
			}
		case 18:
			do(fmt.Sprintf("e%d.Close", ei), e.Close())
			if rng.IntN(2) == 0 {
				n, err := w.c.NewEvent(EventOptions{DisableTiming: true})
				require.NoError(t, err)
				w.events[ei] = n
			}
		case 19:
			if rng.IntN(2) == 0 {
				do(fmt.Sprintf("g%d.Close", gi), w.graphs[gi].Close())
			} else {
				do(fmt.Sprintf("x%d.Close", gi), w.execs[gi].Close())
			}
		case 20: // an allocation, in place of the buffer's (closed first)
			_ = b.Close()
			n, err := w.c.Alloc(64)
			do(fmt.Sprintf("b%d = Alloc", gi), err)
			w.bufs[gi] = n
		case 21:
			do(fmt.Sprintf("b%d.Close", gi), b.Close())
		case 22:
			if rng.IntN(2) == 0 {
				do(fmt.Sprintf("CopyToDevice(b%d)", gi), CopyToDevice(b, host))
			} else {
				do(fmt.Sprintf("CopyFromDevice(b%d)", gi), CopyFromDevice(host, b))
			}
		case 23:
			if rng.IntN(2) == 0 {
				do(fmt.Sprintf("CopyToDeviceAsync(b%d, s%d)", gi, si), CopyToDeviceAsync(b, host, s))
			} else {
				do(fmt.Sprintf("CopyFromDeviceAsync(b%d, s%d)", gi, si), CopyFromDeviceAsync(host, b, s))
			}
		}
	}
	return steps
}

// close ends what a sequence left: captures (their graphs with them), then every object.
// Its outcomes are not compared.
func (w *diffWorld) close() {
	for _, s := range w.streams {
		if g, err := s.EndCapture(); err == nil {
			_ = g.Close()
		}
		_ = s.Synchronize()
		_ = s.Close()
	}
	for _, e := range w.events {
		_ = e.Close()
	}
	for _, x := range w.execs {
		_ = x.Close()
	}
	for _, g := range w.graphs {
		_ = g.Close()
	}
	for _, b := range w.bufs {
		_ = b.Close()
	}
}

func diffSetting(t *testing.T, name string, def uint64) uint64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, name)
	return n
}

func TestDifferentialSequences(t *testing.T) {
	n := diffSetting(t, "STREAMBRIDGE_DIFF_SEQUENCES", 200)
	first := diffSetting(t, "STREAMBRIDGE_DIFF_SEED", 1)
	const length = 40
	real, err := CUDA()
	if err != nil {
		if requireGPU {
			t.Fatalf("STREAMBRIDGE_REQUIRE_GPU=1 but the real driver is unusable: %v", err)
		}
		t.Logf("SKIP (the comparison): no real driver here (%v); the sequences run on the software driver alone", err)
	}
	disagreements, calls, outcomes := 0, 0, map[string]int{}
	kinds := map[string]*diffKind{} // the disagreements by call and both outcomes
	for seed := first; seed < first+n; seed++ {
		sim := runSequence(t, Sim(), seed, length)
		calls += len(sim)
		for _, st := range sim {
			outcomes[st.got]++
			require.NotContains(t, st.got, "untyped", "seed %d: %s", seed, st.name)
		}
		if real == nil {
			continue
		}
		gpu := runSequence(t, real, seed, length)
		require.Len(t, gpu, len(sim), "seed %d: the same calls", seed)
		for i := range sim {
			if sim[i].got != gpu[i].got {
				disagreements++
				key := fmt.Sprintf("%s: software driver %q, GPU %q", callName.ReplaceAllString(sim[i].name, "$1"), sim[i].got, gpu[i].got)
				k := kinds[key]
				if k == nil {
					k = &diffKind{at: length + 1}
					kinds[key] = k
				}
				k.count++
				if i < k.at { // the shortest sequence that shows it
					var before []string
					for _, st := range sim[:i] {
						before = append(before, st.name+"="+st.got)
					}
					k.at, k.example = i, fmt.Sprintf("seed %d, call %d, %s; before it: %v", seed, i, sim[i].name, before)
				}
				break // the rest of the sequence runs on diverged states
			}
		}
	}
	keys := make([]string, 0, len(kinds))
	for key := range kinds {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return kinds[keys[i]].count > kinds[keys[j]].count })
	for _, key := range keys {
		t.Errorf("%d sequences disagree first at %s; the shortest: %s", kinds[key].count, key, kinds[key].example)
	}
	t.Logf("%d sequences, %d calls (outcomes on the software driver: %v); %d disagreements", n, calls, outcomes, disagreements)
}

// diffKind is one kind of disagreement: how many sequences showed it first, and the one that
// showed it earliest.
type diffKind struct {
	count, at int
	example   string
}

// callName finds a call's slots (s1, e0, ...), which a kind of disagreement leaves out.
var callName = regexp.MustCompile(`\b([sexg])[0-9]\b`)
