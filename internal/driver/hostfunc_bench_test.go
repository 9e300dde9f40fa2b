package driver

import (
	"sync"
	"testing"
)

// BenchmarkRunHostFunc is the Go side of one host function the driver runs: its key looked
// up and freed, the calling thread marked as inside a host function, the function, the
// mark taken off (RegisterHostFunc's cost, the launch side, included).
func BenchmarkRunHostFunc(b *testing.B) {
	fn := func() {}
	b.ReportAllocs()
	for b.Loop() {
		RunHostFunc(RegisterHostFunc(fn, false))
	}
}

// BenchmarkInHostFuncWhileOneRuns is the question every call into the driver asks
// (InHostFunc) while a host function runs on another thread: the case that cannot be
// answered by the one atomic load.
func BenchmarkInHostFuncWhileOneRuns(b *testing.B) {
	inside, leave := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		RunHostFunc(RegisterHostFunc(func() { close(inside); <-leave }, false))
	}()
	<-inside
	b.ReportAllocs()
	for b.Loop() {
		if InHostFunc() {
			b.Fatal("InHostFunc reported true outside any host function")
		}
	}
	b.StopTimer()
	close(leave)
	wg.Wait()
}
