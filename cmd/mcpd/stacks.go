package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

// stackSignal asks a running mcpd for the stacks of all its goroutines:
// what to look at when it seems stuck (a call that never ends, a shutdown
// that hangs), without stopping it as SIGQUIT would.
const stackSignal = syscall.SIGUSR1

// dumpStacksOnSignal writes every goroutine's stack to w each time
// stackSignal arrives, until stop is called.
func dumpStacksOnSignal(w io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stackSignal)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				fmt.Fprintf(w, "mcpd: goroutine stacks at %s (%s)\n", time.Now().UTC().Format(time.RFC3339Nano), stackSignal)
				_ = pprof.Lookup("goroutine").WriteTo(w, 2)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}
