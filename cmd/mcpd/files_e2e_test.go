package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFilesNotAFile: a file mcpd reads at start that is a device or a
// FIFO nobody writes to ends the start with a message naming it, instead
// of a read that exhausts memory (a cloned repository's .mcp.json linked
// to /dev/zero, read from the project directory by default) or an open
// that waits for ever.
func TestFilesNotAFile(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := shortTempDir(t)
	project := filepath.Join(dir, "project")
	if err := os.Mkdir(project, 0o700); err != nil {
		t.Fatal(err)
	}
	projectFile := filepath.Join(project, ".mcp.json")
	if err := os.Symlink("/dev/zero", projectFile); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := "unix://" + filepath.Join(dir, "mcpd.sock")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"project file linked to /dev/zero", []string{"--listen", sock, "--project", project},
			"mcpd: load config: read " + projectFile + ": is a character device, not a regular file\n"},
		{"project scope alone", []string{"--listen", sock, "--scopes", "project", "--project", project},
			"mcpd: load config: read " + projectFile + ": is a character device, not a regular file\n"},
		{"API token file /dev/zero", []string{"--listen", sock, "--config", emptyConfig(t), "--api-token-file", "/dev/zero"},
			"read API token file: read /dev/zero: is a character device, not a regular file"},
		{"API token file a FIFO nobody writes to", []string{"--listen", sock, "--config", emptyConfig(t), "--api-token-file", fifo},
			"API token file is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runMcpd(ctx, t, tc.args...)
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("mcpd %q: got exit code %d and output %q, want 1 and %q", tc.args, code, out, tc.want)
			}
		})
	}
}

// TestConfigFromPipe: --config reads a pipe, as process substitution
// (--config <(gen)) gives one: here the config's one server is invalid,
// and --strict names it.
func TestConfigFromPipe(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString(`{"mcpServers": {"piped": {"args": ["no command"]}}}`); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sock := "unix://" + filepath.Join(shortTempDir(t), "mcpd.sock")
	cmd := exec.CommandContext(ctx, mcpdBinary(t), "--listen", sock, "--scopes", "", "--config", "/dev/fd/3", "--strict")
	cmd.Env = daemonEnv()
	cmd.ExtraFiles = []*os.File{r}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out.String(), "servers not ready after their first start: piped") {
		t.Errorf("mcpd --config /dev/fd/3 --strict: got %v, output %q; want exit 1 naming the piped server", err, out.String())
	}
}
