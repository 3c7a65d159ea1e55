package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// writePackages writes the .deb and the .rpm of p. Both install
// releaseFiles and /etc/peakline (root:peakline 0750); their scripts
// (deploy/packaging) create the peakline system user and group before the
// files are unpacked, reload systemd after, and stop and disable the
// services on removal. Neither enables a service.
func writePackages(out string, rel release, p platform, bin, source string) ([]string, error) {
	contents := files.Contents{{
		Destination: "/etc/peakline",
		Type:        files.TypeDir,
		FileInfo:    &files.ContentFileInfo{Mode: 0o750, Owner: "root", Group: "peakline"},
	}}
	for _, fi := range releaseFiles {
		src := fi.src
		if src == "" {
			src = bin
		}
		typ := files.TypeFile
		if fi.config {
			typ = files.TypeConfigNoReplace
		}
		contents = append(contents, &files.Content{
			Source:      src,
			Destination: fi.dst,
			Type:        typ,
			FileInfo:    &files.ContentFileInfo{Mode: fi.mode, Owner: fi.owner, Group: fi.group},
		})
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:        "peakline",
		Arch:        p.Arch,
		Platform:    "linux",
		Version:     rel.Version,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "Peakline <peakline@users.noreply.github.com>",
		Description: "Per-task CPU, memory and PID graphs of Ansible and AWX jobs.\nServer (peakline serve), execution-node agent (peakline agent) and CLI.",
		Vendor:      "Peakline",
		Homepage:    source,
		MTime:       rel.BuildDate,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts: nfpm.Scripts{
				PreInstall:  "deploy/packaging/preinstall.sh",
				PostInstall: "deploy/packaging/postinstall.sh",
				PreRemove:   "deploy/packaging/preremove.sh",
				PostRemove:  "deploy/packaging/postremove.sh",
			},
			RPM: nfpm.RPM{Group: "System Environment/Daemons"},
		},
	})
	var written []string
	for _, pk := range []nfpm.Packager{deb.Default, rpm.DefaultRPM} {
		// Each packager prepares (and rewrites) the contents it is given.
		pi := *info
		pi.Contents = slicesClone(info.Contents)
		dst := filepath.Join(out, pk.ConventionalFileName(&pi))
		f, err := os.Create(dst)
		if err != nil {
			return nil, err
		}
		pi.Target = dst
		if err := pk.Package(&pi, f); err != nil {
			f.Close()
			return nil, fmt.Errorf("package %s: %w", filepath.Base(dst), err)
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		written = append(written, dst)
	}
	return written, nil
}

// slicesClone copies the contents deeply enough for a packager to change
// its copy.
func slicesClone(c files.Contents) files.Contents {
	out := make(files.Contents, len(c))
	for i, x := range c {
		cp := *x
		if x.FileInfo != nil {
			fi := *x.FileInfo
			cp.FileInfo = &fi
		}
		out[i] = &cp
	}
	return out
}
