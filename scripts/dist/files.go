package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// installed is one file of a release as the packages install it; the
// tarball carries the same files under tarPath.
type installed struct {
	src     string // path in the checkout; "" for the binary
	dst     string // absolute path the packages install it at
	tarPath string // path inside the tarball's top directory
	mode    os.FileMode
	owner   string
	group   string
	config  bool // an administrator's file: kept on upgrade, noreplace
}

// releaseFiles are the files of a release besides /etc/peakline itself.
// Settings are readable by the service's group only; the auth file holds
// credentials and is the service user's alone (serve reads it as that
// user); the agent's token files are the administrator's to create
// (root:peakline 0640, docs/installing.md). The agent's environ drop-in
// lies in /usr/share, not in a drop-in directory: it grants two
// capabilities that only the environ discovery modes need, and the
// administrator who needs them copies it to /etc/systemd/system.
var releaseFiles = []installed{
	{src: "", dst: "/usr/bin/peakline", tarPath: "peakline", mode: 0o755, owner: "root", group: "root"},
	{src: "deploy/systemd/peakline.service", dst: "/usr/lib/systemd/system/peakline.service", tarPath: "systemd/peakline.service", mode: 0o644, owner: "root", group: "root"},
	{src: "deploy/systemd/peakline-agent.service", dst: "/usr/lib/systemd/system/peakline-agent.service", tarPath: "systemd/peakline-agent.service", mode: 0o644, owner: "root", group: "root"},
	{src: "deploy/systemd/peakline-agent-environ.conf", dst: "/usr/share/peakline/systemd/peakline-agent-environ.conf", tarPath: "systemd/peakline-agent-environ.conf", mode: 0o644, owner: "root", group: "root"},
	{src: "deploy/etc/serve.yaml", dst: "/etc/peakline/serve.yaml", tarPath: "etc/serve.yaml", mode: 0o640, owner: "root", group: "peakline", config: true},
	{src: "deploy/etc/agent.yaml", dst: "/etc/peakline/agent.yaml", tarPath: "etc/agent.yaml", mode: 0o640, owner: "root", group: "peakline", config: true},
	{src: "deploy/etc/auth.yaml", dst: "/etc/peakline/auth.yaml", tarPath: "etc/auth.yaml", mode: 0o600, owner: "peakline", group: "peakline", config: true},
	{src: "docs/installing.md", dst: "/usr/share/doc/peakline/installing.md", tarPath: "docs/installing.md", mode: 0o644, owner: "root", group: "root"},
	{src: "README.md", dst: "/usr/share/doc/peakline/README.md", tarPath: "README.md", mode: 0o644, owner: "root", group: "root"},
}

// writeTarball writes peakline-VERSION.linux-ARCH.tar.gz: one top
// directory of that name holding the binary, units, example settings and
// docs, every entry dated the build date and owned by root.
func writeTarball(out string, rel release, p platform, bin string) (string, error) {
	top := fmt.Sprintf("peakline-%s.linux-%s", rel.Version, p.Arch)
	dst := filepath.Join(out, top+".tar.gz")
	f, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	addDir := func(name string) error {
		if dirs[name] {
			return nil
		}
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: rel.BuildDate, Format: tar.FormatPAX})
	}
	if err := addDir(top); err != nil {
		return "", err
	}
	for _, fi := range releaseFiles {
		src := fi.src
		if src == "" {
			src = bin
		}
		name := top + "/" + fi.tarPath
		if d := filepath.Dir(fi.tarPath); d != "." {
			if err := addDir(top + "/" + d); err != nil {
				return "", err
			}
		}
		// A tarball is unpacked by whoever installs it: no owners, and the
		// credentials example no more readable than in the packages.
		if err := addFile(tw, name, src, fi.mode, rel); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return dst, f.Close()
}

// addFile writes src as a regular file entry named name.
func addFile(tw *tar.Writer, name, src string, mode os.FileMode, rel release) error {
	r, err := os.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(mode), Size: st.Size(), ModTime: rel.BuildDate, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
