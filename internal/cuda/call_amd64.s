#include "textflag.h"

// The frame (call_amd64.go) that trampoline reads and writes.
#define F_FN 0
#define F_R 96
#define F_CTX 120
#define F_PREV 128
#define F_FN2 136
#define F_B1 144
#define F_B2 152
#define F_B3 160
#define F_CALLS 168
#define F_RELAX 176
#define F_MODE 184
#define CAPTURE_MODE_RELAXED 2

// trampoline runs on the system stack, where runtime.cgocall puts it, with DI pointing to
// a frame, and calls C with the System V AMD64 ABI:
//
//	if ctx != 0 and ctx is not current: cuCtxSetCurrent(ctx)
//	if relax != 0: cuThreadExchangeStreamCaptureMode(&mode), mode = relaxed
//	r = fn(a1..a11)                 arguments 1-6 in registers, 7-11 on the stack
//	if r == 0 and fn2 != 0: r = fn2(b1, b2, b3)
//	if relax != 0: cuThreadExchangeStreamCaptureMode(&mode), the mode before
//	restore the previous current context if it was changed
//
// All of it happens on one OS thread inside one cgocall, so the caller's thread is left
// with the context it had, and no goroutine can see the switch.
TEXT trampoline<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	MOVQ  SP, BP
	PUSHQ R12
	PUSHQ R13
	SUBQ  $48, SP                  // 5 stack arguments; 16-byte aligned at each CALL
	MOVQ  DI, R12
	MOVQ  $0, F_CALLS(R12)
	MOVQ  F_CTX(R12), AX
	TESTQ AX, AX
	JZ    relax
	LEAQ  F_PREV(R12), DI
	MOVQ  ·cuCtxGetCurrent(SB), R11
	XORL  AX, AX
	CALL  R11
	TESTL AX, AX                   // CUresult is a 32-bit int
	JNE   failed
	MOVQ  F_PREV(R12), R13
	CMPQ  R13, F_CTX(R12)
	JEQ   relax
	MOVQ  F_CTX(R12), DI
	MOVQ  ·cuCtxSetCurrent(SB), R11
	XORL  AX, AX
	CALL  R11
	TESTL AX, AX
	JNE   failed

relax:
	MOVQ  F_RELAX(R12), AX
	TESTQ AX, AX
	JZ    first
	MOVQ  $CAPTURE_MODE_RELAXED, F_MODE(R12)
	LEAQ  F_MODE(R12), DI
	MOVQ  ·cuThreadExchangeStreamCaptureMode(SB), R11
	XORL  AX, AX
	CALL  R11
	TESTL AX, AX
	JEQ   first
	MOVQ  AX, F_R(R12)
	MOVQ  $0, F_RELAX(R12)         // the mode was not changed: nothing to put back
	JMP   restore

first:
	MOVQ  56(R12), AX
	MOVQ  AX, 0(SP)                // a7
	MOVQ  64(R12), AX
	MOVQ  AX, 8(SP)                // a8
	MOVQ  72(R12), AX
	MOVQ  AX, 16(SP)               // a9
	MOVQ  80(R12), AX
	MOVQ  AX, 24(SP)               // a10
	MOVQ  88(R12), AX
	MOVQ  AX, 32(SP)               // a11
	MOVQ  8(R12), DI               // a1
	MOVQ  16(R12), SI              // a2
	MOVQ  24(R12), DX              // a3
	MOVQ  32(R12), CX              // a4
	MOVQ  40(R12), R8              // a5
	MOVQ  48(R12), R9              // a6
	MOVQ  F_FN(R12), R11
	XORL  AX, AX                   // no vector registers (variadic convention)
	CALL  R11
	MOVQ  AX, F_R(R12)
	MOVQ  $1, F_CALLS(R12)
	TESTL AX, AX
	JNE   restore
	MOVQ  F_FN2(R12), R11
	TESTQ R11, R11
	JZ    restore
	MOVQ  F_B1(R12), DI
	MOVQ  F_B2(R12), SI
	MOVQ  F_B3(R12), DX
	XORL  AX, AX
	CALL  R11
	MOVQ  AX, F_R(R12)
	MOVQ  $2, F_CALLS(R12)

restore:
	MOVQ  F_RELAX(R12), AX
	TESTQ AX, AX
	JZ    context
	LEAQ  F_MODE(R12), DI          // the mode the thread had before
	MOVQ  ·cuThreadExchangeStreamCaptureMode(SB), R11
	XORL  AX, AX
	CALL  R11

context:
	MOVQ  F_CTX(R12), AX
	TESTQ AX, AX
	JZ    done
	CMPQ  R13, AX
	JEQ   done
	MOVQ  R13, DI
	MOVQ  ·cuCtxSetCurrent(SB), R11
	XORL  AX, AX
	CALL  R11

done:
	ADDQ  $48, SP
	POPQ  R13
	POPQ  R12
	POPQ  BP
	RET

failed:
	MOVQ  AX, F_R(R12)
	JMP   done

GLOBL ·trampolineABI0(SB), NOPTR|RODATA, $8
DATA ·trampolineABI0(SB)/8, $trampoline<>(SB)

// load64 returns the word at addr. A fault here is a fault in Go code: under
// debug.SetPanicOnFault it becomes a panic its caller recovers (validate.go).
TEXT ·load64(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ (AX), AX
	MOVQ AX, ret+8(FP)
	RET
