package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// Environment variables the end-to-end suite reads.
const (
	// binEnv names the mcpd binary under test. Unset, TestMain builds one.
	binEnv = "MCPD_BIN"
	// everythingEnv names the mcp-server-everything executable.
	everythingEnv = "MCPD_EVERYTHING_BIN"
	// requiredEnv set to 1 turns skips for missing external servers into
	// failures (make test sets it).
	requiredEnv = "MCPD_E2E_REQUIRED"
	// fakeServerEnv makes this test binary run a fake MCP server instead of
	// the tests (the go-sdk mcp/cmd_test.go trick).
	fakeServerEnv = "MCPD_FAKE_SERVER"
	// homeEnv names the empty directory that daemonEnv gives mcpd as its
	// home, project and managed-config location, so that no config file
	// of the machine or its user reaches the tests. TestMain sets it.
	homeEnv = "MCPD_E2E_HOME"
)

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(fakeServerEnv); ok {
		os.Exit(runFakeServer(mode))
	}
	os.Exit(testMain(m))
}

// testMain builds mcpd unless MCPD_BIN names one, then runs the tests with
// the goroutine leak check. The path reaches the tests through MCPD_BIN, so
// there is no package-level variable to set.
func testMain(m *testing.M) int {
	if os.Getenv(binEnv) == "" {
		dir, err := os.MkdirTemp("", "mcpd-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: make build dir:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "mcpd")
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: go build ./cmd/mcpd:", err)
			return 1
		}
		if err := os.Setenv(binEnv, bin); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	} else if bin := os.Getenv(binEnv); !filepath.IsAbs(bin) {
		// Tests run in this package's directory; a relative MCPD_BIN such
		// as bin/mcpd is meant from the repository root.
		if err := os.Setenv(binEnv, filepath.Join(repoRoot(), bin)); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	home, err := os.MkdirTemp("", "mcpd-e2e-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: make home dir:", err)
		return 1
	}
	defer os.RemoveAll(home)
	if err := os.Mkdir(filepath.Join(home, "project"), 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: make project dir:", err)
		return 1
	}
	if err := os.Setenv(homeEnv, home); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// VerifyTestMain would call os.Exit itself; record the code instead so
	// that the deferred cleanup above still runs.
	code := 0
	goleak.VerifyTestMain(m, goleak.Cleanup(func(c int) { code = c }))
	return code
}

// repoRoot is the repository root as seen from this package's directory.
func repoRoot() string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return filepath.Join("..", "..")
	}
	return root
}

// externalBinary returns the executable the variable env names (what, for
// the messages), skipping the test when it is unset, with hint, unless
// MCPD_E2E_REQUIRED=1.
func externalBinary(t *testing.T, env, what, hint string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		if os.Getenv(requiredEnv) == "1" {
			t.Fatalf("%s is not set and %s=1: run `make tools` or point it at %s", env, requiredEnv, what)
		}
		t.Skipf("%s is not set%s", env, hint)
	}
	return bin
}
