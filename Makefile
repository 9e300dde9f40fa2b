# The README's two commands are `make demo` and `make test`.
GO ?= go

.PHONY: test check demo gpu-build bench

# Everything CI runs: formatting, vet, the core built without cgo, and the tests with the
# race detector (on the software driver here; on the real one too where libcuda loads).
test: check
	bash scripts/test.sh

check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...

demo:
	$(GO) run ./cmd/demo

# Binaries for a GPU machine without Go: the test suite, built with and without cgo,
# and the demo. Run them there with STREAMBRIDGE_REQUIRE_GPU=1 (see README).
gpu-build:
	mkdir -p .device
	CGO_ENABLED=0 $(GO) test -c -o .device/streams.test ./streams
	CGO_ENABLED=1 $(GO) test -c -o .device/streams-cgo.test ./streams
	CGO_ENABLED=0 $(GO) test -c -o .device/bridge.test ./bridge
	CGO_ENABLED=0 $(GO) build -o .device/demo ./cmd/demo

# Go beside C on this machine's GPU; prints the ratios.
bench:
	bash bench/run.sh
