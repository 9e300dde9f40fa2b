package cuda

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Both ways of reading memory agree: mapped words come back, and an unmapped, a
// protected or a freed address is false, with no fault reaching the process.
func TestReaderNeverFaults(t *testing.T) {
	page, err := unix.Mmap(-1, 0, 2*unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	base := uintptr(unsafe.Pointer(&page[0]))
	*(*uint64)(unsafe.Pointer(&page[8])) = 0xfeedface
	guard := base + uintptr(unix.Getpagesize())
	require.NoError(t, unix.Mprotect(page[unix.Getpagesize():], unix.PROT_NONE))
	unmapped, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	gone := uintptr(unsafe.Pointer(&unmapped[0]))
	require.NoError(t, unix.Munmap(unmapped))
	defer unix.Munmap(page)

	readers := map[string]reader{"process_vm_readv": {}}
	if canLoadUnmapped {
		require.True(t, goHandlesSIGSEGV(), "a Go test binary's SIGSEGV handler is Go's")
		readers["loads"] = reader{loads: true}
	}
	for name, rd := range readers {
		t.Run(name, func(t *testing.T) {
			var w [2]uint64
			require.True(t, rd.peek(base+8, w[:1]))
			assert.Equal(t, uint64(0xfeedface), w[0])
			assert.False(t, rd.peek(guard-8, w[:2]), "runs into a PROT_NONE page")
			assert.False(t, rd.peek(guard, w[:1]), "PROT_NONE")
			assert.False(t, rd.peek(gone, w[:1]), "unmapped")
			assert.False(t, rd.peek(0, w[:1]), "zero")
			assert.False(t, rd.peek(16, w[:1]), "first page")
			assert.False(t, rd.peek(1<<47-8, w[:1]), "top of user space")
			assert.False(t, rd.peek(base+3, w[:1]), "misaligned")
		})
	}
}

// The kernel question each check asks first (rt_sigaction), and a load under
// SetPanicOnFault, beside one process_vm_readv.
func BenchmarkGoHandlesSIGSEGV(b *testing.B) {
	for b.Loop() {
		goHandlesSIGSEGV()
	}
}

func BenchmarkPeek(b *testing.B) {
	var x [4]uint64
	addr := uintptr(unsafe.Pointer(&x[0]))
	for name, rd := range map[string]reader{"loads": {loads: canLoadUnmapped}, "process_vm_readv": {}} {
		b.Run(name, func(b *testing.B) {
			var w [4]uint64
			for b.Loop() {
				rd.peek(addr, w[:])
			}
		})
	}
}
