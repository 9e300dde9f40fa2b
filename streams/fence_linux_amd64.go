package streams

import (
	"sync"

	"golang.org/x/sys/unix"
)

// membarrier(2)'s commands (linux/membarrier.h): the process-wide barrier the owner's half
// of a use count relies on.
const (
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

var fences struct {
	once sync.Once
	ok   bool
}

// fencesWork reports whether fenceOthers can be used: whether the kernel has
// membarrier's private expedited command (Linux 4.14), registered for this process on
// the first ask.
func fencesWork() bool {
	fences.once.Do(func() {
		_, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0)
		fences.ok = errno == 0
	})
	return fences.ok
}

// fenceOthers makes every thread of the process that runs now pass a full memory
// barrier before it returns: a plain store another goroutine made before its last load
// is then seen here (the store's goroutine needs no barrier of its own).
// It reports false where the kernel refused (it does not, once registered): the caller
// then takes the other goroutine for one still in a call.
func fenceOthers() bool {
	_, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0)
	return errno == 0
}
