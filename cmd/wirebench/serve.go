package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"

	"github.com/livereg/livereg/cmd/internal/wire"
)

// memPath is the server's side endpoint: its runtime's allocation
// counters, read before and after a measured run.
const memPath = "/_wirebench/mem"

// memCounters are the counters memPath answers.
type memCounters struct {
	Mallocs    uint64 `json:"mallocs"`
	TotalAlloc uint64 `json:"totalAlloc"`
}

// serve runs the server named name with tools tools on a loopback port,
// writes its address to out, and serves until in closes (the load process
// ended) or ctx ends.
func serve(ctx context.Context, name string, tools int, in io.Reader, out io.Writer) error {
	s, err := wire.Lookup(name)
	if err != nil {
		return err
	}
	h, stop, err := s.New(tools)
	if err != nil {
		return err
	}
	if stop != nil {
		defer stop()
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc(memPath, func(w http.ResponseWriter, _ *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(memCounters{Mallocs: ms.Mallocs, TotalAlloc: ms.TotalAlloc})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if _, err := fmt.Fprintln(out, ln.Addr().String()); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, in); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	return srv.Close()
}
