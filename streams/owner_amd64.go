package streams

import "github.com/streambridge/streambridge/internal/driver"

// goroutine identifies the calling goroutine (its runtime g, which a goroutine keeps for
// its life; an exited goroutine's may be handed to a new one, which then owns what it
// owned: the old one has no call in flight).
func goroutine() uintptr { return driver.Goroutine() }
