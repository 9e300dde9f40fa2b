// Package kernels holds the small PTX kernels that tests, benchmarks and the demo launch:
// written in PTX so that nothing needs a CUDA compiler to build.
package kernels

import _ "embed"

// PTX is kernels.ptx: empty(), fill(out, n, a, b, off) and spin(ns).
//
//go:embed kernels.ptx
var PTX []byte
