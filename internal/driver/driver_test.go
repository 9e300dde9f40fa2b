package driver

import (
	"errors"
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
