// Package testdrivers runs a test once per driver: the software driver always, the real
// one where libcuda loads (its subtest skips with the reason otherwise, and fails under
// STREAMBRIDGE_REQUIRE_GPU=1). Packages above streams use it; streams' own tests have the
// same helper inside, since they cannot import a package that imports streams.
package testdrivers

import (
	"errors"
	"os"
	"testing"

	"github.com/streambridge/streambridge/streams"
)

// RequireGPU is STREAMBRIDGE_REQUIRE_GPU=1: a missing driver is a failure, not a skip.
var RequireGPU = os.Getenv("STREAMBRIDGE_REQUIRE_GPU") == "1"

// Each runs body as subtest "sim" and subtest "cuda".
func Each(t *testing.T, body func(t *testing.T, d *streams.Driver)) {
	t.Run("sim", func(t *testing.T) { body(t, streams.Sim()) })
	t.Run("cuda", func(t *testing.T) { body(t, Real(t)) })
}

// Real returns the CUDA driver or skips (fails under STREAMBRIDGE_REQUIRE_GPU=1).
func Real(t testing.TB) *streams.Driver {
	t.Helper()
	d, err := streams.CUDA()
	if err != nil {
		if RequireGPU {
			t.Fatalf("STREAMBRIDGE_REQUIRE_GPU=1 but the real driver is unusable: %v", err)
		}
		if reason := errors.Unwrap(err); reason != nil {
			err = reason // without CUDA's advice to use the software driver, which the tests run too
		}
		t.Skipf("SKIP: real CUDA driver not usable on this machine: %v", err)
	}
	return d
}

// Primary retains device ordinal's primary context for the test's length.
func Primary(t testing.TB, d *streams.Driver, ordinal int) *streams.Context {
	t.Helper()
	dev, err := d.Device(ordinal)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Stream makes a stream, closed when the test ends.
func Stream(t testing.TB, c *streams.Context, opts streams.StreamOptions) *streams.Stream {
	t.Helper()
	s, err := c.NewStream(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
