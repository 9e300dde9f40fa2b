package streams

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parsePackage reads a folder's Go files, tests left out, with their comments.
func parsePackage(t *testing.T, dir string) []*ast.File {
	t.Helper()
	var files []*ast.File
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	require.NoError(t, err)
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	return files
}

// An alias of an internal type shows in go doc without the type's methods and fields: its
// comment names each, and this fails when one is added there and not here.
func TestAliasesNameTheirMethodsAndFields(t *testing.T) {
	aliased := map[string]reflect.Type{
		"Result":         reflect.TypeFor[Result](),
		"DevicePtr":      reflect.TypeFor[DevicePtr](),
		"IPCEventHandle": reflect.TypeFor[IPCEventHandle](),
		"HostFuncPanic":  reflect.TypeFor[*HostFuncPanic](),
		"CaptureMode":    reflect.TypeFor[CaptureMode](),
		"CaptureStatus":  reflect.TypeFor[CaptureStatus](),
		"CompileError":   reflect.TypeFor[*CompileError](),
	}
	docs := map[string]string{}
	for _, f := range parsePackage(t, ".") {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if ts.Assign.IsValid() && ts.Name.IsExported() {
					docs[ts.Name.Name] = g.Doc.Text() + ts.Doc.Text()
				}
			}
		}
	}
	names := func(m map[string]reflect.Type) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	var found []string
	for k := range docs {
		found = append(found, k)
	}
	slices.Sort(found)
	require.Equal(t, names(aliased), found, "every exported alias is listed here")
	for name, typ := range aliased {
		doc := docs[name]
		for i := range typ.NumMethod() {
			assert.Contains(t, doc, typ.Method(i).Name+"()", "%s's comment names its method %s", name, typ.Method(i).Name)
		}
		if typ.Kind() == reflect.Pointer && typ.Elem().Kind() == reflect.Struct {
			for i := range typ.Elem().NumField() {
				if f := typ.Elem().Field(i); f.IsExported() {
					assert.Contains(t, doc, f.Name+" ", "%s's comment names its field %s", name, f.Name)
				}
			}
		}
	}
}

// Every exported field of an exported struct in streams and bridge has a comment.
func TestExportedFieldsAreDocumented(t *testing.T) {
	for _, dir := range []string{".", "../bridge"} {
		for _, f := range parsePackage(t, dir) {
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return true
				}
				for _, field := range st.Fields.List {
					for _, id := range field.Names {
						if id.IsExported() {
							assert.True(t, field.Doc != nil || field.Comment != nil, "%s: %s.%s has no comment", dir, ts.Name.Name, id.Name)
						}
					}
				}
				return true
			})
		}
	}
}
