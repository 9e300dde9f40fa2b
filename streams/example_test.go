package streams_test

import (
	"fmt"
	"sync"

	"github.com/streambridge/streambridge/streams"
)

// Two streams ordered by WaitStream; host functions show the order. This runs on the
// software driver so that it runs everywhere; streams.Default() picks the real one.
func ExampleStream_WaitStream() {
	dev, _ := streams.Sim().Device(0)
	ctx, _ := dev.PrimaryContext()
	defer ctx.Close()
	producer, _ := ctx.NewStream(streams.StreamOptions{NonBlocking: true})
	defer producer.Close()
	consumer, _ := ctx.NewStream(streams.StreamOptions{NonBlocking: true})
	defer consumer.Close()

	var mu sync.Mutex
	say := func(s string) func() { return func() { mu.Lock(); fmt.Println(s); mu.Unlock() } }
	_ = producer.LaunchHostFunc(say("produced"))
	_ = consumer.WaitStream(producer)
	_ = consumer.LaunchHostFunc(say("consumed"))
	_ = consumer.Synchronize()
	// Output:
	// produced
	// consumed
}

// A stream another library created is borrowed: its context and device come from the
// handle, and Close leaves it alive.
func ExampleDriver_WrapStream() {
	d := streams.Sim()
	dev, _ := d.Device(1)
	ctx, _ := dev.PrimaryContext()
	defer ctx.Close()
	theirs, _ := ctx.NewStream(streams.StreamOptions{}) // stands in for torch.cuda.Stream()
	defer theirs.Close()

	s, err := d.WrapStream(theirs.Handle())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("device", s.Device().Ordinal(), "owned", s.Owned())
	_ = s.Close()
	done, _ := theirs.Query()
	fmt.Println("still usable:", done)
	// Output:
	// device 1 owned false
	// still usable: true
}

// Work captured once and replayed.
func ExampleStream_BeginCapture() {
	dev, _ := streams.Sim().Device(0)
	ctx, _ := dev.PrimaryContext()
	defer ctx.Close()
	s, _ := ctx.NewStream(streams.StreamOptions{NonBlocking: true})
	defer s.Close()

	n := 0
	_ = s.BeginCapture(streams.CaptureGlobal)
	_ = s.LaunchHostFunc(func() { n++ })
	g, _ := s.EndCapture()
	defer g.Close()
	exec, _ := g.Instantiate()
	defer exec.Close()
	for range 3 {
		_ = exec.Launch(s)
	}
	_ = s.Synchronize()
	fmt.Println(n)
	// Output: 3
}

// Launching a kernel needs the real driver, so this example has no output to check.
func ExampleFunction_Launch() {
	d, err := streams.CUDA()
	if err != nil {
		fmt.Println(err)
		return
	}
	dev, _ := d.Device(0)
	ctx, _ := dev.PrimaryContext()
	defer ctx.Close()
	mod, _ := ctx.LoadModuleFile("kernels.ptx")
	fill, _ := mod.Function("fill")
	buf, _ := ctx.Alloc(1024 * 4)
	s, _ := ctx.NewStream(streams.StreamOptions{})
	args := new(streams.Args).Pointer(buf.Ptr()).Uint32(1024).Float32(2).Float64(1).Int64(0)
	_ = fill.Launch(s, streams.LaunchConfig{Grid: streams.Dim3{X: 4}, Block: streams.Dim3{X: 256}}, args)
	out := make([]float32, 1024)
	_ = streams.CopyFromDeviceAsync(out, buf, s)
	_ = s.Synchronize()
}
