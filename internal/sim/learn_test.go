package sim

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// The first stream check and the first event check of a process let an embedder's lock go
// and take it back, as the real driver's do while they learn its layout (internal/cuda), and
// so does an event check that makes a sentinel beside an event alone in its context; a
// check after, or of a handle no check would learn for, lets nothing go. The learning is
// reset first: it is the process's, and another test may have made it.
func TestTheChecksLetAnEmbeddersLockGoWhereTheRealDriversDo(t *testing.T) {
	streamLearning, eventLearning = driver.Learning{}, driver.Learning{}
	var mu sync.Mutex
	var steps []string
	step := func(s string) {
		mu.Lock()
		steps = append(steps, s)
		mu.Unlock()
	}
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), steps...)
	}
	driver.LetGoAroundWaits(func() uintptr { step("let go"); return 7 }, func(h uintptr) { step(fmt.Sprint("take back ", h)) })
	t.Cleanup(func() { driver.LetGoAroundWaits(nil, nil) })

	d := New()
	dev, r := d.DeviceGet(0)
	require.Equal(t, driver.Success, r)
	ctx, r := d.DevicePrimaryCtxRetain(dev)
	require.Equal(t, driver.Success, r)
	s, r := d.StreamCreateWithPriority(ctx, driver.StreamNonBlocking, 0)
	require.Equal(t, driver.Success, r)
	e, r := d.EventCreate(ctx, driver.EventDisableTiming)
	require.Equal(t, driver.Success, r)
	neighbour, r := d.EventCreate(ctx, driver.EventDisableTiming)
	require.Equal(t, driver.Success, r)

	_, _, r = d.StreamCheck(1 << 50) // not an address: refused before any learning
	assert.Equal(t, driver.ErrorInvalidHandle, r)
	_, _, r = d.EventCheck(1 << 50)
	assert.Equal(t, driver.ErrorInvalidHandle, r)
	assert.Empty(t, taken(), "nothing let go for a handle no check learns for")

	want := driver.Success
	if d.unlearnable {
		want = driver.ErrorNotSupported
	}
	_, _, r = d.StreamCheck(s)
	assert.Equal(t, want, r)
	_, _, r = d.StreamCheck(s)
	assert.Equal(t, want, r)
	assert.Equal(t, []string{"let go", "take back 7"}, taken(), "the first stream check only")
	_, id, r := d.EventCheck(e)
	assert.Equal(t, want, r)
	_, _, r = d.EventCheck(e)
	assert.Equal(t, want, r)
	learned := []string{"let go", "take back 7", "let go", "take back 7"}
	assert.Equal(t, learned, taken(), "and the first event check")

	require.Equal(t, driver.Success, d.EventDestroy(neighbour)) // e is alone in its context now
	c, again, r := d.EventCheck(e)
	assert.Equal(t, want, r)
	_, _, r = d.EventCheck(e)
	assert.Equal(t, want, r)
	if d.unlearnable {
		assert.Equal(t, learned, taken(), "no check, no sentinel")
		return
	}
	assert.Equal(t, [2]any{ctx, id}, [2]any{c, again}, "the same event")
	assert.Equal(t, append(learned, "let go", "take back 7"), taken(), "a sentinel made beside it, once")
}
