package kubernetes_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/mcpd-project/mcpd/deploy/image"
)

// binEnv names the mcpd binary the manifests are checked against (make
// test sets it to bin/mcpd); unset, the test builds one.
const binEnv = "MCPD_BIN"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// manifests are the decoded objects of one layout's directory.
type manifests struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
}

// load decodes every YAML document under dir strictly: an unknown or
// misspelt field, a duplicate key or a wrong type fails the test.
func load(t *testing.T, dir string) *manifests {
	t.Helper()
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}}
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", p, i, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			where := fmt.Sprintf("%s: document %d", p, i)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				d := &appsv1.Deployment{}
				m.deployments, obj = append(m.deployments, d), d
			case "v1 Service":
				s := &corev1.Service{}
				m.services, obj = append(m.services, s), s
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			default:
				t.Fatalf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: strict decoding as %s: %v", where, tm.Kind, err)
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				m.configMaps[cm.Name] = cm
			}
		}
		f.Close()
	}
	return m
}

// TestStrictDecoding shows that load's decoding is strict: a misspelt
// field, the kind of mistake Kubernetes would silently drop with a
// warning, fails it.
func TestStrictDecoding(t *testing.T) {
	t.Parallel()
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      initContainers:\n        - name: mcpd\n          restartPolcy: Always\n")
	if err := yaml.UnmarshalStrict(doc, &appsv1.Deployment{}); err == nil || !strings.Contains(err.Error(), "restartPolcy") {
		t.Errorf("strict decoding of a misspelt field: %v, want an error naming it", err)
	}
}

// mcpdBinary returns bin/mcpd, or builds one.
func mcpdBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(binEnv); bin != "" {
		if !filepath.IsAbs(bin) {
			bin = filepath.Join("..", "..", bin) // meant from the repository root
		}
		return bin
	}
	bin := filepath.Join(t.TempDir(), "mcpd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mcpd")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/mcpd: %v\n%s", err, out)
	}
	return bin
}

// container returns the pod's container or init container called name.
func container(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// flagValue returns the value of --name=value in args (the manifests
// write every flag that way).
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("args %q have no --%s=...", args, name)
	return ""
}

// checkFlags has mcpd itself parse args: --version makes it exit 0 after
// checking every other flag and value, before it reads any file, so a
// renamed or removed flag, or a bad value, fails here.
func checkFlags(t *testing.T, bin string, args []string) {
	t.Helper()
	for _, a := range args {
		if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
			t.Errorf("argument %q: write flags as --name=value", a)
		}
	}
	cmd := exec.Command(bin, append(slices.Clone(args), "--version")...)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("mcpd %q rejects the manifest's flags: %v\n%s", args, err, out)
	}
}

// cleanEnv is the test's environment without MCPD_* variables.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPD_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// mountFor returns the volume mount of c that holds the absolute path p,
// and p relative to it.
func mountFor(t *testing.T, c *corev1.Container, p string) (corev1.VolumeMount, string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/"); ok {
			return m, rel
		}
	}
	t.Fatalf("container %s: %s is on no volume", c.Name, p)
	return corev1.VolumeMount{}, ""
}

// volume returns the pod's volume called name.
func volume(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Volume {
	t.Helper()
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	t.Fatalf("no volume %q", name)
	return nil
}

// checkPodSecurity checks the pod-wide settings both layouts share.
func checkPodSecurity(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken: want false")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks: want false (Service variables are MCPD_* for a Service named mcpd)")
	}
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Fatal("pod securityContext.runAsNonRoot: want true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != image.UID || sc.RunAsGroup == nil || *sc.RunAsGroup != image.GID {
		t.Errorf("pod runs as %v:%v, want the image's user %d:%d", sc.RunAsUser, sc.RunAsGroup, image.UID, image.GID)
	}
	if sc.FSGroup == nil || *sc.FSGroup != image.GID {
		t.Errorf("pod fsGroup %v, want %d (the Secret's file must be readable)", sc.FSGroup, image.GID)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccompProfile %v, want RuntimeDefault", sc.SeccompProfile)
	}
}

// checkContainerSecurity checks one container's restrictions.
func checkContainerSecurity(t *testing.T, c *corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("container %s: no securityContext", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container %s: allowPrivilegeEscalation: want false", c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container %s: readOnlyRootFilesystem: want true", c.Name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container %s: capabilities %v, want drop [ALL] and no add", c.Name, sc.Capabilities)
	}
	if sc.Privileged != nil && *sc.Privileged || sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		t.Errorf("container %s: privileged or root", c.Name)
	}
}

// checkMcpdContainer checks what both layouts' mcpd containers share: the
// image's entrypoint (no command override), flags mcpd accepts, a
// writable /tmp, resources that match --memory-limit, and the token Secret.
func checkMcpdContainer(t *testing.T, bin string, spec *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	if len(c.Command) != 0 {
		t.Errorf("container %s: command %q overrides the image's entrypoint", c.Name, c.Command)
	}
	if !strings.Contains(c.Image, "/mcpd:") {
		t.Errorf("container %s: image %q, want .../mcpd:TAG", c.Name, c.Image)
	}
	checkFlags(t, bin, c.Args)
	checkContainerSecurity(t, c)
	if m, _ := mountFor(t, c, "/tmp/x"); volume(t, spec, m.Name).EmptyDir == nil {
		t.Errorf("container %s: /tmp is not an emptyDir (the root is read-only)", c.Name)
	}

	mem, ok := c.Resources.Limits[corev1.ResourceMemory]
	req, reqOK := c.Resources.Requests[corev1.ResourceMemory]
	if !ok || !reqOK || req.Cmp(mem) > 0 {
		t.Fatalf("container %s: memory request %v, limit %v: want both, request <= limit", c.Name, req.String(), mem.String())
	}
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
		t.Errorf("container %s: no CPU request", c.Name)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "MCPD_") || e.Name == "GOMEMLIMIT" {
			t.Errorf("container %s: %s: the manifests set mcpd's settings as flags (--memory-limit wins over GOMEMLIMIT)", c.Name, e.Name)
		}
	}
	limit := flagValue(t, c.Args, "memory-limit")
	soft, err := goMemLimit(limit)
	if err != nil {
		t.Fatalf("container %s: --memory-limit: %v", c.Name, err)
	}
	// mcpd's resident memory stays under about twice its soft limit under
	// any load (docs/performance.md#memory), and the servers it starts
	// share the container: the soft limit is at most 75% of the hard one,
	// and the request covers it.
	if soft <= 0 || soft*4 > mem.Value()*3 {
		t.Errorf("container %s: --memory-limit=%s is %d bytes; want it above 0 and at most 75%% of the memory limit %s (%d bytes)", c.Name, limit, soft, mem.String(), mem.Value())
	}
	if req.Value() < soft {
		t.Errorf("container %s: memory request %s is below --memory-limit=%s", c.Name, req.String(), limit)
	}

	checkSecretFile(t, spec, c, c.Args, "api-token-file", "mcpd-api-token", "token")
}

// checkSecretFile checks that the file that flag --name in args names, in
// container c, is key wantKey of Secret wantSecret, readable by the group
// (fsGroup) and by no others.
func checkSecretFile(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, args []string, name, wantSecret, wantKey string) {
	t.Helper()
	path := flagValue(t, args, name)
	m, rel := mountFor(t, c, path)
	v := volume(t, spec, m.Name)
	if v.Secret == nil {
		t.Errorf("container %s: --%s=%s is on volume %s, not a Secret: %+v", c.Name, name, path, m.Name, v.VolumeSource)
		return
	}
	key, mode := rel, v.Secret.DefaultMode
	if len(v.Secret.Items) > 0 {
		key = ""
		for _, item := range v.Secret.Items {
			if item.Path == rel {
				key = item.Key
				if item.Mode != nil {
					mode = item.Mode
				}
			}
		}
	}
	if v.Secret.SecretName != wantSecret || key != wantKey {
		t.Errorf("container %s: --%s=%s is key %q of Secret %s, want key %s of Secret %s", c.Name, name, path, key, v.Secret.SecretName, wantKey, wantSecret)
	}
	if mode == nil || *mode&0o040 == 0 || *mode&0o007 != 0 {
		t.Errorf("container %s: --%s=%s: mode %v, want group-readable (fsGroup) and nothing for others", c.Name, name, path, mode)
	}
}

// goMemLimit parses a --memory-limit size the way the Go runtime parses
// GOMEMLIMIT: bytes with an optional B, KiB, MiB, GiB or TiB suffix.
func goMemLimit(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}, {"", 0}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%q: want bytes with a B, KiB, MiB, GiB or TiB suffix", s)
			}
			return n << u.shift, nil
		}
	}
	return 0, fmt.Errorf("%q: not a size", s)
}

// checkConfigMap checks that the --config file is a key of a ConfigMap in
// the layout, and that it is a .mcp.json whose stdio commands are in the
// image.
func checkConfigMap(t *testing.T, m *manifests, spec *corev1.PodSpec, c *corev1.Container) (cm *corev1.ConfigMap, key string) {
	t.Helper()
	configFile := flagValue(t, c.Args, "config")
	mount, key := mountFor(t, c, configFile)
	v := volume(t, spec, mount.Name)
	if v.ConfigMap == nil {
		t.Fatalf("--config=%s is not on a ConfigMap volume", configFile)
	}
	cm, ok := m.configMaps[v.ConfigMap.Name]
	if !ok {
		t.Fatalf("ConfigMap %s is not in the layout", v.ConfigMap.Name)
	}
	var file struct {
		MCPServers map[string]struct {
			Command string `json:"command"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(cm.Data[key]), &file); err != nil || len(file.MCPServers) == 0 {
		t.Fatalf("ConfigMap %s key %s: want a .mcp.json with servers: %v", cm.Name, key, err)
	}
	for name, s := range file.MCPServers {
		if s.Command != "" && s.Command != image.BinaryPath {
			t.Errorf("server %s: command %q is not in the image (only %s is)", name, s.Command, image.BinaryPath)
		}
	}
	return cm, key
}

// pod is mcpd run on this machine the way a manifest runs it: each volume
// the container mounts is a directory under root, filled from the layout's
// ConfigMap and the test's data for each Secret (secrets: name, key,
// data), and every path in the arguments, probes and config is moved under
// root (and the image's binary path to bin/mcpd).
type pod struct {
	root, bin, token string
}

// testToken is the token of the Secret mcpd-api-token in the tests.
const testToken = "test-token-for-the-manifests"

func newPod(t *testing.T, bin string, m *manifests, spec *corev1.PodSpec, c *corev1.Container, secrets map[string]map[string]string) *pod {
	t.Helper()
	// A short root: the Unix socket's path must fit in 108 bytes.
	root, err := os.MkdirTemp("", "mcpd-pod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	p := &pod{root: root, bin: bin, token: testToken}
	for _, mount := range c.VolumeMounts {
		dir := filepath.Join(root, mount.MountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		v := volume(t, spec, mount.Name)
		switch {
		case v.ConfigMap != nil:
			for key, data := range m.configMaps[v.ConfigMap.Name].Data {
				p.write(t, filepath.Join(dir, key), p.mapString(data))
			}
		case v.Secret != nil:
			data, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s: the test has no data for Secret %s", mount.Name, v.Secret.SecretName)
			}
			if len(v.Secret.Items) == 0 {
				for key, value := range data {
					p.write(t, filepath.Join(dir, key), value)
				}
			}
			for _, item := range v.Secret.Items {
				value, ok := data[item.Key]
				if !ok {
					t.Fatalf("volume %s: Secret %s has no key %s in the test", mount.Name, v.Secret.SecretName, item.Key)
				}
				p.write(t, filepath.Join(dir, item.Path), value)
			}
		}
	}
	return p
}

func (p *pod) write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mapString moves the image's binary path and absolute paths in s.
func (p *pod) mapString(s string) string {
	s = strings.ReplaceAll(s, image.BinaryPath, p.bin)
	for _, prefix := range []string{"unix://", "="} {
		if i := strings.Index(s, prefix+"/"); i >= 0 && !strings.HasPrefix(s[i+len(prefix):], p.bin) {
			s = s[:i+len(prefix)] + filepath.Join(p.root, s[i+len(prefix):])
		}
	}
	return s
}

func (p *pod) mapArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = p.mapString(a)
	}
	return out
}

// start runs mcpd with the container's (mapped) arguments and its env,
// replacing --listen with listen when it is not empty, and stops it when
// the test ends.
func (p *pod) start(t *testing.T, c *corev1.Container, listen string) (stop func() error) {
	t.Helper()
	args := p.mapArgs(c.Args)
	if listen != "" {
		args = withListen(args, listen)
	}
	args = append(args, "--stop-grace=500ms")
	cmd := p.command(t, c, args)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			return errors.New("mcpd did not stop within 20s of SIGTERM")
		}
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("mcpd: %v", err)
		}
		if t.Failed() {
			t.Logf("mcpd %q log:\n%s", args, log.String())
		}
	})
	return stop
}

// withListen returns args with --listen=listen for their --listen.
func withListen(args []string, listen string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if strings.HasPrefix(a, "--listen=") {
			out[i] = "--listen=" + listen
		}
	}
	return out
}

// command is mcpd with args (already mapped) in the container's
// environment.
func (p *pod) command(t *testing.T, c *corev1.Container, args []string) *exec.Cmd {
	t.Helper()
	env := cleanEnv()
	if sc := c.SecurityContext; sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		// Outside its volumes the container can write nothing, not even
		// its home directory (where mcpd's default OAuth state directory
		// lies): a home under a regular file cannot be made, even by root.
		home := filepath.Join(p.root, "read-only-root")
		p.write(t, home, "")
		env = append(env, "HOME="+filepath.Join(home, "home", "nonroot"), "XDG_STATE_HOME=")
	}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Env = env
	return cmd
}

// runProbe runs an exec probe's command, mapped and with --listen replaced
// by listen when it is not empty, and returns its exit code.
func (p *pod) runProbe(t *testing.T, probe *corev1.Probe, listen string) (int, string) {
	t.Helper()
	if probe == nil || probe.Exec == nil {
		t.Fatalf("probe %+v: want an exec probe", probe)
	}
	args := p.mapArgs(probe.Exec.Command)
	if listen != "" {
		args = withListen(args, listen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(probe.TimeoutSeconds)*time.Second+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("probe %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestSidecar checks deploy/kubernetes/sidecar: mcpd as a native sidecar
// on a Unix socket in an emptyDir it shares with the agent, probed by
// `mcpd health`, and then runs it: mcpd with the manifest's flags and
// files serves, and the probes pass once it does and fail before.
func TestSidecar(t *testing.T) {
	t.Parallel()
	bin := mcpdBinary(t)
	m := load(t, "sidecar")
	if len(m.deployments) != 1 || len(m.services) != 0 {
		t.Fatalf("sidecar: %d Deployments, %d Services; want one Deployment", len(m.deployments), len(m.services))
	}
	spec := &m.deployments[0].Spec.Template.Spec
	checkPodSecurity(t, spec)
	mcpd := container(t, spec, "mcpd")
	if !slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == "mcpd" }) ||
		mcpd.RestartPolicy == nil || *mcpd.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("mcpd: want an init container with restartPolicy: Always (a native sidecar)")
	}
	checkMcpdContainer(t, bin, spec, mcpd)
	checkConfigMap(t, m, spec, mcpd)
	if len(spec.Containers) != 1 {
		t.Fatalf("want one agent container, got %d", len(spec.Containers))
	}
	agent := &spec.Containers[0]
	checkContainerSecurity(t, agent)

	// The socket: in an emptyDir that both containers mount at the same
	// path, and the agent's MCPD_ADDRESS names it.
	listen := flagValue(t, mcpd.Args, "listen")
	sock, ok := strings.CutPrefix(listen, "unix://")
	if !ok {
		t.Fatalf("--listen=%s: want a Unix socket", listen)
	}
	mount, _ := mountFor(t, mcpd, sock)
	if volume(t, spec, mount.Name).EmptyDir == nil || mount.ReadOnly {
		t.Errorf("the socket's volume %s: want a writable emptyDir", mount.Name)
	}
	if agentMount, _ := mountFor(t, agent, sock); agentMount.Name != mount.Name {
		t.Errorf("agent mounts %s at the socket's path, want %s", agentMount.Name, mount.Name)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range agent.Env {
		env[e.Name] = e
	}
	if got := env["MCPD_ADDRESS"].Value; got != listen {
		t.Errorf("agent MCPD_ADDRESS %q, want %q", got, listen)
	}
	if ref := env["MCPD_API_TOKEN"].ValueFrom; ref == nil || ref.SecretKeyRef == nil ||
		ref.SecretKeyRef.Name != "mcpd-api-token" || ref.SecretKeyRef.Key != "token" {
		t.Errorf("agent MCPD_API_TOKEN: %+v, want key token of Secret mcpd-api-token", env["MCPD_API_TOKEN"])
	}

	probes := map[string]*corev1.Probe{"startup": mcpd.StartupProbe, "readiness": mcpd.ReadinessProbe, "liveness": mcpd.LivenessProbe}
	for name, probe := range probes {
		want := []string{image.BinaryPath, "health", "--listen=" + listen}
		if probe == nil || probe.Exec == nil || !slices.Equal(probe.Exec.Command, want) {
			t.Errorf("%s probe: %+v, want exec %q", name, probe, want)
		}
	}

	p := newPod(t, bin, m, spec, mcpd, map[string]map[string]string{"mcpd-api-token": {"token": testToken}})
	for name, probe := range probes {
		if code, out := p.runProbe(t, probe, ""); code == 0 {
			t.Errorf("%s probe passed with no mcpd running: %s", name, out)
		}
	}
	p.start(t, mcpd, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := dial(t, "unix://"+filepath.Join(p.root, sock), insecure.NewCredentials())
	waitServing(ctx, t, conn, "mcpd.server/demo")
	checkToken(ctx, t, conn, p.token)
	for name, probe := range probes {
		if code, out := p.runProbe(t, probe, ""); code != 0 {
			t.Errorf("%s probe failed against a serving mcpd: exit %d: %s", name, code, out)
		}
	}
}

// TestShared checks deploy/kubernetes/shared: a Deployment serving TLS
// and a token on every address of the pod, probed by `mcpd health` over
// TLS, and Services that select its pods; and then runs it. mcpd with the
// manifest's flags, --listen included, passes the check that refuses an
// unguarded non-loopback listener (checkGuarded); it serves TLS and the
// token on a loopback port; and the probes pass once it does and fail
// before.
func TestShared(t *testing.T) {
	t.Parallel()
	bin := mcpdBinary(t)
	m := load(t, "shared")
	if len(m.deployments) != 1 || len(m.services) == 0 {
		t.Fatalf("shared: %d Deployments, %d Services; want one Deployment and Services", len(m.deployments), len(m.services))
	}
	d := m.deployments[0]
	spec := &d.Spec.Template.Spec
	checkPodSecurity(t, spec)
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("want one container, got %d and %d init containers", len(spec.Containers), len(spec.InitContainers))
	}
	mcpd := &spec.Containers[0]
	checkMcpdContainer(t, bin, spec, mcpd)
	checkConfigMap(t, m, spec, mcpd)

	listen := flagValue(t, mcpd.Args, "listen")
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil || host != "" {
		t.Fatalf("--listen=%s: want :PORT, every address of the pod", listen)
	}
	port, _ := strconv.Atoi(portStr)
	var grpcPort *corev1.ContainerPort
	for i := range mcpd.Ports {
		if mcpd.Ports[i].ContainerPort == int32(port) {
			grpcPort = &mcpd.Ports[i]
		}
	}
	if grpcPort == nil || grpcPort.Name == "" || grpcPort.Protocol != corev1.ProtocolTCP {
		t.Fatalf("ports %+v: want a named TCP port %d, the --listen port", mcpd.Ports, port)
	}
	// mcpd refuses a non-loopback listener without TLS (and a token).
	checkSecretFile(t, spec, mcpd, mcpd.Args, "tls-cert", "mcpd-tls", "tls.crt")
	checkSecretFile(t, spec, mcpd, mcpd.Args, "tls-key", "mcpd-tls", "tls.key")
	probes := map[string]*corev1.Probe{"startup": mcpd.StartupProbe, "readiness": mcpd.ReadinessProbe, "liveness": mcpd.LivenessProbe}
	serverName := ""
	for name, probe := range probes {
		if n := checkTLSProbe(t, spec, mcpd, name, probe, port); n != "" {
			serverName = n
		}
	}
	if pre := mcpd.Lifecycle; pre == nil || pre.PreStop == nil || pre.PreStop.Sleep == nil {
		t.Error("mcpd: want a preStop sleep, so endpoints drop the pod before SIGTERM")
	} else if grace := spec.TerminationGracePeriodSeconds; grace == nil || *grace < pre.PreStop.Sleep.Seconds+15 {
		t.Errorf("terminationGracePeriodSeconds %v: want room for preStop (%ds) and mcpd's 10s shutdown timeout", grace, pre.PreStop.Sleep.Seconds)
	}

	podLabels := labels.Set(d.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) {
		t.Errorf("Deployment selector %v does not match its pods' labels %v", d.Spec.Selector, podLabels)
	}
	for _, s := range m.services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service %s: selector %v does not select mcpd's pods %v", s.Name, s.Spec.Selector, podLabels)
		}
		for _, sp := range s.Spec.Ports {
			if sp.TargetPort.String() != grpcPort.Name && sp.TargetPort.IntValue() != port || sp.Protocol != corev1.ProtocolTCP {
				t.Errorf("Service %s port %s: target %s, want mcpd's port %s (%d)", s.Name, sp.Name, sp.TargetPort.String(), grpcPort.Name, port)
			}
			// No standard appProtocol names gRPC over TLS, and
			// kubernetes.io/h2c tells proxies the port is plaintext.
			if sp.AppProtocol != nil {
				t.Errorf("Service %s port %s: appProtocol %s; the port serves gRPC over TLS only", s.Name, sp.Name, *sp.AppProtocol)
			}
		}
		// Pods that do not set enableServiceLinks: false get this
		// Service's variables; none may be one of mcpd's settings.
		checkServiceLinks(t, bin, s)
	}

	if serverName == "" {
		t.FailNow() // checkTLSProbe said why
	}

	certs := newTestCerts(t, serverName)
	p := newPod(t, bin, m, spec, mcpd, map[string]map[string]string{
		"mcpd-api-token": {"token": testToken},
		"mcpd-tls":       {"tls.crt": certs.cert, "tls.key": certs.key, "ca.crt": certs.ca},
	})
	checkGuarded(t, p, mcpd, listen)

	addr := freeLoopback(t)
	for name, probe := range probes {
		if code, out := p.runProbe(t, probe, addr); code == 0 {
			t.Errorf("%s probe passed with no mcpd running: %s", name, out)
		}
	}
	p.start(t, mcpd, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := dial(t, "passthrough:///"+addr, credentials.NewTLS(&tls.Config{RootCAs: certs.pool, ServerName: serverName, MinVersion: tls.VersionTLS12}))
	waitServing(ctx, t, conn, "mcpd.server/demo")
	checkToken(ctx, t, conn, p.token)
	// The port speaks TLS only: a plaintext client, such as the kubelet's
	// gRPC probe, gets no answer.
	plainCtx, plainCancel := context.WithTimeout(ctx, 2*time.Second)
	defer plainCancel()
	plain := dial(t, "passthrough:///"+addr, insecure.NewCredentials())
	if resp, err := healthpb.NewHealthClient(plain).Check(plainCtx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Errorf("plaintext health check of the TLS port: %v, want an error", resp)
	}
	for name, probe := range probes {
		if code, out := p.runProbe(t, probe, addr); code != 0 {
			t.Errorf("%s probe failed against a serving mcpd: exit %d: %s", name, code, out)
		}
	}
}

// checkTLSProbe checks that probe runs `mcpd health` over TLS against
// port on the pod's loopback, trusting ca.crt of Secret mcpd-tls, and
// returns the name it checks in mcpd's certificate ("" after an error).
func checkTLSProbe(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, name string, probe *corev1.Probe, port int) string {
	t.Helper()
	if probe == nil || probe.Exec == nil || len(probe.Exec.Command) < 2 ||
		probe.Exec.Command[0] != image.BinaryPath || probe.Exec.Command[1] != "health" {
		t.Errorf("%s probe: %+v, want exec %s health (the kubelet's gRPC probe is plaintext)", name, probe, image.BinaryPath)
		return ""
	}
	args := probe.Exec.Command[2:]
	listen := flagValue(t, args, "listen")
	host, p, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() || p != strconv.Itoa(port) {
		t.Errorf("%s probe: --listen=%s, want the pod's loopback, port %d", name, listen, port)
	}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--service="); ok && v != "" {
			t.Errorf("%s probe: --service=%s, want mcpd as a whole", name, v)
		}
	}
	checkSecretFile(t, spec, c, args, "tls-ca", "mcpd-tls", "ca.crt")
	serverName := flagValue(t, args, "tls-server-name")
	if serverName == "" {
		t.Errorf("%s probe: empty --tls-server-name", name)
	}
	return serverName
}

// refusedListener is in mcpd's error when its safety check refuses a
// non-loopback listener.
const refusedListener = "is not a loopback address"

// checkGuarded shows that mcpd's safety check accepts the container's
// flags as they are, --listen included with only its port changed: a
// non-loopback listener needs TLS plus a credential. It binds nothing
// beyond loopback: the test holds 127.0.0.1:PORT, and Linux refuses to
// bind the wildcard address to a port a loopback socket listens on, so
// mcpd passes the check, which comes first, and then fails to bind. The
// same flags without TLS must fail at the check, which shows it ran.
func checkGuarded(t *testing.T, p *pod, c *corev1.Container, listen string) {
	t.Helper()
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("--listen=%s: %v", listen, err)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, port, _ := net.SplitHostPort(held.Addr().String())
	args := withListen(p.mapArgs(c.Args), net.JoinHostPort(host, port))
	withoutTLS := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--tls-") })
	for _, tc := range []struct {
		what         string
		args         []string
		want, reject string
	}{
		{"the manifest's flags", args, syscall.EADDRINUSE.Error(), refusedListener},
		{"the manifest's flags without TLS", withoutTLS, refusedListener, ""},
	} {
		code, out := p.runToExit(t, c, tc.args)
		if code != 1 || !strings.Contains(out, tc.want) || tc.reject != "" && strings.Contains(out, tc.reject) {
			t.Errorf("mcpd with %s (%q) and %s held: exit %d, output:\n%s\nwant exit 1 with %q", tc.what, tc.args, held.Addr(), code, out, tc.want)
		}
	}
}

// runToExit runs mcpd with args (mapped) in the container's environment
// and returns its exit code and output. mcpd must exit within 30s.
func (p *pod) runToExit(t *testing.T, c *corev1.Container, args []string) (int, string) {
	t.Helper()
	cmd := p.command(t, c, args)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("mcpd %q kept running; killed:\n%s", args, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// checkServiceLinks checks that none of the variables Kubernetes derives
// from Service s is an MCPD_* setting of mcpd, read from its --help.
func checkServiceLinks(t *testing.T, bin string, s *corev1.Service) {
	t.Helper()
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	settings := settingsFromHelp(string(out))
	if !settings["MCPD_LISTEN"] {
		t.Fatalf("mcpd --help lists no --listen: %s", out)
	}
	for _, v := range serviceLinkVars(s) {
		if settings[v] {
			t.Errorf("Service %s: Kubernetes sets %s in pods with service links, and mcpd reads it as a setting", s.Name, v)
		}
	}
}

// serviceLinkVars are the variables Kubernetes puts into pods for Service
// s (NAME_SERVICE_HOST, NAME_PORT_50051_TCP_ADDR, ...).
func serviceLinkVars(s *corev1.Service) []string {
	prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	vars := []string{prefix + "_SERVICE_HOST", prefix + "_SERVICE_PORT", prefix + "_PORT"}
	for _, sp := range s.Spec.Ports {
		base := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(string(sp.Protocol)))
		vars = append(vars, prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(sp.Name, "-", "_")),
			base, base+"_PROTO", base+"_PORT", base+"_ADDR")
	}
	return vars
}

// settingsFromHelp returns the MCPD_* variable of every flag that mcpd
// --help lists.
func settingsFromHelp(help string) map[string]bool {
	settings := map[string]bool{}
	for _, line := range strings.Split(help, "\n") {
		if f, ok := strings.CutPrefix(line, "  -"); ok && len(strings.Fields(f)) > 0 {
			settings["MCPD_"+strings.ToUpper(strings.ReplaceAll(strings.Fields(f)[0], "-", "_"))] = true
		}
	}
	return settings
}

// TestServiceLinkCollision shows that the check above catches a collision:
// a --port flag would read MCPD_PORT, which the Service mcpd sets.
func TestServiceLinkCollision(t *testing.T) {
	t.Parallel()
	settings := settingsFromHelp("Usage of mcpd:\n  -listen string\n    \taddress\n  -port int\n    \ta port\n")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mcpd"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 50051, Protocol: corev1.ProtocolTCP}}}}
	vars := serviceLinkVars(svc)
	if !settings["MCPD_LISTEN"] || !settings["MCPD_PORT"] || !slices.Contains(vars, "MCPD_PORT") ||
		!slices.Contains(vars, "MCPD_PORT_50051_TCP_ADDR") || !slices.Contains(vars, "MCPD_SERVICE_PORT_GRPC") {
		t.Errorf("settings %v, service variables %v: want MCPD_PORT in both", settings, vars)
	}
}

// freeLoopback returns a loopback address with a port that was free a
// moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

func dial(t *testing.T, target string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitServing waits until mcpd's health service reports SERVING for mcpd
// as a whole (what the probes ask) and for service, with no token, as the
// kubelet asks.
func waitServing(ctx context.Context, t *testing.T, conn *grpc.ClientConn, service string) {
	t.Helper()
	health := healthpb.NewHealthClient(conn)
	for _, s := range []string{"", service} {
		for {
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: s}, grpc.WaitForReady(true))
			if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("health %q: not SERVING: %v %v", s, resp, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// checkToken checks that mcpd read the token from the Secret's file: an
// RPC without it is UNAUTHENTICATED, with it OK. The request and reply are
// read as empty messages, so the test needs no generated code.
func checkToken(ctx context.Context, t *testing.T, conn *grpc.ClientConn, token string) {
	t.Helper()
	const method = "/mcpd.v1.MCPHub/ListServers"
	err := conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("%s without a token: %v, want UNAUTHENTICATED", method, err)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if err := conn.Invoke(authed, method, &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
		t.Errorf("%s with the Secret's token: %v", method, err)
	}
}

// TestEveryManifestChecked makes sure no manifest sits outside the two
// layouts the tests above check.
func TestEveryManifestChecked(t *testing.T) {
	t.Parallel()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := path.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			if dir := filepath.Dir(p); dir != "sidecar" && dir != "shared" || ext != ".yaml" {
				t.Errorf("%s: manifests live in sidecar/ or shared/ as .yaml", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
