// Command hello is the first Go program of docs/go.md: one stream waits for another's work, a
// host function runs in stream order, and a handle from elsewhere is proven a live stream
// (or refused) before the driver sees it. Where there is no GPU, run it on the software
// driver: STREAMBRIDGE_DRIVER=sim go run ./examples/hello
package main

import (
	"errors"
	"fmt"
	"log"

	"github.com/streambridge/streambridge/bridge"
	"github.com/streambridge/streambridge/streams"
)

func main() {
	d, err := streams.Default() // the real driver; STREAMBRIDGE_DRIVER=sim picks the software one
	if err != nil {
		log.Fatal(err) // errors.Is(err, streams.ErrNoDriver) where there is no libcuda
	}
	dev, err := d.Device(0)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.PrimaryContext() // retained; Close releases it
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	producer, err := ctx.NewStream(streams.StreamOptions{NonBlocking: true}) // owned: Close destroys it
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	consumer, err := ctx.NewStream(streams.StreamOptions{NonBlocking: true})
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()

	must(producer.LaunchHostFunc(func() { fmt.Println("the producer's work is done") }))
	must(consumer.WaitStream(producer)) // the consumer's later work waits for the producer's so far
	must(consumer.Synchronize())

	// A handle another framework gave you (torch's cuda_stream, CuPy's ptr, ...), with bridge:
	b, err := bridge.New(d)
	must(err)
	defer b.Close()
	theirs, err := b.Stream(producer.Handle(), bridge.Options{}) // proven live; its device read from it
	must(err)
	defer theirs.Close()
	_, err = b.Stream(0xdeadbeef, bridge.Options{}) // garbage: an error, never a crash
	fmt.Println("device", theirs.Device().Ordinal(), "garbage refused:", errors.Is(err, streams.ErrInvalidHandle))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
