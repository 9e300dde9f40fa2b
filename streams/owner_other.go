//go:build !amd64

package streams

// Elsewhere no goroutine owns an object: every call takes the shared count (uses.go).

func goroutine() uintptr { return 1 } // never an owner: none is set here (fencesWork)
