package boundary

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
