package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// The oldest driver is the newest ABI among the entry points resolved: CUDA 12.0 today
// (cuStreamGetId).
func TestMinVersionIsTheNewestEntryPointsABI(t *testing.T) {
	assert.Equal(t, 12000, driver.MinVersion)
	assert.Equal(t, "12.0", versionString(driver.MinVersion))
	assert.Equal(t, "11.8", versionString(11080))
}

// A driver older than driver.MinVersion is refused before any symbol is looked up, with an error
// naming both versions, the entry point that needs the newer one and what to do: a stand-in
// libcuda (STREAMBRIDGE_LIBCUDA) that has only cuDriverGetVersion, reporting 11.8.
func TestAnOlderDriverIsRefusedByVersion(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("SKIP: no C compiler to build a stand-in libcuda: %v", err)
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "old.c"), filepath.Join(dir, "libcuda-old.so")
	require.NoError(t, os.WriteFile(src, []byte("int cuDriverGetVersion(int *v) { *v = 11080; return 0; }\n"), 0o644))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput()
	require.NoError(t, err, string(out))
	t.Setenv("STREAMBRIDGE_LIBCUDA", lib)
	err = load() // not Load: its result is the process's, once
	require.ErrorIs(t, err, ErrNoDriver)
	assert.EqualError(t, err, "no CUDA driver: the CUDA driver is version 11.8; streambridge needs 12.0 or newer "+
		"(cuStreamGetId): update the NVIDIA driver")
}

// Every entry point of the one table has the variable its address is kept in, and no other
// variable is kept.
func TestEveryEntryPointHasItsAddress(t *testing.T) {
	for _, e := range driver.EntryPoints {
		assert.NotNil(t, addresses[e.Name], e.Name)
	}
	assert.Len(t, addresses, len(driver.EntryPoints))
}
