// Package plumbing hands the Python module's Go side (pyshim) what the streams package keeps
// out of its public API: a driver's raw entry points (C functions that trust every handle
// they are given) and where its stream and event objects lie in memory. Only packages of
// this module can import it; streams registers the accessor when it is initialized.
package plumbing

import "github.com/streambridge/streambridge/internal/driver"

var apiOf func(d any) driver.API

// Register is streams' accessor of a *streams.Driver's driver.API (nil for a nil or zero
// one).
func Register(f func(d any) driver.API) { apiOf = f }

// API is d's driver.API, for d a *streams.Driver; nil for a nil or zero one.
func API(d any) driver.API {
	if apiOf == nil {
		return nil
	}
	return apiOf(d)
}
