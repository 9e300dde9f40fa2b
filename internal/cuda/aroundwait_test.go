//go:build linux && (amd64 || arm64)

package cuda

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/sim"
)

// embedder stands in for the Python module: C functions (purego callbacks) that let its lock
// go and take it back, counting, and whether the lock is held now. steps is what happened,
// in order.
type embedder struct {
	held          atomic.Bool
	lets, takes   atomic.Int32
	letGo, takeBk uintptr
	mu            sync.Mutex
	steps         []string
}

func (e *embedder) step(s string) {
	e.mu.Lock()
	e.steps = append(e.steps, s)
	e.mu.Unlock()
}

func (e *embedder) taken() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.steps...)
}

const heldToken = 0x5eed

func installEmbedder(t *testing.T) *embedder {
	e := &embedder{}
	e.held.Store(true) // a check is called holding it
	e.letGo = purego.NewCallback(func() uintptr {
		e.lets.Add(1)
		e.held.Store(false)
		e.step("let go")
		return heldToken
	})
	e.takeBk = purego.NewCallback(func(token uintptr) uintptr {
		e.takes.Add(1)
		if token == heldToken {
			e.held.Store(true)
		}
		e.step("take back")
		return 0
	})
	LetGoAroundWaits(e.letGo, e.takeBk)
	t.Cleanup(func() { driver.LetGoAroundWaits(nil, nil) })
	return e
}

// creates is the software driver, noting for each event it makes whether the embedder held
// its lock then.
type creates struct {
	*sim.Driver
	e     *embedder
	mu    sync.Mutex
	whole []bool // per EventCreate: the embedder's lock held
}

func (c *creates) EventCreate(ctx driver.Context, flags uint32) (driver.Event, driver.Result) {
	c.mu.Lock()
	c.whole = append(c.whole, c.e.held.Load())
	c.mu.Unlock()
	c.e.step("create")
	return c.Driver.EventCreate(ctx, flags)
}

// An event check that makes a sentinel (its event alone in its context) makes it with the
// embedder's lock let go, and takes the lock back before it answers; a check that makes
// nothing lets nothing go. (A create waits while another thread's cuModuleLoadData waits for
// a host callback, which may want that lock: the free-threaded chaos soak hung so on an
// H200, an event's wrap holding the core lock in the sentinel's cuEventCreate.)
func TestAnEventChecksSentinelIsMadeOutsideTheEmbeddersLock(t *testing.T) {
	d, l, ctx := eventsOnLayout0(t)
	e := installEmbedder(t)
	api := &creates{Driver: d, e: e}
	var p eventProver

	alone, r := d.EventCreate(ctx, driver.EventDisableTiming)
	require.Equal(t, driver.Success, r)
	_, _, r = p.check(api, &l, alone)
	require.Equal(t, driver.Success, r)
	assert.Equal(t, []bool{false}, api.whole, "the sentinel, made with the lock let go")
	assert.Equal(t, [2]int32{1, 1}, [2]int32{e.lets.Load(), e.takes.Load()})
	assert.True(t, e.held.Load(), "taken back")
	assert.Equal(t, []string{"let go", "create", "take back"}, e.taken(), "made inside the embedder's lock let go")

	_, _, r = p.check(api, &l, alone) // beside its sentinel now
	require.Equal(t, driver.Success, r)
	assert.Len(t, api.whole, 1, "nothing made")
	assert.Equal(t, int32(1), e.lets.Load(), "nothing let go")
}

// A layout's learning runs outside the embedder's lock, once; a check that comes while
// another learns waits for it outside the lock too, and a check after it lets nothing go.
func TestALayoutIsLearnedOutsideTheEmbeddersLock(t *testing.T) {
	e := installEmbedder(t)
	var once driver.Learning // a learning of its own: the package's are the process's
	learning, finish := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	var whole atomic.Bool
	learn := func() {
		runs.Add(1)
		whole.Store(e.held.Load())
		e.step("learn")
		close(learning)
		<-finish
	}
	first := make(chan struct{})
	go func() {
		defer close(first)
		once.Do(learn)
	}()
	<-learning
	second := make(chan struct{})
	go func() {
		defer close(second)
		once.Do(learn)
	}()
	require.Eventually(t, func() bool { return len(e.taken()) == 3 }, 10*time.Second, time.Millisecond,
		"the second check let the lock go to wait for the learning")
	assert.Equal(t, []string{"let go", "learn", "let go"}, e.taken(), "the second check waits outside the lock too")
	close(finish)
	<-first
	<-second
	assert.Equal(t, int32(1), runs.Load(), "learned once")
	assert.False(t, whole.Load(), "learned with the lock let go")
	assert.Equal(t, int32(2), e.takes.Load())
	once.Do(learn)
	assert.Equal(t, int32(2), e.lets.Load(), "a check after the learning lets nothing go")
}
