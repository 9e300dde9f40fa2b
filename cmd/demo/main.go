// Command demo shows the Go core at work: a producer, a transform and a consumer on three
// streams, ordered only by events; host callbacks reporting progress; the pipeline
// captured into a graph and replayed. On a GPU the stages are kernels and their results
// are checked; without one it says so and runs the same ordering on the software driver,
// with host functions in place of kernels.
//
//	go run ./cmd/demo
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/streambridge/streambridge/internal/kernels"
	"github.com/streambridge/streambridge/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	d, err := streams.Default()
	if errors.Is(err, streams.ErrNoDriver) {
		_, why := streams.CUDA()
		why = errors.Unwrap(why) // the reason alone, without CUDA's advice to use what the demo falls back to itself
		fmt.Printf("No CUDA driver here: %s.\n", strings.TrimPrefix(why.Error(), streams.ErrNoDriver.Error()+": "))
		fmt.Println("Running on the software driver: stream ordering, events, host callbacks and graph")
		fmt.Println("replay are real; no kernel runs, and none is pretended.")
		d = streams.Sim()
	} else if err != nil {
		return err
	}
	dev, err := d.Device(0)
	if err != nil {
		return err
	}
	name, _ := dev.Name()
	major, minor, _ := dev.ComputeCapability()
	fmt.Printf("driver %q, device 0: %s (compute capability %d.%d)\n", d.Name(), name, major, minor)
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return err
	}
	defer ctx.Close()

	p, err := newPipeline(ctx)
	if err != nil {
		return err
	}
	defer p.close()
	start := time.Now()
	if err := p.submit(); err != nil {
		return err
	}
	if err := p.consume.Synchronize(); err != nil {
		return err
	}
	fmt.Printf("pipeline ran in %v; order seen by host callbacks: %v\n", time.Since(start).Round(time.Microsecond), p.seen())
	if err := p.check(); err != nil {
		return err
	}
	return replay(ctx)
}

// pipeline: produce (slow) -> transform -> consume, each on its own non-blocking stream.
type pipeline struct {
	ctx                         *streams.Context
	produce, transform, consume *streams.Stream
	mod                         *streams.Module
	buf                         *streams.Buffer
	out                         []float32
	mu                          sync.Mutex
	order                       []string
}

const n = 1 << 20

func newPipeline(ctx *streams.Context) (*pipeline, error) {
	p := &pipeline{ctx: ctx}
	for _, s := range []**streams.Stream{&p.produce, &p.transform, &p.consume} {
		st, err := ctx.NewStream(streams.StreamOptions{NonBlocking: true})
		if err != nil {
			return nil, err
		}
		*s = st
	}
	if ctx.Driver().Name() == "cuda" {
		var err error
		if p.mod, err = ctx.LoadModule(kernels.PTX); err != nil {
			return nil, err
		}
		if p.buf, err = ctx.Alloc(n * 4); err != nil {
			return nil, err
		}
		p.out = make([]float32, n)
	}
	return p, nil
}

func (p *pipeline) note(stage string) func() {
	return func() {
		p.mu.Lock()
		p.order = append(p.order, stage)
		p.mu.Unlock()
	}
}

func (p *pipeline) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

func (p *pipeline) submit() error {
	if p.mod != nil {
		spin, _ := p.mod.Function("spin")
		fill, _ := p.mod.Function("fill")
		cfg := streams.LaunchConfig{Grid: streams.Dim3{X: n / 256}, Block: streams.Dim3{X: 256}}
		// produce: a slow kernel, then out[i] = i.
		if err := spin.Launch(p.produce, streams.LaunchConfig{}, new(streams.Args).Uint64(50e6)); err != nil {
			return err
		}
		if err := fill.Launch(p.produce, cfg, new(streams.Args).Pointer(p.buf.Ptr()).Uint32(n).Float32(1).Float64(0).Int64(0)); err != nil {
			return err
		}
	} else if err := p.produce.LaunchHostFunc(func() { time.Sleep(50 * time.Millisecond) }); err != nil {
		return err
	}
	if err := p.produce.LaunchHostFunc(p.note("produced")); err != nil {
		return err
	}
	if err := p.transform.WaitStream(p.produce); err != nil {
		return err
	}
	if p.mod != nil {
		// transform: out[i] = 2*i + 1, overwriting the producer's values in place.
		fill, _ := p.mod.Function("fill")
		cfg := streams.LaunchConfig{Grid: streams.Dim3{X: n / 256}, Block: streams.Dim3{X: 256}}
		if err := fill.Launch(p.transform, cfg, new(streams.Args).Pointer(p.buf.Ptr()).Uint32(n).Float32(2).Float64(1).Int64(0)); err != nil {
			return err
		}
	}
	if err := p.transform.LaunchHostFunc(p.note("transformed")); err != nil {
		return err
	}
	if err := p.consume.WaitStream(p.transform); err != nil {
		return err
	}
	if p.mod != nil {
		if err := streams.CopyFromDeviceAsync(p.out, p.buf, p.consume); err != nil {
			return err
		}
	}
	return p.consume.LaunchHostFunc(p.note("consumed"))
}

func (p *pipeline) check() error {
	if got := p.seen(); len(got) != 3 || got[0] != "produced" || got[1] != "transformed" || got[2] != "consumed" {
		return fmt.Errorf("stages ran out of order: %v", got)
	}
	if p.out == nil {
		fmt.Println("(no kernels on the software driver: results not computed)")
		return nil
	}
	for i, v := range p.out {
		if want := float32(2*i + 1); v != want {
			return fmt.Errorf("element %d: got %v, want %v", i, v, want)
		}
	}
	fmt.Printf("checked %d results against the CPU reference: all equal\n", len(p.out))
	return nil
}

func (p *pipeline) close() {
	for _, s := range []*streams.Stream{p.produce, p.transform, p.consume} {
		if s != nil {
			s.Close()
		}
	}
	if p.buf != nil {
		p.buf.Close()
	}
	if p.mod != nil {
		p.mod.Close()
	}
}

// replay captures host work into a graph and launches it many times.
func replay(ctx *streams.Context) error {
	s, err := ctx.NewStream(streams.StreamOptions{NonBlocking: true})
	if err != nil {
		return err
	}
	defer s.Close()
	var count int
	if err := s.BeginCapture(streams.CaptureGlobal); err != nil {
		return err
	}
	if err := s.LaunchHostFunc(func() { count++ }); err != nil {
		return err
	}
	g, err := s.EndCapture()
	if err != nil {
		return err
	}
	defer g.Close()
	exec, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer exec.Close()
	const launches = 1000
	start := time.Now()
	for range launches {
		if err := exec.Launch(s); err != nil {
			return err
		}
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	fmt.Printf("graph captured once, launched %d times in %v: host node ran %d times\n",
		launches, time.Since(start).Round(time.Microsecond), count)
	if count != launches {
		return fmt.Errorf("host node ran %d times, want %d", count, launches)
	}
	return nil
}
