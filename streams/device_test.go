package streams

import (
	"errors"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

func TestDeviceAttributes(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		n, err := d.DeviceCount()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 1)
		v, err := d.Version()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, v, 12000)
		for i := range n {
			dev, err := d.Device(i)
			require.NoError(t, err)
			name, err := dev.Name()
			require.NoError(t, err)
			assert.NotEmpty(t, name)
			major, _, err := dev.ComputeCapability()
			require.NoError(t, err)
			if d.Name() == "cuda" {
				assert.GreaterOrEqual(t, major, 5)
			}
			bus, err := dev.PCIBusID()
			require.NoError(t, err)
			assert.Regexp(t, regexp.MustCompile(`^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9]$`), bus)
			uuid, err := dev.UUID()
			require.NoError(t, err)
			assert.Regexp(t, regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`), uuid)
			t.Logf("device %d: %s, cc %d, %s, %s", i, name, major, bus, uuid)
		}
		_, err = d.Device(n)
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrInvalidDevice), "%v", err)
	})
}

func TestPrimaryContextRetainRelease(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		dev, err := d.Device(0)
		require.NoError(t, err)
		a, err := dev.PrimaryContext()
		require.NoError(t, err)
		b, err := dev.PrimaryContext()
		require.NoError(t, err)
		assert.Equal(t, a.Handle(), b.Handle(), "one primary context per device")
		assert.Equal(t, 0, a.Device().Ordinal())
		require.NoError(t, a.Close())
		require.NoError(t, a.Close(), "Close is idempotent")
		// b still holds a retain: the context is usable.
		s, err := b.NewStream(StreamOptions{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, b.Close())
	})
}

func TestErrorsAreTypedAndWrapped(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		_, err := d.Device(1 << 20)
		require.Error(t, err)
		var ce *CallError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, "cuDeviceGet", ce.Call)
		var r Result
		require.True(t, errors.As(err, &r))
		assert.Equal(t, ErrInvalidDevice, r)
		assert.Equal(t, "CUDA_ERROR_INVALID_DEVICE", r.Name())
		assert.Contains(t, err.Error(), "cuDeviceGet: CUDA_ERROR_INVALID_DEVICE: ")
	})
}

// Closing a context while objects made in it are open keeps its retain until the last of
// them closes: releasing the last retain resets the context and destroys every object in
// it under its owner, and a later cuStreamDestroy of such a dead handle crashes the driver
// (seen on an H200). Once all are closed the retain goes, and the reset takes what the
// driver made there behind the package's back.
func TestContextLivesUntilItsObjectsClose(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		dev, err := d.Device(0)
		require.NoError(t, err)
		c, err := dev.PrimaryContext()
		require.NoError(t, err)
		s, err := c.NewStream(StreamOptions{})
		require.NoError(t, err)
		e, err := c.NewEvent(EventOptions{})
		require.NoError(t, err)
		raw, r := d.api.StreamCreateWithPriority(c.handle, driver.StreamNonBlocking, 0)
		require.Equal(t, driver.Success, r)

		require.NoError(t, c.Close())
		_, err = c.NewStream(StreamOptions{})
		require.ErrorIs(t, err, ErrClosed, "nothing new in a closed context")
		require.NoError(t, s.Record(e), "objects made before Close still work")
		require.NoError(t, e.Synchronize())
		w, err := d.WrapStream(uintptr(raw))
		require.NoError(t, err, "the context is still alive")
		require.NoError(t, w.Close())

		require.NoError(t, s.Close())
		require.NoError(t, e.Close()) // the last one: the retain is released, the context resets
		_, err = d.WrapStream(uintptr(raw))
		require.ErrorIs(t, err, ErrInvalidHandle, "the reset destroyed the stream made behind our back")
	})
}

// A fence a borrowed wrapper leaves behind must not outlive a reset of its context: the
// reset destroys every event in it, and a pooled one would reach the driver destroyed.
func TestFencesDoNotOutliveAContextReset(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		for round := range 2 { // the second round meets whatever the first left behind
			dev, err := d.Device(0)
			require.NoError(t, err)
			c, err := dev.PrimaryContext()
			require.NoError(t, err)
			producer, err := c.NewStream(StreamOptions{NonBlocking: true})
			require.NoError(t, err)
			consumer, err := c.NewStream(StreamOptions{NonBlocking: true})
			require.NoError(t, err)
			wrapper, err := d.WrapStream(producer.Handle())
			require.NoError(t, err)
			require.NoError(t, consumer.WaitStream(wrapper), "round %d", round)
			require.NoError(t, wrapper.Close())
			require.NoError(t, consumer.Synchronize())
			require.NoError(t, producer.Close())
			require.NoError(t, consumer.Close())
			require.NoError(t, c.Close(), "the last retain: the context resets")
		}
	})
}

func TestDefaultRefusesBadSettings(t *testing.T) {
	tests := []struct{ driver, devices string }{
		{"gpu", ""}, {"sim", "-1"}, {"sim", "abc"}, {"sim", "100000000"},
	}
	for _, tc := range tests {
		t.Run(tc.driver+"/"+tc.devices, func(t *testing.T) {
			t.Setenv("STREAMBRIDGE_DRIVER", tc.driver)
			t.Setenv("STREAMBRIDGE_SIM_DEVICES", tc.devices)
			_, err := Default()
			require.ErrorIs(t, err, ErrSetting)
			assert.Contains(t, err.Error(), "STREAMBRIDGE_")
		})
	}
	t.Setenv("STREAMBRIDGE_DRIVER", "")
	if _, cudaErr := CUDA(); cudaErr != nil { // no driver here: the error says how to go on without one
		require.ErrorIs(t, cudaErr, ErrNoDriver)
		assert.Contains(t, cudaErr.Error(), "streams.Sim() is the software driver")
		_, err := Default()
		require.ErrorIs(t, err, ErrNoDriver)
		assert.Contains(t, err.Error(), "STREAMBRIDGE_DRIVER=sim selects the software driver")
		assert.NotContains(t, err.Error(), "streams.Sim()", "a Python user meets this one")
	} else {
		d, err := Default()
		require.NoError(t, err)
		assert.Equal(t, "cuda", d.Name())
	}
	t.Setenv("STREAMBRIDGE_DRIVER", "sim")
	t.Setenv("STREAMBRIDGE_SIM_DEVICES", "3")
	d, err := Default()
	require.NoError(t, err)
	assert.Equal(t, "sim", d.Name())
}
