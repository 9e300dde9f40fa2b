// Package streams drives CUDA streams, events, host functions, graphs and kernel launches
// through the CUDA driver API, loaded at run time (no cgo, no CUDA toolkit to build).
//
// # Drivers
//
// Every object belongs to a [Driver]. [Default] picks one from STREAMBRIDGE_DRIVER:
// "cuda" (or unset) is the real driver, libcuda.so.1, opened on first use; "sim" is the
// software driver, which implements stream, event, host-function and capture semantics in
// Go and runs no device code. On a machine without libcuda the real driver's calls return
// an error matching [ErrNoDriver]; importing this package never touches libcuda.
//
// # Ownership
//
// Objects made by this package ([Context.NewStream], [Context.NewEvent], ...) own their
// driver object and destroy it in Close. Objects made by wrapping a handle that some other
// library created ([Driver.WrapStream], [Context.WrapStream]) borrow it: their Close only
// forgets it. Close is idempotent; using a closed object returns [ErrClosed].
//
// # Threads
//
// The CUDA current context belongs to an OS thread, and goroutines move between threads.
// Every call that depends on the current context runs through one helper that locks the
// thread, makes the right context current, and restores the caller's context before
// unlocking. Calls on a stream or event handle, which carry their context, go straight to
// the driver.
//
// # Errors
//
// A driver failure is a [*CallError] naming the entry point, wrapping a [Result] that
// matches sentinels such as [ErrInvalidHandle] with errors.Is.
package streams
