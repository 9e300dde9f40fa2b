package sim

import (
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

var (
	entriesOnce sync.Once
	entries     map[string]uintptr
	entryDriver atomic.Pointer[Driver] // the software driver the C entry points act on
)

// Entry offers driver.EntryNames as C functions (purego callbacks into this driver), so
// that code calling the real driver's entry points directly runs on the software one too.
// The callbacks are process-wide (purego's are never freed): they act on the software
// driver that asked last.
func (d *Driver) Entry(name string) uintptr {
	entryDriver.Store(d)
	entriesOnce.Do(func() {
		entries = map[string]uintptr{
			"cuStreamQuery": purego.NewCallback(func(s uintptr) uintptr {
				return uintptr(entryDriver.Load().StreamQuery(0, driver.Stream(s)))
			}),
			"cuEventRecord": purego.NewCallback(func(e, s uintptr) uintptr {
				return uintptr(entryDriver.Load().EventRecord(0, driver.Event(e), driver.Stream(s)))
			}),
			"cuStreamWaitEvent": purego.NewCallback(func(s, e, flags uintptr) uintptr {
				return uintptr(entryDriver.Load().StreamWaitEvent(0, driver.Stream(s), driver.Event(e), uint32(flags)))
			}),
			"cuEventQuery": purego.NewCallback(func(e uintptr) uintptr {
				return uintptr(entryDriver.Load().EventQuery(driver.Event(e)))
			}),
		}
	})
	return entries[name]
}
