package bridge_test

import (
	"fmt"

	"github.com/streambridge/streambridge/bridge"
	"github.com/streambridge/streambridge/streams"
)

// A handle from another framework: its device comes from the handle, and a device stated
// wrongly is an error. On the software driver, so that it runs everywhere.
func ExampleBridge_Stream() {
	d := streams.Sim()
	b, _ := bridge.New(d) // an error only where d is nil
	defer b.Close()
	dev, _ := d.Device(1)
	ctx, _ := dev.PrimaryContext()
	defer ctx.Close()
	theirs, _ := ctx.NewStream(streams.StreamOptions{}) // stands in for torch.cuda.Stream(device=1)
	defer theirs.Close()

	s, _ := b.Stream(theirs.Handle(), bridge.Options{})
	fmt.Println("device", s.Device().Ordinal())
	_, err := b.Stream(theirs.Handle(), bridge.Options{Device: bridge.OnDevice(0)})
	fmt.Println(err != nil)
	_, err = b.Stream(0xdeadbeef, bridge.Options{})
	fmt.Println(err != nil)
	_, err = b.Stream(0, bridge.Options{Convention: bridge.ArrayInterface})
	fmt.Println(err == bridge.ErrAmbiguousHandle)
	// Output:
	// device 1
	// true
	// true
	// true
}
