#include "textflag.h"

// The calling goroutine: its runtime g, read where the runtime keeps it for assembly (the
// g register's home in thread-local storage).

// Goroutine() uintptr: the calling goroutine.
TEXT ·Goroutine(SB), NOSPLIT, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
