package streams

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/sim"
)

// Bad arguments are errors, never a crash: nil objects, and objects of another driver,
// whose handles this driver would otherwise dereference as its own.
func TestBadArgumentsAreErrors(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		e := newEvent(t, c, EventOptions{})
		buf, err := c.Alloc(64)
		require.NoError(t, err)
		defer buf.Close()

		other := newDriver(sim.New()) // a second driver: none of its handles mean anything to d
		oc := primary(t, other, 0)
		os := newStream(t, oc, StreamOptions{})
		oe := newEvent(t, oc, EventOptions{})
		ob, err := oc.Alloc(64)
		require.NoError(t, err)
		defer ob.Close()

		var nilStream *Stream
		var nilEvent *Event
		var nilBuffer *Buffer
		host := make([]byte, 64)
		tests := []struct {
			name string
			err  error
			want error
		}{
			{"record nil event", s.Record(nilEvent), ErrNil},
			{"wait nil event", s.WaitEvent(nilEvent), ErrNil},
			{"wait nil stream", s.WaitStream(nilStream), ErrNil},
			{"event on nil stream", e.Record(nilStream), ErrNil},
			{"elapsed to nil", func() error { _, err := e.ElapsedTime(nilEvent); return err }(), ErrNil},
			{"copy to nil buffer", CopyToDevice(nilBuffer, host), ErrNil},
			{"async copy on nil stream", CopyToDeviceAsync(buf, host, nilStream), ErrNil},
			{"record other driver's event", s.Record(oe), ErrWrongDriver},
			{"wait other driver's event", s.WaitEvent(oe), ErrWrongDriver},
			{"wait other driver's stream", s.WaitStream(os), ErrWrongDriver},
			{"elapsed across drivers", func() error { _, err := e.ElapsedTime(oe); return err }(), ErrWrongDriver},
			{"async copy of other driver's buffer", CopyToDeviceAsync(ob, host, s), ErrWrongDriver},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				assert.ErrorIs(t, tc.err, tc.want)
			})
		}
		require.NoError(t, s.Synchronize(), "the stream is still fine")
	})
}
