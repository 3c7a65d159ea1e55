// Command dist builds Peakline's release artifacts (make dist): for each
// target platform a static binary, a tarball, a .deb and an .rpm (nfpm),
// then an OCI image index of all platforms (go-containerregistry, no
// container daemon), the Helm chart set to the release, and SHA256SUMS of
// every file it wrote.
//
// It runs from the module root and reads the units, example settings,
// package scripts and the chart from deploy/.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// release is the identity linked into the binary and written into the
// packages' and the image's metadata.
type release struct {
	Version   string // semver without "v": 1.2.0, 0.0.0-g4ea68d0
	Revision  string // full commit hash
	Branch    string
	BuildDate time.Time // the commit's date: same commit, same bytes
}

// ldflags are the linker flags of a release binary: stripped, with the
// release identity in github.com/prometheus/common/version.
func (r release) ldflags() string {
	const pkg = "github.com/prometheus/common/version"
	return strings.Join([]string{"-s", "-w",
		"-X", pkg + ".Version=" + r.Version,
		"-X", pkg + ".Revision=" + r.Revision,
		"-X", pkg + ".Branch=" + r.Branch,
		"-X", pkg + ".BuildDate=" + r.BuildDate.UTC().Format(time.RFC3339),
	}, " ")
}

// platform is one target: a Go GOARCH on linux.
type platform struct{ Arch string }

func (p platform) String() string { return "linux/" + p.Arch }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	out := fs.String("out", "dist", "directory the artifacts are written to (emptied first)")
	var rel release
	fs.StringVar(&rel.Version, "version", "", "release version, semver without v (scripts/version.sh)")
	fs.StringVar(&rel.Revision, "revision", "", "commit hash")
	fs.StringVar(&rel.Branch, "branch", "", "branch name")
	date := fs.String("build-date", "", "build date, RFC 3339 (the commit's date)")
	archs := fs.String("arch", "amd64,arm64", "GOARCH values to build for, comma-separated")
	image := fs.String("image", "ghcr.io/peakline/peakline", "image repository; the tag is the version")
	source := fs.String("source", "https://github.com/peakline/peakline", "source repository URL, in the packages and the image labels")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if rel.Version == "" || strings.HasPrefix(rel.Version, "v") {
		return usageError{fmt.Errorf("--version: give the semver without v (e.g. 1.2.0), got %q", rel.Version)}
	}
	if rel.Revision == "" {
		return usageError{errors.New("--revision: the commit hash is required")}
	}
	t, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return usageError{fmt.Errorf("--build-date: must be RFC 3339, got %q", *date)}
	}
	rel.BuildDate = t.UTC()
	var plats []platform
	for a := range strings.SplitSeq(*archs, ",") {
		if a != "amd64" && a != "arm64" {
			return usageError{fmt.Errorf("--arch: amd64 and arm64 are built, got %q", a)}
		}
		plats = append(plats, platform{a})
	}

	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var written []string
	binaries := map[string]string{}
	for _, p := range plats {
		start := time.Now()
		bin := filepath.Join(*out, "build", p.Arch, "peakline")
		if err := buildBinary(ctx, rel, p, bin); err != nil {
			return err
		}
		binaries[p.Arch] = bin
		tgz, err := writeTarball(*out, rel, p, bin)
		if err != nil {
			return err
		}
		pkgs, err := writePackages(*out, rel, p, bin, *source)
		if err != nil {
			return err
		}
		written = append(written, tgz)
		written = append(written, pkgs...)
		fmt.Fprintf(stdout, "dist: %s: %s %s (%s)\n", p, filepath.Base(tgz), strings.Join(baseNames(pkgs), " "), time.Since(start).Round(time.Millisecond))
	}
	start := time.Now()
	imgFiles, err := writeImage(*out, rel, binaries, *image, *source)
	if err != nil {
		return err
	}
	written = append(written, imgFiles...)
	chart, err := writeChart(*out, rel)
	if err != nil {
		return err
	}
	written = append(written, chart)
	fmt.Fprintf(stdout, "dist: chart %s\n", filepath.Base(chart))
	fmt.Fprintf(stdout, "dist: image %s:%s: %s (%s)\n", *image, rel.Version, strings.Join(baseNames(imgFiles), " "), time.Since(start).Round(time.Millisecond))
	if err := writeSums(filepath.Join(*out, "SHA256SUMS"), written); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(*out, "build"))
}

// buildBinary links the static release binary of p at dst.
func buildBinary(ctx context.Context, rel release, p platform, dst string) error {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags", rel.ldflags(), "-o", dst, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+p.Arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s: %w", p, err)
	}
	return nil
}

// writeSums writes SHA256SUMS in sha256sum's format (sha256sum -c reads
// it), one line per file by base name, sorted.
func writeSums(dst string, files []string) error {
	var lines []string
	for _, f := range files {
		h := sha256.New()
		r, err := os.Open(f)
		if err != nil {
			return err
		}
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return fmt.Errorf("hash %s: %w", f, err)
		}
		lines = append(lines, hex.EncodeToString(h.Sum(nil))+"  "+filepath.Base(f)+"\n")
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return os.WriteFile(dst, []byte(strings.Join(lines, "")), 0o644)
}

func baseNames(paths []string) []string {
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}
