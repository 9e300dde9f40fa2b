package cuda

import (
	"runtime"
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

// Contexts other than a device's primary one: green contexts (a share of a device's SMs,
// made from its primary context, whose objects they share) and contexts of their own
// (cuCtxCreate). Their entry points are optional: where the driver lacks one, what needs
// it answers ErrorNotSupported.

// devResourceBytes holds one CUdevResource, whatever the driver's version makes of it (144
// bytes in CUDA 12.4): only its address is passed on.
const devResourceBytes = 1024

// devResourceSM is CU_DEV_RESOURCE_TYPE_SM; greenCtxDefaultStream is
// CU_GREEN_CTX_DEFAULT_STREAM, which CUDA 12.4 requires of cuGreenCtxCreate.
const (
	devResourceSM         = 1
	greenCtxDefaultStream = 1
)

func (*Driver) StreamGetCtx2(s driver.Stream) (driver.Context, driver.GreenContext, driver.Result) {
	if cuStreamGetCtx2 == 0 {
		return 0, 0, driver.ErrorNotSupported
	}
	r, c, g := callOut2In(0, cuStreamGetCtx2, 1, uintptr(s), 0, 0)
	return driver.Context(c), driver.GreenContext(g), res(r)
}

func (*Driver) CtxCreate(d driver.Device) (driver.Context, driver.Result) {
	if cuCtxCreate == 0 || cuCtxDestroy == 0 {
		return 0, driver.ErrorNotSupported
	}
	runtime.LockOSThread() // cuCtxCreate makes the new context current: this thread's is put back
	defer runtime.UnlockOSThread()
	r, prev := callOut(cuCtxGetCurrent, 0, 0)
	if res(r) != driver.Success {
		return 0, res(r)
	}
	r, c := callOut(cuCtxCreate, 0, 0, 0, uintptr(d))
	if res(r) != driver.Success {
		return 0, res(r)
	}
	if r := res(call(cuCtxSetCurrent, uintptr(prev))); r != driver.Success {
		callReentrant(cuCtxDestroy, -1, uintptr(c))
		return 0, r
	}
	return driver.Context(c), driver.Success
}

func (*Driver) CtxDestroy(c driver.Context) driver.Result {
	if cuCtxDestroy == 0 {
		return driver.ErrorNotSupported
	}
	r, _ := callReentrant(cuCtxDestroy, -1, uintptr(c)) // its graphs go with it
	return res(r)
}

func (*Driver) GreenCtxCreate(d driver.Device) (driver.GreenContext, driver.Result) {
	if cuDeviceGetDevResource == 0 || cuDevResourceGenerateDesc == 0 || cuGreenCtxCreate == 0 ||
		cuGreenCtxDestroy == 0 || cuGreenCtxStreamCreate == 0 {
		return 0, driver.ErrorNotSupported
	}
	resource := make([]byte, devResourceBytes)
	if r := res(call(cuDeviceGetDevResource, uintptr(d), uintptr(unsafe.Pointer(&resource[0])), devResourceSM)); r != driver.Success {
		return 0, r
	}
	r, desc := callOut(cuDevResourceGenerateDesc, 0, 0, uintptr(unsafe.Pointer(&resource[0])), 1)
	runtime.KeepAlive(resource)
	if res(r) != driver.Success {
		return 0, res(r)
	}
	r, g := callOut(cuGreenCtxCreate, 0, 0, uintptr(desc), uintptr(d), greenCtxDefaultStream)
	return driver.GreenContext(g), res(r)
}

func (*Driver) GreenCtxDestroy(g driver.GreenContext) driver.Result {
	if cuGreenCtxDestroy == 0 {
		return driver.ErrorNotSupported
	}
	r, _ := callReentrant(cuGreenCtxDestroy, -1, uintptr(g))
	return res(r)
}

func (*Driver) GreenCtxStreamCreate(g driver.GreenContext, flags uint32, priority int) (driver.Stream, driver.Result) {
	if cuGreenCtxStreamCreate == 0 {
		return 0, driver.ErrorNotSupported
	}
	r, s := callOut(cuGreenCtxStreamCreate, 0, 0, uintptr(g), uintptr(flags), uintptr(int32(priority)))
	return driver.Stream(s), res(r)
}

func (*Driver) CtxFromGreenCtx(g driver.GreenContext) (driver.Context, driver.Result) {
	if cuCtxFromGreenCtx == 0 {
		return 0, driver.ErrorNotSupported
	}
	r, c := callOut(cuCtxFromGreenCtx, 0, 0, uintptr(g))
	return driver.Context(c), res(r)
}
