package sim

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/streambridge/streambridge/internal/driver"
)

// The software driver makes a C function for each of driver.EntryNames and for no other
// name: one it made beyond them would never be offered (Entry answers 0, as the real
// driver's does), and a test calling it would pass here and panic on the GPU.
func TestEntryMakesExactlyTheEntryNames(t *testing.T) {
	New().Entry(driver.EntryNames[0])
	assert.ElementsMatch(t, driver.EntryNames, slices.Collect(maps.Keys(entries)))
}
