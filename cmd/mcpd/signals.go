package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// shutdownSignals returns two contexts: graceful ends at the first SIGTERM
// or SIGINT (drain RPCs, stop servers in order), now at the second (cut
// RPCs off and kill the servers' process groups at once: an operator who
// does not want to wait out --shutdown-timeout and --stop-grace). After
// the second, both signals have their default action again, so a third
// ends mcpd outright. release stops listening; call it before exiting.
func shutdownSignals() (graceful, now context.Context, release func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	graceful, stopGraceful := context.WithCancel(context.Background())
	now, stopNow := context.WithCancel(context.Background())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, end := range []context.CancelFunc{stopGraceful, stopNow} {
			select {
			case <-sigs:
				end()
			case <-done:
				return
			}
		}
		signal.Stop(sigs)
	})
	return graceful, now, func() {
		close(done)
		wg.Wait()
		signal.Stop(sigs)
		stopGraceful()
		stopNow()
	}
}
