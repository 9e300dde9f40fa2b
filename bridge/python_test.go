package bridge

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/streambridge/streambridge/internal/boundary"
	"github.com/streambridge/streambridge/streams"
)

// A driver result reaches Python as the kind boundary.ResultKinds gives it, however it was
// wrapped: every refusal of what a capture forbids is a CaptureError, with the driver's code
// (the C core classes a result by the same table, generated as sb_result_kind).
func TestDriverResultsReachPythonAsTheirKind(t *testing.T) {
	for _, tc := range []struct {
		r    streams.Result
		kind boundary.ErrorKind
	}{
		{streams.ErrCapturedEvent, boundary.KindCapture},
		{streams.ErrCaptureInvalidated, boundary.KindCapture},
		{streams.ErrCaptureWrongThread, boundary.KindCapture},
		{streams.ErrInvalidHandle, boundary.KindInvalidHandle},
		{streams.ErrNotSupported, boundary.KindCUDA},
	} {
		for _, err := range []error{tc.r, fmt.Errorf("a call: %w", tc.r), &streams.CallError{Call: "cuEventQuery", Result: tc.r}} {
			d := DescribeForPython(err)
			assert.Equal(t, tc.kind, d.Kind, "%v", err)
			assert.Equal(t, int(tc.r), d.Code, "%v", err)
			assert.Equal(t, tc.r.Name(), d.Name, "%v", err)
		}
	}
}
