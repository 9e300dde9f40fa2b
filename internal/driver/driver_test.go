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
