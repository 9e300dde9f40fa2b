package driver

// Goroutine identifies the calling goroutine: its runtime g, which a goroutine keeps for
// its life (an exited goroutine's may be handed to a new one). Streams count an owner's
// uses by it (streams/uses.go), and InHostFunc knows a host function's caller by it.
func Goroutine() uintptr

// caller is how InHostFunc knows the goroutine that runs a host function: by its g, with no
// system call.
func caller() uintptr { return Goroutine() }
