package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcpd-project/mcpd/deploy/image"
)

// Environment variables the tests read. make test sets the first three to
// what make image wrote; unset, the tests build an image of their own.
const (
	layoutEnv   = "MCPD_IMAGE_LAYOUT"
	tarballEnv  = "MCPD_IMAGE_TARBALL"
	versionEnv  = "MCPD_IMAGE_VERSION"
	requiredEnv = "MCPD_E2E_REQUIRED" // 1: a missing skopeo fails instead of skipping
)

// testVersion is the version an image the tests build for themselves has.
const testVersion = "v0.0.0-imagetest"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// built is the image under test and where it was written.
type built struct {
	layoutDir, tarball, version string
	img                         v1.Image
}

// builtImage returns the image make image wrote, or builds one from the
// repository's cmd/mcpd into a temporary directory.
func builtImage(t *testing.T) *built {
	t.Helper()
	b := &built{layoutDir: os.Getenv(layoutEnv), tarball: os.Getenv(tarballEnv), version: os.Getenv(versionEnv)}
	if b.layoutDir == "" {
		dir := t.TempDir()
		bin := filepath.Join(dir, "mcpd")
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion, "-o", bin, "./cmd/mcpd")
		build.Dir = filepath.Join("..", "..")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build a static mcpd: %v\n%s", err, out)
		}
		img, err := image.Build(image.Options{
			Binary: bin, CACerts: "/etc/ssl/certs/ca-certificates.crt",
			Version: testVersion, Revision: strings.Repeat("0", 40),
			Source: "https://github.com/mcpd-project/mcpd", Created: time.Unix(1700000000, 0),
		})
		if err != nil {
			t.Fatal(err)
		}
		b.layoutDir, b.tarball, b.version = filepath.Join(dir, "oci"), filepath.Join(dir, "mcpd.tar"), testVersion
		if err := image.WriteLayout(b.layoutDir, img, testVersion); err != nil {
			t.Fatal(err)
		}
		if err := image.WriteTarball(b.tarball, img, "mcpd:"+testVersion); err != nil {
			t.Fatal(err)
		}
	}
	if b.version == "" || b.tarball == "" {
		t.Fatalf("%s is set: set %s and %s too", layoutEnv, versionEnv, tarballEnv)
	}
	p, err := layout.FromPath(b.layoutDir)
	if err != nil {
		t.Fatalf("read OCI layout: %v", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("OCI layout: %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if got := desc.Annotations[image.RefNameAnnotation]; got != b.version {
		t.Errorf("OCI layout: %s is %q, want %q", image.RefNameAnnotation, got, b.version)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("OCI layout: manifest media type %s, want %s", desc.MediaType, types.OCIManifestSchema1)
	}
	if b.img, err = p.Image(desc.Digest); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImageConfig checks how the image runs mcpd: as a numeric non-root
// user, mcpd as the entrypoint with no shell around it, and the labels.
func TestImageConfig(t *testing.T) {
	t.Parallel()
	b := builtImage(t)
	cf, err := b.img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s, want linux/<arch>", cf.OS, cf.Architecture)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (numeric, not root)", c.User)
	}
	if want := []string{"/usr/local/bin/mcpd"}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", c.Entrypoint, want)
	}
	if len(c.Cmd) != 0 || c.Shell != nil {
		t.Errorf("cmd %q, shell %q: want none (mcpd's defaults, no shell)", c.Cmd, c.Shell)
	}
	if want := []string{"PATH=/usr/local/bin"}; !slices.Equal(c.Env, want) {
		t.Errorf("env %q, want %q", c.Env, want)
	}
	if _, ok := c.ExposedPorts["50051/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want 50051/tcp", c.ExposedPorts)
	}
	if c.StopSignal != "SIGTERM" {
		t.Errorf("stop signal %q, want SIGTERM", c.StopSignal)
	}

	labels := c.Labels
	for key, want := range map[string]*regexp.Regexp{
		"org.opencontainers.image.title":       regexp.MustCompile(`^mcpd$`),
		"org.opencontainers.image.description": regexp.MustCompile(`MCP`),
		"org.opencontainers.image.version":     regexp.MustCompile(`^` + regexp.QuoteMeta(b.version) + `$`),
		"org.opencontainers.image.revision":    regexp.MustCompile(`^[0-9a-f]{40}$`),
		"org.opencontainers.image.created":     regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`),
		"org.opencontainers.image.source":      regexp.MustCompile(`^https://`),
	} {
		if got, ok := labels[key]; !ok || !want.MatchString(got) {
			t.Errorf("label %s = %q (set: %v), want it to match %s", key, got, ok, want)
		}
	}
	if created, err := time.Parse(time.RFC3339, labels["org.opencontainers.image.created"]); err != nil || !created.Equal(cf.Created.Time) {
		t.Errorf("label created %q, config created %v: want the same time", labels["org.opencontainers.image.created"], cf.Created.Time)
	}
	m, err := b.img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(labels, m.Annotations); diff != "" {
		t.Errorf("manifest annotations differ from the labels (-labels +annotations):\n%s", diff)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types %s, %s: want OCI", m.MediaType, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer media type %s, want %s", l.MediaType, types.OCILayer)
		}
	}
}

// file is one entry of the image's filesystem.
type file struct {
	mode     int64
	uid, gid int
	typ      byte
	data     []byte
}

// imageFiles reads the image's flattened filesystem.
func imageFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("read the image's layers: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = file{mode: h.Mode, uid: h.Uid, gid: h.Gid, typ: h.Typeflag, data: data}
	}
}

// TestImageFiles checks the image's filesystem entry by entry: mcpd, the
// CA bundle, the users, /tmp, and nothing else (no shell, no package
// manager, nothing writable but /tmp).
func TestImageFiles(t *testing.T) {
	t.Parallel()
	b := builtImage(t)
	files := imageFiles(t, b.img)
	want := map[string]struct {
		typ  byte
		mode int64
	}{
		"etc":                               {tar.TypeDir, 0o755},
		"etc/passwd":                        {tar.TypeReg, 0o644},
		"etc/group":                         {tar.TypeReg, 0o644},
		"etc/ssl":                           {tar.TypeDir, 0o755},
		"etc/ssl/certs":                     {tar.TypeDir, 0o755},
		"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644},
		"tmp":                               {tar.TypeDir, 0o1777},
		"usr":                               {tar.TypeDir, 0o755},
		"usr/local":                         {tar.TypeDir, 0o755},
		"usr/local/bin":                     {tar.TypeDir, 0o755},
		"usr/local/bin/mcpd":                {tar.TypeReg, 0o755},
	}
	for name, f := range files {
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected file in the image: %s", name)
			continue
		}
		if f.typ != w.typ || f.mode != w.mode || f.uid != 0 || f.gid != 0 {
			t.Errorf("%s: type %c mode %o owner %d:%d, want type %c mode %o owner 0:0", name, f.typ, f.mode, f.uid, f.gid, w.typ, w.mode)
		}
	}
	for name := range want {
		if _, ok := files[name]; !ok {
			t.Errorf("missing from the image: %s", name)
		}
	}
	if _, ok := files["bin/sh"]; ok {
		t.Error("the image has a shell")
	}
	if !strings.Contains(string(files["etc/passwd"].data), "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no user 65532:\n%s", files["etc/passwd"].data)
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"].data) {
		t.Error("the CA bundle holds no certificate")
	}
}

// TestImageTarball checks that the tarball holds the same image, named
// mcpd:VERSION, in the layout docker load reads (manifest.json).
func TestImageTarball(t *testing.T) {
	t.Parallel()
	b := builtImage(t)
	fromTar, err := tarball.ImageFromPath(b.tarball, nil)
	if err != nil {
		t.Fatalf("read the tarball: %v", err)
	}
	for what, get := range map[string]func(v1.Image) (v1.Hash, error){
		"config digest": func(i v1.Image) (v1.Hash, error) { return i.ConfigName() },
		"layer diff id": func(i v1.Image) (v1.Hash, error) {
			ls, err := i.Layers()
			if err != nil || len(ls) != 1 {
				return v1.Hash{}, errors.Join(err, errors.New("want one layer"))
			}
			return ls[0].DiffID()
		},
	} {
		got, err1 := get(fromTar)
		want, err2 := get(b.img)
		if err := errors.Join(err1, err2); err != nil || got != want {
			t.Errorf("%s: tarball %v, layout %v (%v)", what, got, want, err)
		}
	}
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(b.tarball) })
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{"mcpd:" + b.version}) {
		t.Errorf("tarball manifest.json: %+v, want one image tagged mcpd:%s", manifest, b.version)
	}
}

// extractBinary writes the image's mcpd to a temporary directory.
func extractBinary(t *testing.T, img v1.Image) string {
	t.Helper()
	f, ok := imageFiles(t, img)["usr/local/bin/mcpd"]
	if !ok {
		t.Fatal("the image has no usr/local/bin/mcpd")
	}
	// A short directory: the Unix socket next to it must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "mcpd-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "mcpd")
	if err := os.WriteFile(bin, f.data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestImageRuns extracts mcpd from the image's layer and runs it with the
// image's environment only: --version says the labelled version, and the
// daemon with its default config serves health over a Unix socket and
// runs the demo server, which is the same binary; its own `mcpd health`,
// the sidecar's probe, says SERVING.
func TestImageRuns(t *testing.T) {
	t.Parallel()
	b := builtImage(t)
	cf, err := b.img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	bin := extractBinary(t, b.img)
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("mcpd in the image is dynamically linked; the image has no libc")
		}
	}
	ef.Close()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if want := "mcpd " + b.version + "\n"; err != nil || string(out) != want {
		t.Errorf("mcpd --version: %q (%v), want %q", out, err, want)
	}

	sock := filepath.Join(filepath.Dir(bin), "mcpd.sock")
	var log bytes.Buffer
	cmd := exec.Command(bin, "--listen", "unix://"+sock, "--stop-grace", "500ms")
	cmd.Env = cf.Config.Env
	cmd.Dir = filepath.Dir(bin)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("mcpd log:\n%s", log.String())
		}
	}()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", "mcpd.server/demo"} {
		for {
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
			if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("mcpd exited: %v", err)
			case <-ctx.Done():
				t.Fatalf("health %q: not SERVING: %v %v", service, resp, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	// The sidecar's probe: the image's own mcpd, with the image's env.
	probe := exec.CommandContext(ctx, bin, "health", "--listen=unix://"+sock)
	probe.Env = cf.Config.Env
	if out, err := probe.CombinedOutput(); err != nil || string(out) != "SERVING\n" {
		t.Errorf("mcpd health: %q (%v), want SERVING", out, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("mcpd after SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("mcpd did not stop after SIGTERM")
	}
}

// TestImageSkopeo has skopeo, a peer implementation of the image formats,
// read the OCI layout and the docker tarball and copy the image out.
func TestImageSkopeo(t *testing.T) {
	t.Parallel()
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		if os.Getenv(requiredEnv) == "1" {
			t.Fatalf("skopeo not found and %s=1: run make tools (Debian package skopeo)", requiredEnv)
		}
		t.Skip("skopeo not found")
	}
	b := builtImage(t)
	digest, err := b.img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, skopeo, append([]string{"--insecure-policy"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("skopeo %q: %v\n%s", args, err, stderr.String())
		}
		return out
	}
	type inspect struct {
		Digest       string
		Labels       map[string]string
		Architecture string
		Os           string
	}
	layoutRef := "oci:" + b.layoutDir + ":" + b.version
	var got inspect
	if err := json.Unmarshal(run("inspect", layoutRef), &got); err != nil {
		t.Fatal(err)
	}
	if got.Digest != digest.String() || got.Os != "linux" || got.Labels["org.opencontainers.image.version"] != b.version {
		t.Errorf("skopeo inspect %s: %+v; want digest %s, linux, version %s", layoutRef, got, digest, b.version)
	}
	var fromTar inspect
	if err := json.Unmarshal(run("inspect", "docker-archive:"+b.tarball), &fromTar); err != nil {
		t.Fatal(err)
	}
	if fromTar.Labels["org.opencontainers.image.version"] != b.version || fromTar.Architecture != got.Architecture {
		t.Errorf("skopeo inspect docker-archive:%s: %+v; want version %s, arch %s", b.tarball, fromTar, b.version, got.Architecture)
	}
	// What an operator does before pushing: copy the layout elsewhere.
	copied := filepath.Join(t.TempDir(), "copy")
	run("copy", layoutRef, "oci:"+copied+":"+b.version)
	var again inspect
	if err := json.Unmarshal(run("inspect", "oci:"+copied+":"+b.version), &again); err != nil {
		t.Fatal(err)
	}
	if again.Labels["org.opencontainers.image.version"] != b.version {
		t.Errorf("skopeo copy: the copy's labels are %v", again.Labels)
	}
}

// TestBuildReproducible builds the image twice from the same inputs and
// wants one digest: the build stamps nothing of its own time or machine.
func TestBuildReproducible(t *testing.T) {
	t.Parallel()
	b := builtImage(t)
	o := image.Options{
		Binary: extractBinary(t, b.img), Version: "v1.2.3",
		Revision: strings.Repeat("a", 40), Created: time.Unix(1700000000, 0),
	}
	var digests []v1.Hash
	for range 2 {
		img, err := image.Build(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
		time.Sleep(1100 * time.Millisecond) // a wall-clock stamp would now differ
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds from the same inputs: digests %v and %v", digests[0], digests[1])
	}
}

// TestBuildRejectsDynamicBinary: the image has no libc or loader, so a
// binary that needs them must not make it in.
func TestBuildRejectsDynamicBinary(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to try")
	}
	f, err := elf.Open(sh)
	if err != nil {
		t.Skipf("%s: %v", sh, err)
	}
	dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	f.Close()
	if !dynamic {
		t.Skipf("%s is not dynamically linked", sh)
	}
	if _, err := image.Build(image.Options{Binary: sh, Version: "v1.2.3"}); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("Build with %s: %v, want a dynamically linked error", sh, err)
	}
}
