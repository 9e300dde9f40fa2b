package cuda

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzPeek: the handle proof's reader, given any address and length, answers (false where
// the memory is not mapped readable) and never crashes, whether it loads under
// SetPanicOnFault or asks process_vm_readv; the two agree on what is readable. The seeds
// run with go test; a longer run:
//
//	go test -run '^$' -fuzz FuzzPeek -fuzztime 5m ./internal/cuda
func FuzzPeek(f *testing.F) {
	known := []uint64{0x1122334455667788, 42, ^uint64(0)}
	heap := uint64(uintptr(unsafe.Pointer(&known[0])))
	for _, seed := range []uint64{0, 8, 0x1000, 0xdeadbeef0, heap, heap + 8, heap + 4, ^uint64(0) - 7, 1 << 47, 0x7fffffffe000} {
		f.Add(seed, uint8(3))
	}
	f.Fuzz(func(t *testing.T, addr uint64, n uint8) {
		words := make([]uint64, int(n%64)+1)
		viaSyscall := reader{}.peek(uintptr(addr), words)
		if !canLoadUnmapped || !goHandlesSIGSEGV() {
			return
		}
		viaLoads := reader{loads: true}.peek(uintptr(addr), make([]uint64, len(words)))
		assert.Equal(t, viaSyscall, viaLoads, "readable at %#x, %d words", addr, len(words))
	})
}

// Both ways of reading read what is there.
func TestPeekReadsWhatIsThere(t *testing.T) {
	known := []uint64{0x1122334455667788, 42, ^uint64(0)}
	addr := uintptr(unsafe.Pointer(&known[0]))
	t.Logf("reads by loads under SetPanicOnFault here: %v", canLoadUnmapped && goHandlesSIGSEGV())
	for _, r := range []reader{{}, {loads: canLoadUnmapped && goHandlesSIGSEGV()}} {
		got := make([]uint64, len(known))
		require.True(t, r.peek(addr, got), "loads: %v", r.loads)
		assert.Equal(t, known, got)
		assert.False(t, r.peek(0, got))
		assert.False(t, r.peek(addr+4, got), "misaligned")
	}
}
