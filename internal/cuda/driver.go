package cuda

import (
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

var _ driver.API = (*Driver)(nil)

func res(r uintptr) driver.Result { return driver.Result(int32(uint32(r))) }

func (*Driver) Name() string { return "cuda" }

func (*Driver) DriverGetVersion() (int, driver.Result) {
	var v int32
	r := res(call(cuDriverGetVersion, uintptr(unsafe.Pointer(&v))))
	return int(v), r
}

func (*Driver) DeviceGetCount() (int, driver.Result) {
	var n int32
	r := res(call(cuDeviceGetCount, uintptr(unsafe.Pointer(&n))))
	return int(n), r
}

func (*Driver) DeviceGet(ordinal int) (driver.Device, driver.Result) {
	var d int32
	r := res(call(cuDeviceGet, uintptr(unsafe.Pointer(&d)), uintptr(ordinal)))
	return driver.Device(d), r
}

func (*Driver) DeviceGetName(d driver.Device) (string, driver.Result) {
	var buf [256]byte
	r := res(call(cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d)))
	return cut(buf[:]), r
}

func (*Driver) DeviceGetAttribute(attr int32, d driver.Device) (int, driver.Result) {
	var v int32
	r := res(call(cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(d)))
	return int(v), r
}

func (*Driver) DeviceGetPCIBusId(d driver.Device) (string, driver.Result) {
	var buf [32]byte
	r := res(call(cuDeviceGetPCIBusId, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d)))
	return cut(buf[:]), r
}

func (*Driver) DeviceGetUuid(d driver.Device) ([16]byte, driver.Result) {
	var u [16]byte
	r := res(call(cuDeviceGetUuid, uintptr(unsafe.Pointer(&u[0])), uintptr(d)))
	return u, r
}

func (*Driver) DevicePrimaryCtxRetain(d driver.Device) (driver.Context, driver.Result) {
	var c uintptr
	r := res(call(cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c)), uintptr(d)))
	return driver.Context(c), r
}

func (*Driver) DevicePrimaryCtxRelease(d driver.Device) driver.Result {
	return res(call(cuDevicePrimaryCtxRelease, uintptr(d)))
}

func (*Driver) CtxGetCurrent() (driver.Context, driver.Result) {
	var c uintptr
	r := res(call(cuCtxGetCurrent, uintptr(unsafe.Pointer(&c))))
	return driver.Context(c), r
}

func (*Driver) CtxSetCurrent(c driver.Context) driver.Result {
	return res(call(cuCtxSetCurrent, uintptr(c)))
}

func (*Driver) CtxGetDevice() (driver.Device, driver.Result) {
	var d int32
	r := res(call(cuCtxGetDevice, uintptr(unsafe.Pointer(&d))))
	return driver.Device(d), r
}

func (*Driver) CtxGetStreamPriorityRange() (int, int, driver.Result) {
	var least, greatest int32
	r := res(call(cuCtxGetStreamPriorityRange, uintptr(unsafe.Pointer(&least)), uintptr(unsafe.Pointer(&greatest))))
	return int(least), int(greatest), r
}

func (*Driver) StreamCreateWithPriority(flags uint32, priority int) (driver.Stream, driver.Result) {
	var s uintptr
	r := res(call(cuStreamCreateWithPriority, uintptr(unsafe.Pointer(&s)), uintptr(flags), uintptr(int32(priority))))
	return driver.Stream(s), r
}

func (*Driver) StreamDestroy(s driver.Stream) driver.Result {
	return res(call(cuStreamDestroy, uintptr(s)))
}

func (*Driver) StreamQuery(s driver.Stream) driver.Result {
	return res(call(cuStreamQuery, uintptr(s)))
}

func (*Driver) StreamSynchronize(s driver.Stream) driver.Result {
	return res(call(cuStreamSynchronize, uintptr(s)))
}

func (*Driver) StreamWaitEvent(s driver.Stream, e driver.Event, flags uint32) driver.Result {
	return res(call(cuStreamWaitEvent, uintptr(s), uintptr(e), uintptr(flags)))
}

func (*Driver) StreamGetPriority(s driver.Stream) (int, driver.Result) {
	var p int32
	r := res(call(cuStreamGetPriority, uintptr(s), uintptr(unsafe.Pointer(&p))))
	return int(p), r
}

func (*Driver) StreamGetFlags(s driver.Stream) (uint32, driver.Result) {
	var f uint32
	r := res(call(cuStreamGetFlags, uintptr(s), uintptr(unsafe.Pointer(&f))))
	return f, r
}

func (*Driver) StreamGetCtx(s driver.Stream) (driver.Context, driver.Result) {
	var c uintptr
	r := res(call(cuStreamGetCtx, uintptr(s), uintptr(unsafe.Pointer(&c))))
	return driver.Context(c), r
}

func (*Driver) StreamGetId(s driver.Stream) (uint64, driver.Result) {
	var id uint64
	r := res(call(cuStreamGetId, uintptr(s), uintptr(unsafe.Pointer(&id))))
	return id, r
}

func (*Driver) LaunchHostFunc(s driver.Stream, userData uintptr) driver.Result {
	return res(call(cuLaunchHostFunc, uintptr(s), hostFuncTrampoline, userData))
}

func (*Driver) StreamBeginCapture(s driver.Stream, mode driver.CaptureMode) driver.Result {
	return res(call(cuStreamBeginCapture, uintptr(s), uintptr(mode)))
}

func (*Driver) StreamEndCapture(s driver.Stream) (driver.Graph, driver.Result) {
	var g uintptr
	r := res(call(cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g))))
	return driver.Graph(g), r
}

func (*Driver) StreamIsCapturing(s driver.Stream) (driver.CaptureStatus, driver.Result) {
	var st uint32
	r := res(call(cuStreamIsCapturing, uintptr(s), uintptr(unsafe.Pointer(&st))))
	return driver.CaptureStatus(st), r
}

func (*Driver) StreamGetCaptureInfo(s driver.Stream) (driver.CaptureStatus, uint64, driver.Result) {
	var st uint32
	var id uint64
	r := res(call(cuStreamGetCaptureInfo, uintptr(s), uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&id)), 0, 0, 0))
	return driver.CaptureStatus(st), id, r
}

func (*Driver) GraphGetNodes(g driver.Graph) (int, driver.Result) {
	var n uintptr
	r := res(call(cuGraphGetNodes, uintptr(g), 0, uintptr(unsafe.Pointer(&n))))
	return int(n), r
}

func (*Driver) GraphInstantiateWithFlags(g driver.Graph, flags uint64) (driver.GraphExec, driver.Result) {
	var e uintptr
	r := res(call(cuGraphInstantiateWithFlags, uintptr(unsafe.Pointer(&e)), uintptr(g), uintptr(flags)))
	return driver.GraphExec(e), r
}

func (*Driver) GraphLaunch(e driver.GraphExec, s driver.Stream) driver.Result {
	return res(call(cuGraphLaunch, uintptr(e), uintptr(s)))
}

func (*Driver) GraphUpload(e driver.GraphExec, s driver.Stream) driver.Result {
	return res(call(cuGraphUpload, uintptr(e), uintptr(s)))
}

func (*Driver) GraphExecDestroy(e driver.GraphExec) driver.Result {
	return res(call(cuGraphExecDestroy, uintptr(e)))
}

func (*Driver) GraphDestroy(g driver.Graph) driver.Result {
	return res(call(cuGraphDestroy, uintptr(g)))
}

func (*Driver) EventCreate(flags uint32) (driver.Event, driver.Result) {
	var e uintptr
	r := res(call(cuEventCreate, uintptr(unsafe.Pointer(&e)), uintptr(flags)))
	return driver.Event(e), r
}

func (*Driver) EventDestroy(e driver.Event) driver.Result {
	return res(call(cuEventDestroy, uintptr(e)))
}

func (*Driver) EventRecord(e driver.Event, s driver.Stream) driver.Result {
	return res(call(cuEventRecord, uintptr(e), uintptr(s)))
}

func (*Driver) EventQuery(e driver.Event) driver.Result {
	return res(call(cuEventQuery, uintptr(e)))
}

func (*Driver) EventSynchronize(e driver.Event) driver.Result {
	return res(call(cuEventSynchronize, uintptr(e)))
}

func (*Driver) EventElapsedTime(start, end driver.Event) (float32, driver.Result) {
	var ms float32
	r := res(call(cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)))
	return ms, r
}

func (*Driver) IpcGetEventHandle(e driver.Event) (driver.IPCEventHandle, driver.Result) {
	var h driver.IPCEventHandle
	r := res(call(cuIpcGetEventHandle, uintptr(unsafe.Pointer(&h[0])), uintptr(e)))
	return h, r
}

// IpcOpenEventHandle passes the 64-byte handle by value. The System V ABI puts a struct of
// that size on the stack, after the register arguments, so the five unused integer
// registers are padded out and the handle's eight words follow as stack arguments.
func (*Driver) IpcOpenEventHandle(h driver.IPCEventHandle) (driver.Event, driver.Result) {
	var e uintptr
	w := (*[8]uintptr)(unsafe.Pointer(&h))
	r := res(call(cuIpcOpenEventHandle, uintptr(unsafe.Pointer(&e)), 0, 0, 0, 0, 0,
		w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]))
	return driver.Event(e), r
}

func (*Driver) ModuleLoadData(image unsafe.Pointer) (driver.Module, driver.Result) {
	var m uintptr
	r := res(call(cuModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(image)))
	return driver.Module(m), r
}

func (*Driver) ModuleUnload(m driver.Module) driver.Result {
	return res(call(cuModuleUnload, uintptr(m)))
}

func (*Driver) ModuleGetFunction(m driver.Module, name string) (driver.Function, driver.Result) {
	var f uintptr
	cname := cstring(name)
	r := res(call(cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0]))))
	return driver.Function(f), r
}

func (*Driver) LaunchKernel(f driver.Function, gx, gy, gz, bx, by, bz, shared uint32,
	s driver.Stream, params unsafe.Pointer) driver.Result {
	return res(call(cuLaunchKernel, uintptr(f), uintptr(gx), uintptr(gy), uintptr(gz),
		uintptr(bx), uintptr(by), uintptr(bz), uintptr(shared), uintptr(s), uintptr(params), 0))
}

func (*Driver) MemAlloc(bytes uint64) (driver.DevicePtr, driver.Result) {
	var p uint64
	r := res(call(cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)))
	return driver.DevicePtr(p), r
}

func (*Driver) MemFree(p driver.DevicePtr) driver.Result {
	return res(call(cuMemFree, uintptr(p)))
}

func (*Driver) MemcpyHtoD(dst driver.DevicePtr, src unsafe.Pointer, n uint64) driver.Result {
	return res(call(cuMemcpyHtoD, uintptr(dst), uintptr(src), uintptr(n)))
}

func (*Driver) MemcpyDtoH(dst unsafe.Pointer, src driver.DevicePtr, n uint64) driver.Result {
	return res(call(cuMemcpyDtoH, uintptr(dst), uintptr(src), uintptr(n)))
}

func (*Driver) MemcpyHtoDAsync(dst driver.DevicePtr, src unsafe.Pointer, n uint64, s driver.Stream) driver.Result {
	return res(call(cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

func (*Driver) MemcpyDtoHAsync(dst unsafe.Pointer, src driver.DevicePtr, n uint64, s driver.Stream) driver.Result {
	return res(call(cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

func cut(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
