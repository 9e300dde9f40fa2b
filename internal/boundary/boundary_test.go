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

func TestKindsAreIndexedByValue(t *testing.T) {
	for i, k := range ErrorKinds {
		assert.Equal(t, ErrorKind(i), k.Kind, k.Name)
	}
	assert.Equal(t, "event", ObjectEvent.Name())
	assert.Equal(t, "unknown object", ObjectKind(0).Name())
}
