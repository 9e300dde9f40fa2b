package cuda

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// Every call of an entry point the driver may call back into Go during (driver.CallsBack)
// goes through callReentrant, whose frame a callback cannot move, and callReentrant calls
// no other: one spelling per entry point, read from the one table, so that the next entry
// point cannot lose its result as cuStreamEndCapture once did (commits bc2b837, 32768e9).
func TestEntryPointsThatCallBackGoThroughTheReentrantCall(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(packageDir(t), "*.go"))
	require.NoError(t, err)
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		parsed = append(parsed, f)
	}
	// the variable each entry point's address is kept in, from the addresses table
	entryOf := map[string]driver.EntryPoint{}
	byName := map[string]driver.EntryPoint{}
	for _, e := range driver.EntryPoints {
		byName[e.Name] = e
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			key, ok1 := kv.Key.(*ast.BasicLit)
			addr, ok2 := kv.Value.(*ast.UnaryExpr)
			if ok1 && ok2 && key.Kind == token.STRING {
				name, _ := strconv.Unquote(key.Value)
				if v, ok := addr.X.(*ast.Ident); ok {
					entryOf[v.Name] = byName[name]
				}
			}
			return true
		})
	}
	require.Len(t, entryOf, len(driver.EntryPoints), "the addresses table names every entry point's variable")

	calls := map[string]bool{"call": true, "callIn": true, "callOut": true, "callOutIn": true, "callOut2In": true,
		"callRelaxedIn": true, "callPairIn": true, "callReentrant": true, "callReentrantRelaxedIn": true, "callOutRelaxed": true}
	seen := 0
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fun, ok := c.Fun.(*ast.Ident)
			if !ok || !calls[fun.Name] {
				return true
			}
			for _, arg := range c.Args {
				v, ok := arg.(*ast.Ident)
				if !ok {
					continue
				}
				e, ok := entryOf[v.Name]
				if !ok {
					continue
				}
				seen++
				callsBack := e.Flags&driver.CallsBack != 0
				assert.Equal(t, callsBack, strings.HasPrefix(fun.Name, "callReentrant"), "%s: %s(%s, ...): %s is %s",
					fset.Position(c.Pos()), fun.Name, v.Name, e.Name, map[bool]string{true: "CallsBack", false: "not CallsBack"}[callsBack])
			}
			return true
		})
	}
	assert.Greater(t, seen, 50, "the calls were found")
}

// packageDir is this package's source folder: the test binary may run from elsewhere in the
// module (scripts/gpu-check.sh runs every binary from streams/), so it is found from the
// module's root, the first folder up from here with a go.mod.
func packageDir(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "internal", "cuda")
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the working folder")
		dir = parent
	}
}
