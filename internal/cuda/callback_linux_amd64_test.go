package cuda

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// Threads Go did not make run host functions here, through the entry the driver calls
// (hostFuncEntry, as the start routine of libc's pthread_create): each thread keeps the M it
// borrowed (the key holds its g0) until it exits, when the key's destructor gives the M
// back. Run on a CPU; on the GPU the driver's thread does the same (BenchmarkHostFuncBurst).
func TestForeignThreadsRunHostFuncsAndKeepTheirMUntilTheyExit(t *testing.T) {
	require.NoError(t, bindCallbackThreads())
	require.NotZero(t, *(*uintptr)(runtimeKeyCreated))
	getspecific, err := purego.Dlsym(purego.RTLD_DEFAULT, "pthread_getspecific")
	require.NoError(t, err)
	create, err := purego.Dlsym(purego.RTLD_DEFAULT, "pthread_create")
	require.NoError(t, err)
	join, err := purego.Dlsym(purego.RTLD_DEFAULT, "pthread_join")
	require.NoError(t, err)
	bound := make(chan uintptr, 1)
	runtime.GC()
	before := runtime.NumGoroutine() // a bound M's goroutine counts while its thread lives
	const threads = 64
	for range threads {
		key := driver.RegisterHostFunc(func() { bound <- call(getspecific, threadKey) }, false)
		tid := new(uint64)
		require.Zero(t, call(create, uintptr(unsafe.Pointer(tid)), 0, hostFuncEntry(), key))
		require.NotZero(t, <-bound, "the host function ran, and its thread's M was bound to it")
		require.Zero(t, call(join, uintptr(*tid), 0))
	}
	require.Equal(t, before, runtime.NumGoroutine(), "each thread gave its M back as it exited (no leak over %d threads)", threads)
}
