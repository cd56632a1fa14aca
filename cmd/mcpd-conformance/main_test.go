package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const (
	// fakeMCPDEnv makes this test binary act as mcpd (see fakeMCPD).
	fakeMCPDEnv = "MCPD_CONFORMANCE_FAKE_MCPD"
	// testTimeout bounds every test's context.
	testTimeout = 60 * time.Second
)

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(fakeMCPDEnv); ok {
		os.Exit(fakeMCPD(mode, os.Args[1:]))
	}
	cleanup, err := setupMCPD()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		cleanup()
		os.Exit(code)
	}))
}

// setupMCPD builds mcpd for the end-to-end tests unless MCPD_BIN names one
// (make test does), and returns what removes the build.
func setupMCPD() (cleanup func(), err error) {
	bin := os.Getenv(envMCPD)
	if bin != "" {
		if !filepath.IsAbs(bin) {
			// A relative MCPD_BIN such as bin/mcpd is meant from the
			// repository root, two levels up from this package.
			abs, err := filepath.Abs(filepath.Join("..", "..", bin))
			if err != nil {
				return nil, err
			}
			return func() {}, os.Setenv(envMCPD, abs)
		}
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "mcpdc-bin-")
	if err != nil {
		return nil, fmt.Errorf("make build dir: %w", err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "mcpd")
	build := exec.Command("go", "build", "-o", bin, "../mcpd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		cleanup()
		return nil, fmt.Errorf("go build ./cmd/mcpd: %w", err)
	}
	return cleanup, os.Setenv(envMCPD, bin)
}

// testContext returns a context that ends with the test or after
// testTimeout.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}
