//go:build amd64

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// More arguments than the call frame holds are refused before the call, as purego's
// SyscallN refuses them, not dropped.
func TestTheCallFrameRefusesTooManyArguments(t *testing.T) {
	var f frame
	assert.PanicsWithValue(t, "streambridge: internal error: a driver call with 12 arguments; the call frame holds 11",
		func() { call(0, make([]uintptr, 12)...) })
	assert.NotPanics(t, func() { f.args(make([]uintptr, 11)) })
}
