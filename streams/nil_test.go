package streams

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every exported method of every exported type, called on a nil pointer and on a zero
// value (one this package did not make) with zero arguments: none panics, and each that
// returns an error returns one (ErrNil for a nil or zero object, where that is what is
// wrong).
func TestNilAndZeroValuesGetErrorsNotPanics(t *testing.T) {
	values := []any{
		(*Stream)(nil), &Stream{},
		(*Event)(nil), &Event{},
		(*Graph)(nil), &Graph{},
		(*GraphExec)(nil), &GraphExec{},
		(*Module)(nil), &Module{},
		(*Function)(nil), &Function{},
		(*Buffer)(nil), &Buffer{},
		(*Context)(nil), &Context{},
		(*Device)(nil), &Device{},
		(*Driver)(nil), &Driver{},
		(*Args)(nil),
		(*Program)(nil),
	}
	errType := reflect.TypeOf((*error)(nil)).Elem()
	for _, v := range values {
		rv := reflect.ValueOf(v)
		kind := "zero"
		if rv.IsNil() {
			kind = "nil"
		}
		for i := range rv.NumMethod() {
			m := rv.Type().Method(i)
			name := fmt.Sprintf("%s %s.%s", kind, rv.Type().Elem().Name(), m.Name)
			t.Run(name, func(t *testing.T) {
				args := make([]reflect.Value, m.Type.NumIn()-1)
				for j := range args {
					args[j] = reflect.Zero(m.Type.In(j + 1))
				}
				var out []reflect.Value
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("panicked: %v", p)
						}
					}()
					if m.Type.IsVariadic() {
						out = rv.Method(i).CallSlice(args)
					} else {
						out = rv.Method(i).Call(args)
					}
				}()
				for _, o := range out {
					if o.Type() == errType && !o.IsNil() {
						err := o.Interface().(error)
						assert.NotEmpty(t, err.Error())
						if errors.Is(err, ErrNil) {
							return
						}
					}
				}
			})
		}
	}
}
