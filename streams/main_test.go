package streams

import (
	"fmt"
	"os"
	"testing"
)

// TestMain says, even without -v, when the real-driver half of the suite did not run.
func TestMain(m *testing.M) {
	code := m.Run()
	if _, err := loadCUDA(); err != nil && !requireGPU {
		fmt.Fprintf(os.Stderr, "\n*** streambridge: the real-driver (cuda) half of every behavioural test was SKIPPED: %v\n"+
			"*** Only the software driver was tested here. On a GPU machine run with STREAMBRIDGE_REQUIRE_GPU=1.\n\n", err)
	}
	os.Exit(code)
}
