package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The release identity the tests build with.
const (
	testVersion  = "9.8.7-rc.1"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
	testBranch   = "release-9.8"
	testDate     = "2026-11-30T03:39:40Z"
)

// distOut is the output of one make-dist-like run for linux/amd64, shared
// by the tests of this file (building takes a while).
var distOut string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "peakline-dist-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		distOut = filepath.Join(dir, "dist")
		return m.Run()
	}())
}

// runDist runs the dist program from the module root once, as make dist
// does, for linux/amd64 only.
func runDist(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a release: not with -short")
	}
	if _, err := os.Stat(filepath.Join(distOut, "SHA256SUMS")); err == nil {
		return distOut
	}
	cmd := exec.Command("go", "run", "./scripts/dist", "--out", distOut, "--arch", "amd64",
		"--version", testVersion, "--revision", testRevision, "--branch", testBranch, "--build-date", testDate)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dist: %v\n%s", err, out)
	}
	return distOut
}

// TestDistUsage: bad flags exit 2 naming the flag.
func TestDistUsage(t *testing.T) {
	f := func(args []string, want string) {
		t.Helper()
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), want) || !errorsAs(err, &ue) {
			t.Errorf("dist %q: %v, want a usage error containing %q", args, err, want)
		}
	}
	ok := []string{"--revision", testRevision, "--build-date", testDate}
	f(append([]string{"--version", "v1.0.0"}, ok...), "--version")
	f(append([]string{"--version", ""}, ok...), "--version")
	f([]string{"--version", "1.0.0", "--build-date", testDate}, "--revision")
	f([]string{"--version", "1.0.0", "--revision", "x", "--build-date", "yesterday"}, "--build-date")
	f(append([]string{"--version", "1.0.0", "--arch", "386"}, ok...), "--arch")
}

func errorsAs(err error, target *usageError) bool {
	ue, ok := err.(usageError)
	if ok {
		*target = ue
	}
	return ok
}

// TestDistSums: SHA256SUMS lists every artifact, each with its hash.
func TestDistSums(t *testing.T) {
	out := runDist(t)
	b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's format", sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		if hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: sum %s, file hashes to %x", file, sum, h)
		}
		listed = append(listed, file)
	}
	want := []string{
		"peakline-" + testVersion + ".linux-amd64.docker.tar",
		"peakline-" + testVersion + ".linux-amd64.tar.gz",
		"peakline-" + testVersion + ".oci.tar",
		"peakline-9.8.7~rc.1-1.x86_64.rpm",
		"peakline-chart-" + testVersion + ".tgz",
		"peakline_9.8.7~rc.1_amd64.deb",
	}
	if !reflect.DeepEqual(listed, want) {
		t.Errorf("SHA256SUMS lists %q, want %q", listed, want)
	}
	if _, err := os.Stat(filepath.Join(out, "build")); !os.IsNotExist(err) {
		t.Errorf("the build directory is left in the output: %v", err)
	}
}

// tarEntry is a file of a tar archive.
type tarEntry struct {
	mode     int64
	uid, gid int
	data     []byte
	dir      bool
}

func readTar(t *testing.T, r io.Reader) map[string]tarEntry {
	t.Helper()
	tr := tar.NewReader(r)
	out := map[string]tarEntry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = tarEntry{mode: h.Mode, uid: h.Uid, gid: h.Gid, data: data, dir: h.Typeflag == tar.TypeDir}
	}
}

// checkStatic fails unless b is a static linux ELF executable of machine.
func checkStatic(t *testing.T, what string, b []byte, machine elf.Machine) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: not an ELF file: %v", what, err)
	}
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: machine %v type %v, want %v ET_EXEC", what, f.Machine, f.Type, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has a %v program header: dynamically linked", what, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: needs %v", what, libs)
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s: not stripped (has .symtab)", what)
	}
}

// TestDistTarball: the tarball holds the static binary, units, example
// settings and docs under one top directory, and the binary reports the
// release it was built as.
func TestDistTarball(t *testing.T) {
	out := runDist(t)
	f, err := os.Open(filepath.Join(out, "peakline-"+testVersion+".linux-amd64.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	entries := readTar(t, gz)
	top := "peakline-" + testVersion + ".linux-amd64"
	var names []string
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{top}
	for _, d := range []string{"README.md", "docs", "docs/installing.md", "etc", "etc/agent.yaml", "etc/auth.yaml", "etc/serve.yaml",
		"peakline", "systemd", "systemd/peakline-agent-environ.conf", "systemd/peakline-agent.service", "systemd/peakline.service"} {
		want = append(want, top+"/"+d)
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("tarball entries\n got %q\nwant %q", names, want)
	}
	bin := entries[top+"/peakline"]
	for name, mode := range map[string]int64{"peakline": 0o755, "etc/auth.yaml": 0o600, "etc/serve.yaml": 0o640,
		"systemd/peakline-agent.service": 0o644, "systemd/peakline-agent-environ.conf": 0o644} {
		if got := entries[top+"/"+name].mode; got != mode {
			t.Errorf("%s: mode %o, want %o", name, got, mode)
		}
	}
	for _, fi := range releaseFiles {
		if fi.src == "" {
			continue
		}
		src, err := os.ReadFile(filepath.Join("../..", fi.src))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(entries[top+"/"+fi.tarPath].data, src) {
			t.Errorf("%s in the tarball differs from %s", fi.tarPath, fi.src)
		}
	}
	checkStatic(t, "tarball peakline", bin.data, elf.EM_X86_64)

	exe := filepath.Join(t.TempDir(), "peakline")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(exe, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := fmt.Sprintf("peakline %s\ncommit:     %s\nbranch:     %s\nbuild date: %s\n", testVersion, testRevision, testBranch, testDate)
	if !strings.HasPrefix(string(got), wantVersion) || !strings.Contains(string(got), "go version: go1.") {
		t.Errorf("peakline version:\n%s\nwant it to start\n%s", got, wantVersion)
	}
	checkServeBuildInfo(t, exe)
}

// checkServeBuildInfo starts the release binary's serve on a free
// loopback port and reads its release from /metrics and from the
// Prometheus API's buildinfo.
func checkServeBuildInfo(t *testing.T, exe string) {
	t.Helper()
	cmd := exec.Command(exe, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`serving on (http://\S+?)/? `)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text() + " "); m != nil {
				urls <- strings.TrimSuffix(m[1], "/")
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not say where it listens within 30 s")
	}
	get := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	metrics := get("/metrics")
	line := regexp.MustCompile(`(?m)^peakline_build_info\{.*\} 1$`).FindString(metrics)
	for _, l := range []string{`version="` + testVersion + `"`, `revision="` + testRevision + `"`, `branch="` + testBranch + `"`, `goarch="amd64"`} {
		if !strings.Contains(line, l) {
			t.Errorf("peakline_build_info %q lacks %s", line, l)
		}
	}
	var bi struct {
		Status string `json:"status"`
		Data   struct {
			Version, Revision, Branch, BuildDate, GoVersion string
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(get("/prometheus/api/v1/status/buildinfo")), &bi); err != nil {
		t.Fatal(err)
	}
	if bi.Status != "success" || bi.Data.Revision != testRevision || bi.Data.Branch != testBranch || bi.Data.BuildDate != testDate ||
		!strings.HasPrefix(bi.Data.Version, "3.") || !strings.HasPrefix(bi.Data.GoVersion, "go1.") {
		t.Errorf("buildinfo %+v: want the release's revision, branch and date under the engine's Prometheus 3 version", bi)
	}
}

// TestDistImage: the OCI layout's index holds the image of each platform:
// a non-root user, the labels, a /data volume, and one layer with the
// static binary; the docker-archive holds the same image.
func TestDistImage(t *testing.T) {
	out := runDist(t)
	p, err := layout.FromPath(filepath.Join(out, "peakline-"+testVersion+".oci"))
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(om.Manifests) != 1 || om.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("layout index %+v: want one index tagged %s", om.Manifests, testVersion)
	}
	idx, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" || len(im.Manifests) != 1 ||
		im.Manifests[0].Platform == nil || im.Manifests[0].Platform.OS != "linux" || im.Manifests[0].Platform.Architecture != "amd64" {
		t.Fatalf("image index %+v: want one OCI manifest for linux/amd64", im)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("user %q platform %s/%s, want 65532:65532 linux/amd64", c.User, cf.OS, cf.Architecture)
	}
	if !reflect.DeepEqual(c.Volumes, map[string]struct{}{"/data": {}}) || !reflect.DeepEqual(c.Entrypoint, []string{"/usr/bin/peakline"}) {
		t.Errorf("volumes %v entrypoint %v, want /data and /usr/bin/peakline", c.Volumes, c.Entrypoint)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.source":   "https://github.com/peakline/peakline",
		"org.opencontainers.image.created":  testDate,
	} {
		if c.Labels[k] != want {
			t.Errorf("label %s=%q, want %q", k, c.Labels[k], want)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := readTar(t, rc)
	bin := files["usr/bin/peakline"]
	if bin.mode != 0o755 || bin.uid != 0 {
		t.Errorf("usr/bin/peakline mode %o uid %d, want 755 root", bin.mode, bin.uid)
	}
	checkStatic(t, "image peakline", bin.data, elf.EM_X86_64)
	if d := files["data"]; !d.dir || d.uid != 65532 || d.gid != 65532 {
		t.Errorf("data %+v: want a directory of 65532:65532", d)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "peakline:x:65532:65532:") || len(files["etc/ssl/certs/ca-certificates.crt"].data) == 0 {
		t.Errorf("passwd %q, CA bundle %d bytes: want the peakline user and the CA certificates", files["etc/passwd"].data, len(files["etc/ssl/certs/ca-certificates.crt"].data))
	}

	tag, _ := name.NewTag("ghcr.io/peakline/peakline:" + testVersion)
	dimg, err := tarball.ImageFromPath(filepath.Join(out, "peakline-"+testVersion+".linux-amd64.docker.tar"), &tag)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	got, err := dimg.ConfigName()
	if err != nil || got != want {
		t.Errorf("docker-archive config %v (%v), want the layout's %v", got, err, want)
	}
	var _ v1.Image = dimg
}

// TestDistImageSkopeo reads the three image forms with skopeo, a reader
// of the formats that is not go-containerregistry: it copies each
// platform out of the OCI layout and the OCI archive (checking every
// blob's digest) and inspects the docker-archive.
func TestDistImageSkopeo(t *testing.T) {
	skopeo := needTool(t, "skopeo")
	out := runDist(t)
	inspect := func(ref string, args ...string) map[string]any {
		t.Helper()
		b, err := exec.Command(skopeo, append(append([]string{"inspect"}, args...), ref)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo inspect %s: %v\n%s", ref, err, b)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	layoutRef := "oci:" + filepath.Join(out, "peakline-"+testVersion+".oci") + ":" + testVersion
	archiveRef := "oci-archive:" + filepath.Join(out, "peakline-"+testVersion+".oci.tar") + ":" + testVersion
	dockerRef := "docker-archive:" + filepath.Join(out, "peakline-"+testVersion+".linux-amd64.docker.tar")
	for _, ref := range []string{layoutRef, archiveRef} {
		dst := t.TempDir()
		if b, err := exec.Command(skopeo, "copy", "--override-os", "linux", "--override-arch", "amd64", ref, "dir:"+dst).CombinedOutput(); err != nil {
			t.Fatalf("skopeo copy %s: %v\n%s", ref, err, b)
		}
	}
	for _, ref := range []string{layoutRef, archiveRef, dockerRef} {
		v := inspect(ref, "--override-os", "linux", "--override-arch", "amd64")
		labels, _ := v["Labels"].(map[string]any)
		if v["Architecture"] != "amd64" || v["Os"] != "linux" || labels["org.opencontainers.image.version"] != testVersion {
			t.Errorf("skopeo inspect %s: %v", ref, v)
		}
	}
}

// TestDistChart: the packaged chart has the release as its version and
// appVersion, and (where helm is) lints and renders the release's image.
func TestDistChart(t *testing.T) {
	out := runDist(t)
	tgz := filepath.Join(out, "peakline-chart-"+testVersion+".tgz")
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, gz)
	chart := string(files["peakline/Chart.yaml"].data)
	if !strings.Contains(chart, "\nversion: "+testVersion+"\n") || !strings.Contains(chart, "\nappVersion: \""+testVersion+"\"\n") {
		t.Errorf("Chart.yaml:\n%s\nwant version and appVersion %s", chart, testVersion)
	}
	for _, name := range []string{"peakline/values.yaml", "peakline/templates/serve.yaml", "peakline/templates/agent.yaml", "peakline/templates/openshift.yaml"} {
		src, err := os.ReadFile(filepath.Join("../..", chartDir, strings.TrimPrefix(name, "peakline/")))
		if err != nil || !bytes.Equal(src, files[name].data) {
			t.Errorf("%s differs from the checkout's (%v)", name, err)
		}
	}
	helm, err := filepath.Abs("../../bin/helm")
	if _, serr := os.Stat(helm); err != nil || serr != nil {
		helm = needTool(t, "helm")
	}
	if out, err := exec.Command(helm, "lint", "--strict", "--kube-version", "1.30.0", tgz).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	rendered, err := exec.Command(helm, "template", "pl", tgz, "--kube-version", "1.30.0").Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rendered), "image: ghcr.io/peakline/peakline:"+testVersion+"\n"); n != 2 {
		t.Errorf("the rendering names the release's image %d times, want 2 (serve and agent)", n)
	}
}

// TestDistDeb reads the .deb with dpkg-deb: control fields, conffiles,
// maintainer scripts, and each file's owner and mode.
func TestDistDeb(t *testing.T) {
	dpkgDeb := needTool(t, "dpkg-deb")
	deb := filepath.Join(runDist(t), "peakline_9.8.7~rc.1_amd64.deb")
	field := func(name string) string {
		out, err := exec.Command(dpkgDeb, "-f", deb, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	for k, want := range map[string]string{"Package": "peakline", "Version": "9.8.7~rc.1", "Architecture": "amd64"} {
		if got := field(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	info, err := exec.Command(dpkgDeb, "-I", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"conffiles", "preinst", "postinst", "prerm", "postrm"} {
		if !regexp.MustCompile(`(?m)^\s+\d+ bytes,\s+\d+ lines\s+\*?\s+` + s + `\b`).Match(info) {
			t.Errorf("dpkg-deb -I lacks %s:\n%s", s, info)
		}
	}
	ctl := t.TempDir()
	if out, err := exec.Command(dpkgDeb, "-e", deb, ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v %s", err, out)
	}
	conffiles, _ := os.ReadFile(filepath.Join(ctl, "conffiles"))
	if got := strings.Fields(string(conffiles)); !reflect.DeepEqual(got, []string{"/etc/peakline/agent.yaml", "/etc/peakline/auth.yaml", "/etc/peakline/serve.yaml"}) {
		t.Errorf("conffiles %q", got)
	}
	preinst, _ := os.ReadFile(filepath.Join(ctl, "preinst"))
	if want, _ := os.ReadFile("../../deploy/packaging/preinstall.sh"); !bytes.Equal(preinst, want) {
		t.Errorf("preinst is not deploy/packaging/preinstall.sh")
	}
	contents, err := exec.Command(dpkgDeb, "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(contents)), "\n") {
		f := strings.Fields(l) // -rw-r----- root/peakline 557 2026-12-02 00:50 ./etc/peakline/agent.yaml
		got[strings.TrimPrefix(f[len(f)-1], ".")] = f[0] + " " + f[1]
	}
	// Every file the package holds, exactly, and /etc/peakline; the other
	// directories are the ones these imply.
	want := map[string]string{
		"/usr/bin/peakline":                              "-rwxr-xr-x root/root",
		"/etc/peakline/":                                 "drwxr-x--- root/peakline",
		"/etc/peakline/serve.yaml":                       "-rw-r----- root/peakline",
		"/etc/peakline/agent.yaml":                       "-rw-r----- root/peakline",
		"/etc/peakline/auth.yaml":                        "-rw------- peakline/peakline",
		"/usr/lib/systemd/system/peakline.service":       "-rw-r--r-- root/root",
		"/usr/lib/systemd/system/peakline-agent.service": "-rw-r--r-- root/root",
		// Shipped, not active: no drop-in directory under /usr/lib/systemd.
		"/usr/share/peakline/systemd/peakline-agent-environ.conf": "-rw-r--r-- root/root",
		"/usr/share/doc/peakline/installing.md":                   "-rw-r--r-- root/root",
		"/usr/share/doc/peakline/README.md":                       "-rw-r--r-- root/root",
	}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: %q, want %q", path, got[path], w)
		}
	}
	for path, g := range got {
		if _, ok := want[path]; !ok && !strings.HasPrefix(g, "d") {
			t.Errorf("the .deb holds %s (%s), which no release file is", path, g)
		}
	}
}

// TestDistRPM reads the .rpm with rpm -qp: name, version, config files,
// scripts, and each file's owner and mode.
func TestDistRPM(t *testing.T) {
	rpmCmd := needTool(t, "rpm")
	pkg := filepath.Join(runDist(t), "peakline-9.8.7~rc.1-1.x86_64.rpm")
	q := func(args ...string) string {
		out, err := exec.Command(rpmCmd, append([]string{"-qp", "--nosignature"}, append(args, pkg)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qp %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := q("--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}"); got != "peakline 9.8.7~rc.1 1 x86_64" {
		t.Errorf("rpm NVRA %q", got)
	}
	if got := strings.Fields(q("-c")); !reflect.DeepEqual(got, []string{"/etc/peakline/agent.yaml", "/etc/peakline/auth.yaml", "/etc/peakline/serve.yaml"}) {
		t.Errorf("config files %q", got)
	}
	// Every entry, exactly: config files are "cn" (%config(noreplace)),
	// and the agent's environ drop-in is an ordinary file under
	// /usr/share, not active.
	wantFiles := strings.Join([]string{
		"/etc/peakline drwxr-x--- root:peakline ",
		"/etc/peakline/agent.yaml -rw-r----- root:peakline cn",
		"/etc/peakline/auth.yaml -rw------- peakline:peakline cn",
		"/etc/peakline/serve.yaml -rw-r----- root:peakline cn",
		"/usr/bin/peakline -rwxr-xr-x root:root ",
		"/usr/lib/systemd/system/peakline-agent.service -rw-r--r-- root:root ",
		"/usr/lib/systemd/system/peakline.service -rw-r--r-- root:root ",
		"/usr/share/doc/peakline/README.md -rw-r--r-- root:root ",
		"/usr/share/doc/peakline/installing.md -rw-r--r-- root:root ",
		"/usr/share/peakline/systemd/peakline-agent-environ.conf -rw-r--r-- root:root ",
	}, "\n")
	out, err := exec.Command(rpmCmd, "-qp", "--nosignature", "--queryformat", "[%{FILENAMES} %{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags}\n]", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm -qp --queryformat: %v\n%s", err, out)
	}
	if got := strings.TrimSuffix(string(out), "\n"); got != wantFiles {
		t.Errorf("rpm files:\n%s\nwant\n%s", got, wantFiles)
	}
	if got := q("--scripts"); !strings.Contains(got, "useradd --system --gid peakline") || !strings.Contains(got, "preuninstall scriptlet") {
		t.Errorf("rpm scripts:\n%s", got)
	}
}

// TestDistDebInstall installs the .deb on this machine with dpkg -i and
// checks what an administrator sees: peakline version prints the commit,
// the peakline user and /etc/peakline exist; then removes it. It changes
// the machine, so it runs only as root under CI=true.
func TestDistDebInstall(t *testing.T) {
	if os.Getenv("CI") != "true" || os.Geteuid() != 0 {
		t.Skip("installs a package: only as root under CI=true")
	}
	dpkg := needTool(t, "dpkg")
	deb := filepath.Join(runDist(t), "peakline_9.8.7~rc.1_amd64.deb")
	if _, err := os.Stat("/usr/bin/peakline"); err == nil {
		t.Fatal("/usr/bin/peakline exists already: not installing over it")
	}
	if out, err := exec.Command(dpkg, "-i", deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(dpkg, "--purge", "peakline").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge: %v\n%s", err, out)
		}
		if _, err := os.Stat("/usr/bin/peakline"); !os.IsNotExist(err) {
			t.Errorf("after dpkg --purge /usr/bin/peakline: %v", err)
		}
	})
	out, err := exec.Command("/usr/bin/peakline", "version").Output()
	if err != nil || !strings.Contains(string(out), "commit:     "+testRevision) {
		t.Errorf("peakline version: %v\n%s", err, out)
	}
	u, err := user.Lookup("peakline")
	if err != nil {
		t.Fatalf("the peakline user: %v", err)
	}
	g, err := user.LookupGroup("peakline")
	if err != nil || g.Gid != u.Gid {
		t.Fatalf("the peakline group %+v (%v), want the user's primary group %s", g, err, u.Gid)
	}
	for path, want := range map[string]string{
		"/etc/peakline":            "drwxr-x--- 0:" + g.Gid,
		"/etc/peakline/auth.yaml":  "-rw------- " + u.Uid + ":" + g.Gid,
		"/etc/peakline/serve.yaml": "-rw-r----- 0:" + g.Gid,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if got := statLine(fi); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	if out, err := exec.Command(dpkg, "-r", "peakline").CombinedOutput(); err != nil {
		t.Fatalf("dpkg -r: %v\n%s", err, out)
	}
	if _, err := os.Stat("/usr/bin/peakline"); !os.IsNotExist(err) {
		t.Errorf("after dpkg -r /usr/bin/peakline: %v", err)
	}
	if _, err := os.Stat("/etc/peakline/auth.yaml"); err != nil {
		t.Errorf("dpkg -r removed the conffile auth.yaml (only --purge may): %v", err)
	}
}
