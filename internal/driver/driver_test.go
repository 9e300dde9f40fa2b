package driver

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResultText(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{ErrorInvalidHandle, "CUDA_ERROR_INVALID_HANDLE: invalid resource handle"},
		{ErrorNotReady, "CUDA_ERROR_NOT_READY: device not ready"},
		{Result(12345), "CUDA_ERROR_12345: unrecognized error code"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.r.Error())
			var err error = tc.r
			assert.True(t, errors.Is(err, tc.r))
		})
	}
}

func TestHostFuncTableReusesSlots(t *testing.T) {
	before := LiveHostFuncs()
	ran := 0
	a := RegisterHostFunc(func() { ran++ }, false)
	RunHostFunc(a)
	assert.Equal(t, 1, ran)
	b := RegisterHostFunc(func() { ran += 10 }, false)
	assert.Equal(t, a, b, "a freed slot is reused")
	RunHostFunc(b)
	assert.Equal(t, 11, ran)
	assert.Equal(t, before, LiveHostFuncs())
}

func TestPersistentHostFuncRunsUntilReleased(t *testing.T) {
	ran := 0
	k := RegisterHostFunc(func() { ran++ }, true)
	RunHostFunc(k)
	RunHostFunc(k)
	assert.Equal(t, 2, ran)
	ReleaseHostFunc(k)
	var got []error
	SetPanicHandler(func(err error) { got = append(got, err) })
	defer SetPanicHandler(nil)
	RunHostFunc(k) // released: reported, not run, no crash
	assert.Equal(t, 2, ran)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Error(), "no host function under key")
}

// InHostFunc is true on the goroutine that runs a host function, and nowhere else: not on
// a goroutine the function starts, not beside it on another goroutine.
func TestInHostFuncIsTheHostFunctionsOwnGoroutine(t *testing.T) {
	inside, started := make(chan bool, 1), make(chan bool, 1)
	running, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		RunHostFunc(RegisterHostFunc(func() {
			inside <- InHostFunc()
			go func() { started <- InHostFunc() }()
			close(running)
			<-release
		}, false))
	}()
	<-running
	assert.True(t, <-inside, "the host function's own goroutine")
	assert.False(t, <-started, "a goroutine the host function started")
	assert.True(t, HostFuncRuns())
	assert.False(t, InHostFunc(), "a goroutine beside the running host function")
	close(release)
	<-done
	assert.False(t, HostFuncRuns(), "none runs once it returned")
}

// KeepApart lets one side in at a time: goroutines of both sides, each counting itself in
// while it holds its side, never see the other side counted.
func TestKeepApartLetsOneSideInAtATime(t *testing.T) {
	var gate CaptureGate
	var inside [2]atomic.Int32
	var wg sync.WaitGroup
	var overlaps, entries atomic.Int64
	sides := [2]*atomic.Int32{&gate.Waits[3], &gate.Launches[3]}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, other := g%2, 1-g%2
			for range 2000 {
				KeepApart(sides[mine], sides[other], func(int) { runtime.Gosched() })
				inside[mine].Add(1)
				if inside[other].Load() != 0 {
					overlaps.Add(1)
				}
				entries.Add(1)
				inside[mine].Add(-1)
				sides[mine].Add(-1)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(16000), entries.Load())
	require.Zero(t, overlaps.Load(), "a wait and a launch were let in at once")
	require.Zero(t, gate.Waits[3].Load()+gate.Launches[3].Load(), "a side left counted")
}

func TestGateStreamSpreadsHandlesOverTheStripes(t *testing.T) {
	seen := map[int]bool{}
	for h := uintptr(0x7f0000000000); len(seen) < GateStreams && h < 0x7f0000100000; h += 0x240 {
		i := GateStream(h)
		require.True(t, i >= 0 && i < GateStreams)
		seen[i] = true
	}
	require.Len(t, seen, GateStreams, "handles 0x240 bytes apart reach every stripe")
}
