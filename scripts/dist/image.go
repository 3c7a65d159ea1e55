package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageUID is the image's user and group: not root, and the number
// distroless images use, so a volume prepared for one fits the other.
const imageUID = 65532

// caBundle is where the image gets the CA certificates serve and the
// agent trust for HTTPS (AWX, the server, remote engines): the build
// host's Debian ca-certificates bundle.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// writeImage writes the image index of every platform in binaries (GOARCH
// to binary) as an OCI layout, the same layout as one tar (podman load,
// docker load, skopeo oci-archive:) and a docker-archive per platform for
// older Docker engines. Each image is one layer: the static binary, the
// CA bundle, passwd and group naming the peakline user, and /data.
func writeImage(out string, rel release, binaries map[string]string, repo, source string) ([]string, error) {
	tag, err := name.NewTag(repo + ":" + rel.Version)
	if err != nil {
		return nil, fmt.Errorf("--image: %w", err)
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("the image's CA certificates: %w (install ca-certificates)", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "peakline",
		"org.opencontainers.image.description": "Per-task CPU, memory and PID graphs of Ansible and AWX jobs",
		"org.opencontainers.image.version":     rel.Version,
		"org.opencontainers.image.revision":    rel.Revision,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.url":         source,
		"org.opencontainers.image.created":     rel.BuildDate.Format("2006-01-02T15:04:05Z07:00"),
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	var archs []string
	for a := range binaries {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	var written []string
	for _, arch := range archs {
		img, err := platformImage(rel, arch, binaries[arch], ca, labels)
		if err != nil {
			return nil, fmt.Errorf("image linux/%s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
		docker := filepath.Join(out, fmt.Sprintf("peakline-%s.linux-%s.docker.tar", rel.Version, arch))
		if err := tarball.WriteToFile(docker, tag, img); err != nil {
			return nil, fmt.Errorf("write %s: %w", docker, err)
		}
		written = append(written, docker)
	}
	dir := filepath.Join(out, fmt.Sprintf("peakline-%s.oci", rel.Version))
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": rel.Version,
		"io.containerd.image.name":          tag.String(),
	})); err != nil {
		return nil, fmt.Errorf("write %s: %w", dir, err)
	}
	archive := dir + ".tar"
	if err := tarDir(archive, dir, rel); err != nil {
		return nil, err
	}
	return append(written, archive), nil
}

// platformImage is the image of one platform.
func platformImage(rel release, arch, bin string, ca []byte, labels map[string]string) (v1.Image, error) {
	layerTar, err := rootfs(rel, bin, ca)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: rel.BuildDate}, CreatedBy: "peakline dist: static binary, CA bundle, passwd, /data", Comment: "peakline " + rel.Version},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: rel.BuildDate}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", imageUID, imageUID),
		Entrypoint:   []string{"/usr/bin/peakline"},
		Cmd:          []string{"serve", "--data", "/data", "--listen", "0.0.0.0:8080", "--auth-file", "/etc/peakline/auth.yaml"},
		Env:          []string{"PATH=/usr/bin", "SSL_CERT_FILE=" + caBundle},
		WorkingDir:   "/data",
		Volumes:      map[string]struct{}{"/data": {}},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Labels:       labels,
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the tar of the image's one layer.
func rootfs(rel release, bin string, ca []byte) ([]byte, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\npeakline:x:%d:%d:Peakline:/data:/sbin/nologin\n", imageUID, imageUID)
	group := fmt.Sprintf("root:x:0:\npeakline:x:%d:\n", imageUID)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: rel.BuildDate, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b)), ModTime: rel.BuildDate, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, step := range []func() error{
		func() error { return dir("data/", 0o750, imageUID) },
		func() error { return dir("etc/", 0o755, 0) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return dir("etc/peakline/", 0o755, 0) },
		func() error { return dir("etc/ssl/", 0o755, 0) },
		func() error { return dir("etc/ssl/certs/", 0o755, 0) },
		func() error { return file("etc/ssl/certs/ca-certificates.crt", 0o644, ca) },
		func() error { return dir("usr/", 0o755, 0) },
		func() error { return dir("usr/bin/", 0o755, 0) },
		func() error { return file("usr/bin/peakline", 0o755, binary) },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir into the tar dst, paths relative to
// dir, dated the build date.
func tarDir(dst, dir string, rel release) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel2, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel2 + "/", Mode: 0o755, ModTime: rel.BuildDate, Format: tar.FormatPAX})
		}
		return addFile(tw, rel2, path, 0o644, rel)
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
