package cuda

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

var _ driver.API = (*Driver)(nil)

// Methods pass handles and integers through call, and out-parameters through callOut
// (call_amd64.go). The few that pass Go buffers use purego.SyscallN with the conversion
// in the call expression, whose go:uintptrescapes keeps the buffer on the heap.

func res(r uintptr) driver.Result { return driver.Result(int32(uint32(r))) }

func i32(v uint64) int { return int(int32(uint32(v))) }

func (*Driver) Name() string { return "cuda" }

func (*Driver) DriverGetVersion() (int, driver.Result) {
	r, v := callOut(cuDriverGetVersion, 0, 0)
	return i32(v), res(r)
}

func (*Driver) DeviceGetCount() (int, driver.Result) {
	r, n := callOut(cuDeviceGetCount, 0, 0)
	return i32(n), res(r)
}

func (*Driver) DeviceGet(ordinal int) (driver.Device, driver.Result) {
	r, d := callOut(cuDeviceGet, 0, 0, uintptr(ordinal))
	return driver.Device(i32(d)), res(r)
}

func (*Driver) DeviceGetName(d driver.Device) (string, driver.Result) {
	buf := make([]byte, 256)
	r, _, _ := purego.SyscallN(cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d))
	return cut(buf), res(r)
}

func (*Driver) DeviceGetAttribute(attr int32, d driver.Device) (int, driver.Result) {
	r, v := callOut(cuDeviceGetAttribute, 0, 0, uintptr(attr), uintptr(d))
	return i32(v), res(r)
}

func (*Driver) DeviceGetPCIBusId(d driver.Device) (string, driver.Result) {
	buf := make([]byte, 32)
	r, _, _ := purego.SyscallN(cuDeviceGetPCIBusId, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d))
	return cut(buf), res(r)
}

func (*Driver) DeviceGetUuid(d driver.Device) ([16]byte, driver.Result) {
	u := new([16]byte)
	r, _, _ := purego.SyscallN(cuDeviceGetUuid, uintptr(unsafe.Pointer(u)), uintptr(d))
	return *u, res(r)
}

func (*Driver) DevicePrimaryCtxRetain(d driver.Device) (driver.Context, driver.Result) {
	r, c := callOut(cuDevicePrimaryCtxRetain, 0, 0, uintptr(d))
	return driver.Context(c), res(r)
}

func (*Driver) DevicePrimaryCtxRelease(d driver.Device) driver.Result {
	r, _ := callReentrant(cuDevicePrimaryCtxRelease, -1, uintptr(d)) // a reset destroys graphs
	return res(r)
}

func (*Driver) DevicePrimaryCtxActive(d driver.Device) (bool, driver.Result) {
	r, _, active := callOut2In(0, cuDevicePrimaryCtxGetState, 1, uintptr(d), 0, 0)
	return uint32(active) != 0, res(r)
}

func (*Driver) CtxGetCurrent() (driver.Context, driver.Result) {
	r, c := callOut(cuCtxGetCurrent, 0, 0)
	return driver.Context(c), res(r)
}

func (*Driver) CtxSetCurrent(c driver.Context) driver.Result {
	return res(call(cuCtxSetCurrent, uintptr(c)))
}

func (*Driver) CtxGetDevice() (driver.Device, driver.Result) {
	r, d := callOut(cuCtxGetDevice, 0, 0)
	return driver.Device(i32(d)), res(r)
}

func (*Driver) CtxGetStreamPriorityRange() (int, int, driver.Result) {
	r, least, greatest := callOut2In(0, cuCtxGetStreamPriorityRange, 0, 0, 0)
	return i32(least), i32(greatest), res(r)
}

func (*Driver) StreamCreateWithPriority(c driver.Context, flags uint32, priority int) (driver.Stream, driver.Result) {
	r, s := callOutIn(uintptr(c), cuStreamCreateWithPriority, 0, 0, uintptr(flags), uintptr(int32(priority)))
	return driver.Stream(s), res(r)
}

func (*Driver) StreamDestroy(s driver.Stream) driver.Result {
	r, _ := callReentrant(cuStreamDestroy, -1, uintptr(s)) // a capturing stream's graph goes with it
	return res(r)
}

func (*Driver) StreamQuery(c driver.Context, s driver.Stream) driver.Result {
	return res(callRelaxedIn(uintptr(c), cuStreamQuery, uintptr(s)))
}

func (*Driver) StreamSynchronize(c driver.Context, s driver.Stream) driver.Result {
	r, _ := callReentrantRelaxedIn(uintptr(c), cuStreamSynchronize, -1, uintptr(s))
	return res(r)
}

func (*Driver) StreamWaitEvent(c driver.Context, s driver.Stream, e driver.Event, flags uint32) driver.Result {
	return res(callIn(uintptr(c), cuStreamWaitEvent, uintptr(s), uintptr(e), uintptr(flags)))
}

func (*Driver) StreamGetPriority(s driver.Stream) (int, driver.Result) {
	r, p := callOut(cuStreamGetPriority, 1, uintptr(s), 0)
	return i32(p), res(r)
}

func (*Driver) StreamGetFlags(s driver.Stream) (uint32, driver.Result) {
	r, f := callOut(cuStreamGetFlags, 1, uintptr(s), 0)
	return uint32(f), res(r)
}

func (*Driver) StreamGetCtx(s driver.Stream) (driver.Context, driver.Result) {
	r, c := callOut(cuStreamGetCtx, 1, uintptr(s), 0)
	return driver.Context(c), res(r)
}

func (*Driver) StreamGetId(s driver.Stream) (uint64, driver.Result) {
	r, id := callOut(cuStreamGetId, 1, uintptr(s), 0)
	return id, res(r)
}

func (*Driver) LaunchHostFunc(c driver.Context, s driver.Stream, userData uintptr) driver.Result {
	return res(callIn(uintptr(c), cuLaunchHostFunc, uintptr(s), hostFuncTrampoline, userData))
}

func (*Driver) StreamBeginCapture(s driver.Stream, mode driver.CaptureMode) driver.Result {
	return res(call(cuStreamBeginCapture, uintptr(s), uintptr(mode)))
}

func (*Driver) StreamEndCapture(s driver.Stream) (driver.Graph, driver.Result) {
	r, g := callReentrant(cuStreamEndCapture, 1, uintptr(s), 0) // a failed capture's graph is destroyed
	return driver.Graph(g), res(r)
}

func (*Driver) ThreadExchangeStreamCaptureMode(mode driver.CaptureMode) (driver.CaptureMode, driver.Result) {
	m := new(uint32) // the driver writes the thread's mode before back here
	*m = uint32(mode)
	r := res(call(cuThreadExchangeStreamCaptureMode, uintptr(unsafe.Pointer(m))))
	runtime.KeepAlive(m)
	return driver.CaptureMode(*m), r
}

func (*Driver) StreamIsCapturing(s driver.Stream) (driver.CaptureStatus, driver.Result) {
	r, st := callOut(cuStreamIsCapturing, 1, uintptr(s), 0)
	return driver.CaptureStatus(st), res(r)
}

func (*Driver) StreamGetCaptureInfo(c driver.Context, s driver.Stream) (driver.CaptureStatus, uint64, driver.Result) {
	r, st, id := callOut2In(uintptr(c), cuStreamGetCaptureInfo, 1, uintptr(s), 0, 0, 0, 0, 0)
	return driver.CaptureStatus(st), id, res(r)
}

func (*Driver) StreamCaptureGraph(c driver.Context, s driver.Stream) (driver.CaptureStatus, driver.Graph, driver.Result) {
	r, st, g := callOutsAtIn(uintptr(c), cuStreamGetCaptureInfo, 1, 3, uintptr(s), 0, 0, 0, 0, 0)
	return driver.CaptureStatus(st), driver.Graph(g), res(r)
}

// userObjectNoDestructorSync is CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, the one flag
// cuUserObjectCreate takes (and requires).
const userObjectNoDestructorSync = 1

func (*Driver) HostFuncUserObject(key uintptr) (uintptr, driver.Result) {
	r, obj := callOut(cuUserObjectCreate, 0, 0, key, hostFuncTrampoline, 1, userObjectNoDestructorSync)
	return uintptr(obj), res(r)
}

func (*Driver) GraphRetainUserObject(g driver.Graph, obj uintptr, count int, flags uint32) driver.Result {
	return res(call(cuGraphRetainUserObject, uintptr(g), obj, uintptr(count), uintptr(flags)))
}

func (*Driver) UserObjectRelease(obj uintptr, count int) driver.Result {
	r, _ := callReentrant(cuUserObjectRelease, -1, obj, uintptr(count))
	return res(r)
}

func (*Driver) GraphGetNodes(g driver.Graph) (int, driver.Result) {
	r, n := callOut(cuGraphGetNodes, 2, uintptr(g), 0, 0)
	return int(n), res(r)
}

// GraphInstantiateWithFlags and GraphExecDestroy run with the thread's capture mode relaxed:
// in global or thread-local mode, while a capture of that mode goes on, the driver refuses
// both and invalidates the capture (H100, driver 580: bench/capture_lifetimes.c, cases
// 24-26), so a close would leak the executable and an instantiation would end another's
// capture.
func (*Driver) GraphInstantiateWithFlags(g driver.Graph, flags uint64) (driver.GraphExec, driver.Result) {
	r, e := callOutRelaxed(cuGraphInstantiateWithFlags, 0, 0, uintptr(g), uintptr(flags))
	return driver.GraphExec(e), res(r)
}

func (*Driver) GraphLaunch(e driver.GraphExec, s driver.Stream) driver.Result {
	return res(call(cuGraphLaunch, uintptr(e), uintptr(s)))
}

func (*Driver) GraphUpload(e driver.GraphExec, s driver.Stream) driver.Result {
	return res(call(cuGraphUpload, uintptr(e), uintptr(s)))
}

func (*Driver) GraphExecDestroy(e driver.GraphExec) driver.Result {
	r, _ := callReentrantRelaxedIn(0, cuGraphExecDestroy, -1, uintptr(e))
	return res(r)
}

func (*Driver) GraphDestroy(g driver.Graph) driver.Result {
	r, _ := callReentrant(cuGraphDestroy, -1, uintptr(g))
	return res(r)
}

func (*Driver) EventCreate(c driver.Context, flags uint32) (driver.Event, driver.Result) {
	r, e := callOutIn(uintptr(c), cuEventCreate, 0, 0, uintptr(flags))
	return driver.Event(e), res(r)
}

func (*Driver) EventDestroy(e driver.Event) driver.Result {
	return res(call(cuEventDestroy, uintptr(e)))
}

func (*Driver) EventRecord(c driver.Context, e driver.Event, s driver.Stream) driver.Result {
	return res(callIn(uintptr(c), cuEventRecord, uintptr(e), uintptr(s)))
}

func (*Driver) EventRecordAndWait(c driver.Context, e driver.Event, from, to driver.Stream) (driver.Result, bool) {
	r, n := callPairIn(uintptr(c), cuEventRecord, uintptr(e), uintptr(from), cuStreamWaitEvent, uintptr(to), uintptr(e), 0)
	return res(r), n == 2
}

func (*Driver) EventQuery(e driver.Event) driver.Result {
	return res(callRelaxedIn(0, cuEventQuery, uintptr(e)))
}

func (*Driver) EventSynchronize(e driver.Event) driver.Result {
	r, _ := callReentrantRelaxedIn(0, cuEventSynchronize, -1, uintptr(e))
	return res(r)
}

func (*Driver) EventElapsedTime(start, end driver.Event) (float32, driver.Result) {
	r, bits := callOut(cuEventElapsedTime, 0, 0, uintptr(start), uintptr(end))
	ms := uint32(bits)
	return *(*float32)(unsafe.Pointer(&ms)), res(r)
}

func (*Driver) IpcGetEventHandle(e driver.Event) (driver.IPCEventHandle, driver.Result) {
	h := new(driver.IPCEventHandle)
	r, _, _ := purego.SyscallN(cuIpcGetEventHandle, uintptr(unsafe.Pointer(h)), uintptr(e))
	return *h, res(r)
}

// IpcOpenEventHandle passes the 64-byte handle by value. The System V ABI puts a struct of
// that size on the stack, after the register arguments, so the five unused integer
// registers are padded out and the handle's eight words follow as stack arguments: 14 in
// all, more than call's frame holds, so this rare call goes through purego.
func (*Driver) IpcOpenEventHandle(h driver.IPCEventHandle) (driver.Event, driver.Result) {
	w := (*[8]uintptr)(unsafe.Pointer(&h))
	out := new(uintptr)
	r, _, _ := purego.SyscallN(cuIpcOpenEventHandle, uintptr(unsafe.Pointer(out)), 0, 0, 0, 0, 0,
		w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
	return driver.Event(*out), res(r)
}

func (*Driver) ModuleLoadData(image unsafe.Pointer) (driver.Module, driver.Result) {
	r, m := callOut(cuModuleLoadData, 0, 0, uintptr(image))
	return driver.Module(m), res(r)
}

// ModuleUnload, MemAlloc and MemFree run relaxed (driver.API says why). cuModuleUnload and
// cuMemFree synchronize the context first, so each may see, as a synchronize may, the last
// launch of a destroyed executable finish and its destructor run on this thread: CallsBack.
func (*Driver) ModuleUnload(m driver.Module) driver.Result {
	r, _ := callReentrantRelaxedIn(0, cuModuleUnload, -1, uintptr(m))
	return res(r)
}

func (*Driver) ModuleGetFunction(m driver.Module, name string) (driver.Function, driver.Result) {
	f := new(uintptr)
	cname := cstring(name)
	r, _, _ := purego.SyscallN(cuModuleGetFunction, uintptr(unsafe.Pointer(f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0])))
	return driver.Function(*f), res(r)
}

func (*Driver) LaunchKernel(c driver.Context, f driver.Function, gx, gy, gz, bx, by, bz, shared uint32,
	s driver.Stream, params unsafe.Pointer) driver.Result {
	return res(callIn(uintptr(c), cuLaunchKernel, uintptr(f), uintptr(gx), uintptr(gy), uintptr(gz),
		uintptr(bx), uintptr(by), uintptr(bz), uintptr(shared), uintptr(s), uintptr(params), 0))
}

func (*Driver) MemAlloc(bytes uint64) (driver.DevicePtr, driver.Result) {
	r, p := callOutRelaxed(cuMemAlloc, 0, 0, uintptr(bytes))
	return driver.DevicePtr(p), res(r)
}

func (*Driver) MemFree(p driver.DevicePtr) driver.Result {
	r, _ := callReentrantRelaxedIn(0, cuMemFree, -1, uintptr(p))
	return res(r)
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
