//go:build !linux || !amd64

package cuda

import (
	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

// Elsewhere host functions enter Go through a purego callback, and each borrows an M for
// its length (callback_linux_amd64.go says what that costs).

func hostFuncEntry() uintptr {
	return purego.NewCallback(func(userData uintptr) { driver.RunHostFunc(userData) })
}

func bindCallbackThreads() error { return nil }
