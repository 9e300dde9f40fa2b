#include "textflag.h"

// The C entry points of callback_linux_amd64.go. crosscall2 is runtime/cgo's, or purego's
// stand-in for it without cgo: it saves C's callee-saved registers and calls
// runtime.cgocallback(fn, frame, ctxt).

// hostFuncEntry(userData) is the CUhostFn of every host function: the driver calls it on
// its own thread with userData in DI, which it hands to runHostFuncFrame as a one-word
// frame on this (C) stack.
TEXT hostFuncEntry<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ DI                        // the frame; SP is 16-byte aligned again, as C wants at a call
	MOVQ  SP, SI                    // frame
	MOVQ  ·runHostFuncCall(SB), DI  // a func value: its first word is the function's PC
	MOVQ  (DI), DI                  // fn
	XORQ  DX, DX
	XORQ  CX, CX                    // ctxt
	CALL  crosscall2(SB)
	POPQ  DI
	RET

// bindm(g0) stores g0 as this thread's value of the key (runtime.cgoBindM calls it through
// asmcgocall, the argument in DI): pthread_setspecific(key, g0), a tail call.
TEXT bindm<>(SB), NOSPLIT|NOFRAME, $0
	MOVQ DI, SI
	MOVQ ·threadKey(SB), DI
	MOVQ ·pthreadSetspecific(SB), AX
	JMP  AX

// keyDestructor(g0) runs as a thread that called into Go exits: crosscall2(nil, g0, 0, 0),
// which runtime.cgocallback takes as "give this thread's M back" (dropm).
TEXT keyDestructor<>(SB), NOSPLIT|NOFRAME, $0
	MOVQ DI, SI
	XORQ DI, DI
	XORQ DX, DX
	XORQ CX, CX
	JMP  crosscall2(SB)

GLOBL ·hostFuncEntryABI0(SB), NOPTR|RODATA, $8
DATA ·hostFuncEntryABI0(SB)/8, $hostFuncEntry<>(SB)
GLOBL ·bindmABI0(SB), NOPTR|RODATA, $8
DATA ·bindmABI0(SB)/8, $bindm<>(SB)
GLOBL ·keyDestructorABI0(SB), NOPTR|RODATA, $8
DATA ·keyDestructorABI0(SB)/8, $keyDestructor<>(SB)
