package sim

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

var (
	entriesOnce sync.Once
	entries     map[string]uintptr
	entryDriver atomic.Pointer[Driver] // the software driver the C entry points act on
)

// Entry offers driver.EntryNames as C functions (purego callbacks into this driver), so
// that code calling the real driver's entry points directly runs on the software one too;
// any other name gets 0, as the real driver's Entry answers it. The callbacks are
// process-wide (purego's are never freed): they act on the software driver that asked last.
func (d *Driver) Entry(name string) uintptr {
	entryDriver.Store(d)
	if !slices.Contains(driver.EntryNames, name) {
		return 0
	}
	entriesOnce.Do(func() {
		entries = map[string]uintptr{
			"cuStreamQuery": purego.NewCallback(func(s uintptr) uintptr {
				return uintptr(entryDriver.Load().streamQuery(0, driver.Stream(s), false))
			}),
			"cuEventRecord": purego.NewCallback(func(e, s uintptr) uintptr {
				return uintptr(entryDriver.Load().EventRecord(0, driver.Event(e), driver.Stream(s)))
			}),
			"cuStreamSynchronize": purego.NewCallback(func(s uintptr) uintptr {
				return uintptr(entryDriver.Load().streamSynchronize(0, driver.Stream(s), false))
			}),
			"cuStreamWaitEvent": purego.NewCallback(func(s, e, flags uintptr) uintptr {
				return uintptr(entryDriver.Load().StreamWaitEvent(0, driver.Stream(s), driver.Event(e), uint32(flags)))
			}),
			"cuEventQuery": purego.NewCallback(func(e uintptr) uintptr {
				return uintptr(entryDriver.Load().eventQuery(driver.Event(e), false))
			}),
			// fn(userData) is called at its turn on the stream, and at every launch of a
			// graph that captured it; on one thread for the whole call, as the driver's.
			"cuLaunchHostFunc": purego.NewCallback(func(s, fn, userData uintptr) uintptr {
				return uintptr(entryDriver.Load().launchHost(0, driver.Stream(s), func() {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					purego.SyscallN(fn, userData)
				}))
			}),
			"cuLaunchKernel": purego.NewCallback(func(f, gx, gy, gz, bx, by, bz, shared, s, params, extra uintptr) uintptr {
				return uintptr(driver.ErrorNotSupported) // the software driver runs no device code
			}),
			"cuCtxGetCurrent": purego.NewCallback(func(out uintptr) uintptr {
				c, r := entryDriver.Load().CtxGetCurrent()
				if r == driver.Success {
					*(*uintptr)(addr(out)) = uintptr(c)
				}
				return uintptr(r)
			}),
			"cuCtxGetDevice": purego.NewCallback(func(out uintptr) uintptr {
				dev, r := entryDriver.Load().CtxGetDevice()
				if r == driver.Success {
					*(*int32)(addr(out)) = int32(dev)
				}
				return uintptr(r)
			}),
			"cuCtxSetCurrent": purego.NewCallback(func(c uintptr) uintptr {
				return uintptr(entryDriver.Load().CtxSetCurrent(driver.Context(c)))
			}),
			"cuEventCreate": purego.NewCallback(func(out, flags uintptr) uintptr {
				e, r := entryDriver.Load().EventCreate(0, uint32(flags)) // in the current context
				if r == driver.Success {
					*(*uintptr)(addr(out)) = uintptr(e)
				}
				return uintptr(r)
			}),
			"cuEventDestroy": purego.NewCallback(func(e uintptr) uintptr {
				return uintptr(entryDriver.Load().EventDestroy(driver.Event(e)))
			}),
			"cuEventSynchronize": purego.NewCallback(func(e uintptr) uintptr {
				return uintptr(entryDriver.Load().eventSynchronize(driver.Event(e), false))
			}),
			"cuEventElapsedTime": purego.NewCallback(func(out, start, end uintptr) uintptr {
				ms, r := entryDriver.Load().EventElapsedTime(driver.Event(start), driver.Event(end))
				if r == driver.Success {
					*(*float32)(addr(out)) = ms
				}
				return uintptr(r)
			}),
			"cuIpcGetEventHandle": purego.NewCallback(func(out, e uintptr) uintptr {
				h, r := entryDriver.Load().IpcGetEventHandle(driver.Event(e))
				if r == driver.Success {
					*(*driver.IPCEventHandle)(addr(out)) = h
				}
				return uintptr(r)
			}),
			"cuStreamCreateWithPriority": purego.NewCallback(func(out, flags, priority uintptr) uintptr {
				h, r := entryDriver.Load().StreamCreateWithPriority(0, uint32(flags), int(int32(priority))) // in the current context
				if r == driver.Success {
					*(*uintptr)(addr(out)) = uintptr(h)
				}
				return uintptr(r)
			}),
			"cuStreamDestroy": purego.NewCallback(func(s uintptr) uintptr {
				return uintptr(entryDriver.Load().StreamDestroy(driver.Stream(s)))
			}),
			"cuCtxGetStreamPriorityRange": purego.NewCallback(func(least, greatest uintptr) uintptr {
				l, g, r := entryDriver.Load().CtxGetStreamPriorityRange() // the current context's
				if r == driver.Success {
					*(*int32)(addr(least)), *(*int32)(addr(greatest)) = int32(l), int32(g)
				}
				return uintptr(r)
			}),
			// The ABI of cuStreamGetCaptureInfo_v2: status, id, graph, dependencies and
			// their count out. This driver names no dependencies.
			"cuStreamGetCaptureInfo": purego.NewCallback(func(s, status, id, graph, deps, numDeps uintptr) uintptr {
				st, capID, g, r := entryDriver.Load().captureInfo(0, driver.Stream(s))
				if r != driver.Success {
					return uintptr(r)
				}
				*(*int32)(addr(status)) = int32(st)
				for _, out := range []struct{ at, v uintptr }{{id, uintptr(capID)}, {graph, uintptr(g)}, {deps, 0}, {numDeps, 0}} {
					if out.at != 0 {
						*(*uintptr)(addr(out.at)) = out.v
					}
				}
				return uintptr(r)
			}),
			"cuUserObjectCreate": purego.NewCallback(func(out, ptr, destroy, refs, flags uintptr) uintptr {
				o, r := entryDriver.Load().UserObjectCreate(ptr, destroy, int(int32(refs)), uint32(flags))
				if r == driver.Success {
					*(*uintptr)(addr(out)) = o
				}
				return uintptr(r)
			}),
			"cuUserObjectRelease": purego.NewCallback(func(o, count uintptr) uintptr {
				return uintptr(entryDriver.Load().UserObjectRelease(o, int(int32(count))))
			}),
			"cuGraphRetainUserObject": purego.NewCallback(func(g, o, count, flags uintptr) uintptr {
				return uintptr(entryDriver.Load().GraphRetainUserObject(driver.Graph(g), o, int(int32(count)), uint32(flags)))
			}),
			"cuStreamEndCapture": purego.NewCallback(func(s, out uintptr) uintptr {
				g, r := entryDriver.Load().StreamEndCapture(driver.Stream(s))
				if r == driver.Success {
					*(*uintptr)(addr(out)) = uintptr(g)
				}
				return uintptr(r)
			}),
			"cuGraphDestroy": purego.NewCallback(func(g uintptr) uintptr {
				return uintptr(entryDriver.Load().GraphDestroy(driver.Graph(g)))
			}),
			"cuThreadExchangeStreamCaptureMode": purego.NewCallback(func(mode uintptr) uintptr {
				m := (*uint32)(addr(mode)) // in: the mode to set; out: the thread's before
				before, r := entryDriver.Load().ThreadExchangeStreamCaptureMode(driver.CaptureMode(*m))
				if r == driver.Success {
					*m = uint32(before)
				}
				return uintptr(r)
			}),
		}
	})
	return entries[name]
}

// addr is a C caller's out-parameter, passed as an integer: C memory, which Go's collector
// neither moves nor frees.
func addr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
