// Package image builds mcpd's container image without a container engine
// or a registry: one layer on an empty base holding a static mcpd, the CA
// bundle that HTTPS upstreams need and a passwd entry for the non-root
// user, with an OCI config that runs mcpd as that user. It writes the image
// as an OCI image layout (skopeo copy oci:DIR:TAG ...) and as a tarball
// that docker load and podman load accept. Pushing it to a registry is the
// operator's step.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and how it runs. The Kubernetes manifests and the
// docs refer to these; the tests check the built image against them.
const (
	// BinaryPath is where mcpd lives in the image, and the entrypoint.
	BinaryPath = "/usr/local/bin/mcpd"
	// CACertsPath is the CA bundle's path, the first place Go's crypto/x509
	// looks on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// UID and GID are the user mcpd runs as: not root, and numeric so
	// that Kubernetes' runAsNonRoot can verify it without reading
	// /etc/passwd. 65532 is the "nonroot" user of distroless images.
	UID = 65532
	GID = 65532
	// User is the config's user field.
	User = "65532:65532"
	// GRPCPort is the port the image declares for a TCP listener
	// (mcpd's default port; its default address is loopback only).
	GRPCPort = 50051
	// RefNameAnnotation names an image inside an OCI layout: skopeo's
	// oci:DIR:TAG selects by it.
	RefNameAnnotation = "org.opencontainers.image.ref.name"
)

// PathEnv is the image's whole environment: PATH lets `mcpd` be run by
// name (by kubectl exec, or an exec probe).
const PathEnv = "PATH=/usr/local/bin"

// Options describe one build.
type Options struct {
	// Binary is the path of mcpd built for Linux with CGO_ENABLED=0.
	Binary string
	// CACerts is the path of a PEM CA bundle to install at CACertsPath;
	// empty leaves it out (mcpd then reaches no HTTPS server).
	CACerts string
	// Version and Revision are the release and VCS revision, for the
	// labels; Version should be what the binary's --version prints.
	Version, Revision string
	// Source is the repository URL, for the labels.
	Source string
	// Created stamps the config, the labels and every file, so that the
	// same inputs give the same digest (use the commit time).
	Created time.Time
}

// Build returns the image described by o.
func Build(o Options) (v1.Image, error) {
	if o.Version == "" {
		return nil, errors.New("image: a version is required")
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: read binary: %w", err)
	}
	arch, err := staticLinuxArch(bin)
	if err != nil {
		return nil, fmt.Errorf("image: %s: %w", o.Binary, err)
	}
	var certs []byte
	if o.CACerts != "" {
		if certs, err = os.ReadFile(o.CACerts); err != nil {
			return nil, fmt.Errorf("image: read CA bundle: %w", err)
		}
	}
	created := o.Created.UTC().Truncate(time.Second)
	files, err := rootFS(bin, certs, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}

	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "mcpd-image", Comment: "mcpd " + o.Version},
	})
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	labels := Labels(o, created)
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:         User,
		Entrypoint:   []string{BinaryPath},
		Env:          []string{PathEnv},
		WorkingDir:   "/",
		Labels:       labels,
		ExposedPorts: map[string]struct{}{strconv.Itoa(GRPCPort) + "/tcp": {}},
		StopSignal:   "SIGTERM",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	// The manifest carries the labels too, where registries show them.
	annotated, ok := mutate.Annotations(img, labels).(v1.Image)
	if !ok {
		return nil, errors.New("image: annotating the manifest lost the image")
	}
	return annotated, nil
}

// Labels are the org.opencontainers.image.* labels of a build.
func Labels(o Options, created time.Time) map[string]string {
	labels := map[string]string{
		"org.opencontainers.image.title":       "mcpd",
		"org.opencontainers.image.description": "A sidecar daemon that connects to MCP servers and exposes them over the gRPC service mcpd.v1.MCPHub",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	if o.Source != "" {
		labels["org.opencontainers.image.source"] = o.Source
		labels["org.opencontainers.image.url"] = o.Source
	}
	return labels
}

// staticLinuxArch returns the OCI architecture of a Linux ELF executable,
// and an error unless it is statically linked: the image has no libc and
// no dynamic loader.
func staticLinuxArch(bin []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New("dynamically linked (build it with CGO_ENABLED=0)")
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	}
	return "", fmt.Errorf("unsupported machine %v", f.Machine)
}

// Passwd and Group name the image's users for tools that look them up;
// mcpd itself needs neither.
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	Group  = "root:x:0:\nnonroot:x:65532:\n"
)

// rootFS is the layer's tar: directories, then files, all owned by root
// and stamped with created, so the bytes depend on the inputs only.
func rootFS(bin, certs []byte, created time.Time) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		data []byte
		dir  bool
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(Passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(Group)},
		// Stdio servers that write temporary files need a /tmp; the
		// manifests mount an emptyDir over it (the root is read-only).
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: BinaryPath[1:], mode: 0o755, data: bin},
	}
	if certs != nil {
		entries = append(entries,
			entry{name: "etc/ssl/", mode: 0o755, dir: true},
			entry{name: "etc/ssl/certs/", mode: 0o755, dir: true},
			entry{name: CACertsPath[1:], mode: 0o644, data: certs},
		)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, ModTime: created,
			Uname: "root", Gname: "root", Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: tar %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("image: tar %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: tar: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as a new OCI image layout at dir, named tag, a
// bare tag such as v1.2.3 (skopeo copy oci:DIR:TAG ...). An existing dir
// is replaced.
func WriteLayout(dir string, img v1.Image, tag string) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefNameAnnotation: tag})); err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// WriteTarball writes img as a tarball that docker load and podman load
// accept, tagged ref (for example mcpd:v1.2.3).
func WriteTarball(path string, img v1.Image, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image: tarball: %w", err)
	}
	return os.Rename(tmp, path)
}
