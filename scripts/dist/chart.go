package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// chartDir is the Helm chart in the checkout.
const chartDir = "deploy/helm/peakline"

// chartVersionRe and appVersionRe find the two version lines of Chart.yaml.
var (
	chartVersionRe = regexp.MustCompile(`(?m)^version: .*$`)
	appVersionRe   = regexp.MustCompile(`(?m)^appVersion: .*$`)
)

// writeChart packages the chart as helm package does (a gzipped tar of
// peakline/...), with version and appVersion set to the release, so the
// packaged chart runs the image of the same release by its tag.
func writeChart(out string, rel release) (string, error) {
	dst := filepath.Join(out, fmt.Sprintf("peakline-chart-%s.tgz", rel.Version))
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(chartDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel2, err := filepath.Rel(chartDir, path)
		if err != nil {
			return err
		}
		if rel2 == "Chart.yaml" {
			if !chartVersionRe.Match(b) || !appVersionRe.Match(b) {
				return fmt.Errorf("%s: no version or appVersion line to set", path)
			}
			b = chartVersionRe.ReplaceAll(b, []byte("version: "+rel.Version))
			b = appVersionRe.ReplaceAll(b, []byte(fmt.Sprintf("appVersion: %q", rel.Version)))
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "peakline/" + filepath.ToSlash(rel2), Mode: 0o644, Size: int64(len(b)), ModTime: rel.BuildDate, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("package the chart: %w", err)
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return dst, os.WriteFile(dst, buf.Bytes(), 0o644)
}
