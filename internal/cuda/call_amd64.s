#include "textflag.h"

// trampoline calls a C function with the System V AMD64 ABI, on the system stack where
// runtime.cgocall puts it. DI points to a frame (call_amd64.go): fn, a1..a11, r.
// Arguments 1-6 go in registers, 7-11 on the stack; the result is stored back in the frame.
TEXT trampoline<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	MOVQ  SP, BP
	PUSHQ R12
	PUSHQ R13
	SUBQ  $48, SP       // 5 stack arguments, 16-byte aligned at the CALL
	MOVQ  DI, R12
	MOVQ  56(R12), AX
	MOVQ  AX, 0(SP)     // a7
	MOVQ  64(R12), AX
	MOVQ  AX, 8(SP)     // a8
	MOVQ  72(R12), AX
	MOVQ  AX, 16(SP)    // a9
	MOVQ  80(R12), AX
	MOVQ  AX, 24(SP)    // a10
	MOVQ  88(R12), AX
	MOVQ  AX, 32(SP)    // a11
	MOVQ  8(R12), DI    // a1
	MOVQ  16(R12), SI   // a2
	MOVQ  24(R12), DX   // a3
	MOVQ  32(R12), CX   // a4
	MOVQ  40(R12), R8   // a5
	MOVQ  48(R12), R9   // a6
	MOVQ  0(R12), R11   // fn
	XORL  AX, AX        // no vector registers used (variadic convention)
	CALL  R11
	MOVQ  AX, 96(R12)   // r
	ADDQ  $48, SP
	POPQ  R13
	POPQ  R12
	POPQ  BP
	RET

GLOBL ·trampolineABI0(SB), NOPTR|RODATA, $8
DATA ·trampolineABI0(SB)/8, $trampoline<>(SB)

// trampoline2 calls fn1(a1, a2) and, if it returned CUDA_SUCCESS, fn2(b1, b2, b3): two
// driver calls for one crossing. Frame: fn1 at 0, a1 8, a2 16, fn2 24, b1 32, b2 40, b3 48;
// the result of the last call made goes to 96 and the number of calls made to 104.
TEXT trampoline2<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	MOVQ  SP, BP
	PUSHQ R12
	PUSHQ R13           // 16-byte aligned at the CALLs
	MOVQ  DI, R12
	MOVQ  8(R12), DI
	MOVQ  16(R12), SI
	MOVQ  0(R12), R11
	XORL  AX, AX
	CALL  R11
	MOVQ  AX, 96(R12)
	MOVQ  $1, 104(R12)
	TESTL AX, AX        // CUresult is a 32-bit int
	JNE   done
	MOVQ  32(R12), DI
	MOVQ  40(R12), SI
	MOVQ  48(R12), DX
	MOVQ  24(R12), R11
	XORL  AX, AX
	CALL  R11
	MOVQ  AX, 96(R12)
	MOVQ  $2, 104(R12)
done:
	POPQ  R13
	POPQ  R12
	POPQ  BP
	RET

GLOBL ·trampoline2ABI0(SB), NOPTR|RODATA, $8
DATA ·trampoline2ABI0(SB)/8, $trampoline2<>(SB)
