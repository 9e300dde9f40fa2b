#include "textflag.h"

// The calling goroutine, for the owner's half of a use count (uses.go), read where the
// runtime keeps it for assembly: the g register's home in thread-local storage.

// goroutine() uintptr: the calling goroutine.
TEXT ·goroutine(SB), NOSPLIT, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
