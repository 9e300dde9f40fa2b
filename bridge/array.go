package bridge

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/streambridge/streambridge/streams"
)

// Array is a device array as its framework describes it (the CUDA Array Interface or
// DLPack): what a Go function called from Python receives for a torch tensor, a CuPy array
// or a cuda.core buffer. The Python package (streambridge.go_function) reads the framework's
// description and hands it over as text, [Array.String]'s form; [ParseArray] reads it back.
type Array struct {
	Ptr streams.DevicePtr // the first element's address (DLPack's data + byte_offset)
	// DType is the NumPy type string: "<f4", "<i8", "|b1", "<c8"; DLPack's bfloat16,
	// which NumPy lacks, is "bfloat16".
	DType string
	Shape []int // elements along each dimension; empty for a scalar
	// Strides are in bytes, one per dimension, always given: a C-contiguous array's are
	// filled in where the framework left them out.
	Strides []int
	// Device is the array's device ordinal; -1 where the framework did not say (an object
	// with a CUDA Array Interface but no DLPack, such as a Numba array).
	Device   int
	ReadOnly bool // the framework says the data must not be written
}

// ParseArray reads an array from its text form:
//
//	array device=0 ptr=0x7f2a40000000 dtype=<f4 shape=2,3 strides=12,4 readonly=false
func ParseArray(text string) (Array, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 || fields[0] != "array" {
		return Array{}, fmt.Errorf("bridge: %q is not an array (want \"array device=... ptr=...\", as streambridge.go_function passes)", text)
	}
	var a Array
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		key, value, ok := strings.Cut(f, "=")
		if !ok || seen[key] {
			return Array{}, fmt.Errorf("bridge: array field %q is malformed or repeated", f)
		}
		seen[key] = true
		var err error
		switch key {
		case "device":
			a.Device, err = strconv.Atoi(value)
		case "ptr":
			var p uint64
			p, err = strconv.ParseUint(value, 0, 64)
			a.Ptr = streams.DevicePtr(p)
		case "dtype":
			a.DType = value
		case "shape":
			a.Shape, err = ints(value)
		case "strides":
			a.Strides, err = ints(value)
		case "readonly":
			a.ReadOnly, err = strconv.ParseBool(value)
		default:
			err = fmt.Errorf("unknown field")
		}
		if err != nil {
			return Array{}, fmt.Errorf("bridge: array field %q: %w", f, err)
		}
	}
	for _, key := range []string{"device", "ptr", "dtype", "shape", "strides"} {
		if !seen[key] {
			return Array{}, fmt.Errorf("bridge: array %q has no %s", text, key)
		}
	}
	if len(a.Strides) != len(a.Shape) {
		return Array{}, fmt.Errorf("bridge: array %q has %d strides for %d dimensions", text, len(a.Strides), len(a.Shape))
	}
	if a.ItemSize() == 0 {
		return Array{}, fmt.Errorf("%w: array %q: dtype %q is not the NumPy type string of a GPU scalar "+
			"(b1; i or u 1, 2, 4, 8; f2, f4, f8; c8, c16; bfloat16)", ErrValue, text, a.DType)
	}
	if a.Device < -1 {
		return Array{}, fmt.Errorf("%w: array %q: device %d is neither -1 (unsaid) nor an ordinal", ErrValue, text, a.Device)
	}
	n := uint64(1)
	for _, d := range a.Shape {
		if d < 0 {
			return Array{}, fmt.Errorf("%w: array %q: a dimension of %d", ErrValue, text, d)
		}
		if d > 0 && n > math.MaxInt64/uint64(a.ItemSize())/uint64(d) {
			return Array{}, fmt.Errorf("%w: array %q: %v elements of %d bytes do not fit in 63 bits", ErrValue, text, a.Shape, a.ItemSize())
		}
		n *= uint64(d)
	}
	return a, nil
}

func ints(list string) ([]int, error) {
	if list == "" {
		return []int{}, nil // a 0-d array
	}
	parts := strings.Split(list, ",")
	out := make([]int, len(parts))
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// String is the text form ParseArray reads.
func (a Array) String() string {
	join := func(v []int) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = strconv.Itoa(x)
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprintf("array device=%d ptr=%#x dtype=%s shape=%s strides=%s readonly=%t",
		a.Device, uint64(a.Ptr), a.DType, join(a.Shape), join(a.Strides), a.ReadOnly)
}

// Len is the number of elements.
func (a Array) Len() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// ItemSize is the size of one element in bytes, from DType; 0 for a DType that names no GPU
// scalar (itemSizes).
func (a Array) ItemSize() int {
	if a.DType == "bfloat16" {
		return 2
	}
	if len(a.DType) < 3 || !strings.ContainsRune("<>|=", rune(a.DType[0])) {
		return 0
	}
	n, err := strconv.Atoi(a.DType[2:])
	if err != nil || !slices.Contains(itemSizes[a.DType[1]], n) {
		return 0
	}
	return n
}

// itemSizes are the sizes a GPU scalar of each NumPy kind comes in.
var itemSizes = map[byte][]int{'b': {1}, 'i': {1, 2, 4, 8}, 'u': {1, 2, 4, 8}, 'f': {2, 4, 8}, 'c': {8, 16}}

// Contiguous reports whether the elements lie in C order with no gaps.
func (a Array) Contiguous() bool {
	step := a.ItemSize()
	for i := len(a.Shape) - 1; i >= 0; i-- {
		if a.Shape[i] != 1 && a.Strides[i] != step {
			return false
		}
		step *= a.Shape[i]
	}
	return true
}

// Expect checks that the array is a C-contiguous array of dtype on s's device (where the
// array says its device), writable if write is set: what a kernel taking a plain pointer
// needs.
func (a Array) Expect(dtype string, s *streams.Stream, write bool) error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: Expect needs the stream the array will be used on", streams.ErrNil)
	case a.DType != dtype:
		return fmt.Errorf("bridge: array is %s, not %s", a.DType, dtype)
	case !a.Contiguous():
		return fmt.Errorf("bridge: array with shape %v and strides %v is not C-contiguous", a.Shape, a.Strides)
	case a.Device >= 0 && a.Device != s.Device().Ordinal():
		return fmt.Errorf("bridge: array is on device %d, stream %#x on device %d", a.Device, s.Handle(), s.Device().Ordinal())
	case write && a.ReadOnly:
		return fmt.Errorf("bridge: array is read-only")
	}
	return nil
}
