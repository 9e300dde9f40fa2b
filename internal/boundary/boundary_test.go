package boundary

import (
	"os"
	"path/filepath"
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
