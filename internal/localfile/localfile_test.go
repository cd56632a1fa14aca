package localfile

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := []byte(`{"mcpServers": {}}`)
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path, int64(len(want)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read at the bound: got %q, %v; want %q", got, err, want)
	}
	got, err = Read(path, ConfigLimit)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read: got %q, %v; want %q", got, err, want)
	}
}

func TestReadEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(path, 10); err != nil || len(got) != 0 {
		t.Fatalf("Read: got %q, %v; want nothing", got, err)
	}
}

func TestReadOverTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 2048+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Read(path, 2048)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if want := path + ": too large: more than 2 KiB"; !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to say %q", err, want)
	}
}

// TestReadGrowingFile: a file that grows between the size check and the
// read is read no further than one byte past the bound.
func TestReadGrowingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("small"), 0o600); err != nil {
		t.Fatal(err)
	}
	grow := func(fs.FileInfo) error {
		return os.WriteFile(path, bytes.Repeat([]byte("x"), 100), 0o600)
	}
	_, err := ReadChecked(path, 10, grow)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

func TestReadCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("secret"), 0o640); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	var mode fs.FileMode
	_, err := ReadChecked(path, 10, func(fi fs.FileInfo) error { mode = fi.Mode(); return refused })
	if err != refused {
		t.Fatalf("got %v, want the check's error as it is", err)
	}
	if mode.Perm() != 0o640 {
		t.Errorf("check got mode %v, want the file's 0640", mode)
	}
}

func TestReadMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := Read(filepath.Join(dir, "missing"), 10)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v, want fs.ErrNotExist", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// HOME pointing at a file: a path through it is as missing.
	_, err = Read(filepath.Join(file, "x"), 10)
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("path through a file: got %v, want ENOTDIR", err)
	}
}

// TestReadRefusesWhatIsNoFile: a device, a directory and a socket are
// refused by what they are, before a byte is read. The limit is far
// above what the devices would give in one read, so that only the
// refusal can stop the read.
func TestReadRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, ".mcp.json")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	for _, tc := range []struct{ path, what string }{
		{"/dev/zero", "is a character device, not a regular file"},
		{"/dev/null", "is a character device, not a regular file"},
		{link, "is a character device, not a regular file"},
		{dir, "is a directory, not a regular file"},
		{sock, "is a socket, not a regular file"},
	} {
		got, err := Read(tc.path, ConfigLimit)
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("Read(%s): got %d bytes, %v; want ErrNotRegular", tc.path, len(got), err)
			continue
		}
		if want := tc.path + ": " + tc.what; !strings.Contains(err.Error(), want) {
			t.Errorf("Read(%s): got %q, want it to say %q", tc.path, err, want)
		}
	}
}

// filledFIFO returns a FIFO that holds data and has no writer left: the
// test holds the read end open while it writes and closes the write end,
// so that the data waits in the pipe for Read, which then finds it with
// no writer: the end of the data.
func filledFIFO(t *testing.T, data []byte) string {
	t.Helper()
	path := fifo(t)
	hold, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return path
}

func TestReadFIFOWithWriter(t *testing.T) {
	want := []byte(`{"mcpServers": {}}`)
	path := filledFIFO(t, want)
	got, err := Read(path, 100)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read: got %q, %v; want %q", got, err, want)
	}
}

func TestReadFIFOOverTheBound(t *testing.T) {
	path := filledFIFO(t, bytes.Repeat([]byte("x"), 101))
	if _, err := Read(path, 100); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

// TestReadFIFOWithoutWriter: a FIFO nobody writes to reads as empty, at
// once: opening it does not wait for a writer.
func TestReadFIFOWithoutWriter(t *testing.T) {
	got, err := Read(fifo(t), 100)
	if err != nil || len(got) != 0 {
		t.Fatalf("Read: got %q, %v; want nothing", got, err)
	}
}

// TestReadFIFOSilentWriter: a FIFO whose writer neither writes nor
// closes ends the read at the deadline.
func TestReadFIFOSilentWriter(t *testing.T) {
	path := fifo(t)
	// O_RDWR opens a FIFO at once on Linux; the test is its writer.
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = read(path, 100, nil, time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want os.ErrDeadlineExceeded", err)
	}
	if want := path + ": the pipe did not end within 1ms"; !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to say %q", err, want)
	}
}

func fifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{
		ConfigLimit: "256 MiB", CallersLimit: "64 MiB", CredentialLimit: "1 MiB", 2048: "2 KiB", 1000: "1000 bytes", 1 << 30: "1 GiB",
	} {
		if got := size(n); got != want {
			t.Errorf("size(%d): got %q, want %q", n, got, want)
		}
	}
}
