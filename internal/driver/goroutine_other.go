//go:build !amd64

package driver

import "syscall"

// caller is how InHostFunc knows the goroutine that runs a host function: elsewhere than
// amd64 no assembly reads its g, so by its thread (a system call), to which RunHostFunc
// locks it while the function runs; no other goroutine runs on that thread meanwhile.
func caller() uintptr { return uintptr(syscall.Gettid()) }
