package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docs/go.md shows this program whole, so what it shows compiles and runs.
func TestTheDocsShowThisProgram(t *testing.T) {
	doc, err := os.ReadFile("../../docs/go.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "```go\n"+string(src)+"```\n")
}

func TestItRunsOnTheSoftwareDriver(t *testing.T) {
	if os.Getenv("STREAMBRIDGE_HELLO_CHILD") == "1" {
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestItRunsOnTheSoftwareDriver$")
	cmd.Env = append(os.Environ(), "STREAMBRIDGE_HELLO_CHILD=1", "STREAMBRIDGE_DRIVER=sim")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.True(t, strings.HasPrefix(string(out), "the producer's work is done\ndevice 0 garbage refused: true\n"), string(out))
}
