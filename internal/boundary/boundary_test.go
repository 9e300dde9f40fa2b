package boundary

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

func TestGeneratedFilesAreCurrent(t *testing.T) {
	for path, want := range Generated() {
		t.Run(path, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join("..", "..", path))
			require.NoError(t, err)
			assert.Equal(t, want, string(got), "%s is stale: run `go generate ./internal/boundary`", path)
		})
	}
}

func TestEveryKindIsDescribed(t *testing.T) {
	for kind, k := range ErrorKinds {
		assert.NotEmpty(t, k.Name, "error kind %d", kind)
		assert.NotEmpty(t, k.Python, "error kind %d", kind)
	}
	assert.Len(t, ErrorKinds, int(KindInCallback)+1, "the last kind is described")
	assert.Equal(t, "graph", ObjectGraph.Name())
	assert.Equal(t, "unknown object", ObjectKind(0).Name())
}

func TestStreamMemoryWordsFollowTheirNames(t *testing.T) {
	m := driver.StreamMemory{BackAt: 1, CtxAt: 2, IDAt: 3, Words: 4, ObjVia: 7, IDVia: -1, Lo: 5, Hi: 6}
	words := StreamMemoryWords(m)
	require.Len(t, words, len(StreamMemoryFields))
	byName := map[string]uint64{}
	for i, n := range StreamMemoryFields {
		byName[n] = words[i]
	}
	assert.Equal(t, map[string]uint64{"BACK": 1, "CTX": 2, "ID": 3, "WORDS": 4, "OBJ_VIA": 7, "ID_VIA": 1<<64 - 1,
		"LO": 5, "HI": 6}, byName, "-1 (none) as 2^64-1, which the C core reads back as -1")
}

func TestEventMemoryWordsFollowTheirNames(t *testing.T) {
	m := driver.EventMemory{CtxAt: 1, IDAt: 2, NextAt: 3, PrevAt: 4, Words: 5, ObjVia: 8, BackAt: 9, IDVia: -1, Lo: 6, Hi: 7}
	words := EventMemoryWords(m)
	require.Len(t, words, len(EventMemoryFields))
	byName := map[string]uint64{}
	for i, n := range EventMemoryFields {
		byName[n] = words[i]
	}
	assert.Equal(t, map[string]uint64{"CTX": 1, "ID": 2, "NEXT": 3, "PREV": 4, "WORDS": 5, "OBJ_VIA": 8, "BACK": 9,
		"ID_VIA": 1<<64 - 1, "LO": 6, "HI": 7}, byName, "-1 (none) as 2^64-1")
}

// Every environment variable the Go core reads is one the Python package hands over: a
// setting read in Go and missing from Settings would be ignored when set from os.environ.
func TestSettingsNameEveryVariableTheGoCoreReads(t *testing.T) {
	read := regexp.MustCompile(`os\.Getenv\("([A-Z_]+)"\)`)
	found := map[string]bool{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != root && (e.Name() == "build" || e.Name() == "testdrivers" || strings.HasPrefix(e.Name(), ".")) {
			return filepath.SkipDir // built copies, and the test-only GPU requirement
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range read.FindAllStringSubmatch(string(src), -1) {
				found[m[1]] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, found, "the sources were read")
	for name := range found {
		assert.Contains(t, Settings, name, "read by the Go core but not handed over from Python")
	}
}

// _core.py declares each pyshim function it calls with Python types (gopy's wrappers carry
// none); they must be the Go function's: this fails when one is changed and not the other.
func TestCoreDeclaresGoCallsWithTheirGoTypes(t *testing.T) {
	py := map[string]string{"int": "int", "int64": "int", "uint64": "int", "bool": "bool", "string": "str"}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "pyshim", "pyshim.go"), nil, 0)
	require.NoError(t, err)
	goTypes := map[string]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !fn.Name.IsExported() {
			continue
		}
		var params, results []string
		for _, p := range fn.Type.Params.List {
			for range max(len(p.Names), 1) {
				params = append(params, py[types.ExprString(p.Type)])
			}
		}
		if fn.Type.Results != nil {
			for _, r := range fn.Type.Results.List {
				if s := types.ExprString(r.Type); s != "error" {
					results = append(results, py[s])
				}
			}
		}
		require.Len(t, results, 1, "pyshim.%s returns one value (and an error)", fn.Name.Name)
		goTypes[fn.Name.Name] = "Callable[[" + strings.Join(params, ", ") + "], " + results[0] + "]"
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "python", "streambridge", "_core.py"))
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^\w+: (Callable\[.*\]) = (?:_go\()?_native\.pyshim_(\w+)\)?`)
	found := decl.FindAllStringSubmatch(string(src), -1)
	require.NotEmpty(t, found)
	for _, m := range found {
		want, ok := goTypes[m[2]]
		if assert.True(t, ok, "_core.py calls pyshim.%s, which pyshim.go does not have", m[2]) {
			assert.Equal(t, want, m[1], "_core.py's declaration of pyshim.%s", m[2])
		}
	}
}

func TestEverySpecialStreamIsNamed(t *testing.T) {
	require.Len(t, SpecialStreams, int(MaxSpecialStream)+1, "one name for each of 0 to MaxSpecialStream")
}
