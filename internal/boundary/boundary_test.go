package boundary

import (
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
	m := driver.StreamMemory{BackAt: 1, CtxAt: 2, IDAt: 3, Words: 4, Lo: 5, Hi: 6}
	words := StreamMemoryWords(m)
	require.Len(t, words, len(StreamMemoryFields))
	byName := map[string]uint64{}
	for i, n := range StreamMemoryFields {
		byName[n] = words[i]
	}
	assert.Equal(t, map[string]uint64{"BACK": 1, "CTX": 2, "ID": 3, "WORDS": 4, "LO": 5, "HI": 6}, byName)
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
