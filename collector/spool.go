package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// spoolExt ends the name of a spooled batch; spoolRejectedExt that of a
// batch the server refused as malformed, kept for inspection and not resent.
const (
	spoolExt         = ".json.gz"
	spoolRejectedExt = ".rejected"
)

// spool is a directory of ingest batches the server has not acknowledged:
// each file is the exact gzip body to POST, named
// <unix ns>-<pid>-<seq>.json.gz so that names sort by age. Files are
// written to a temporary name and renamed, so a crash leaves no half batch.
// Several collectors may share a directory: one may resend another's
// batch, which the server stores once. It is safe for concurrent use.
type spool struct {
	dir string
	pid int
	now func() time.Time
	seq atomic.Uint64
}

// openSpool creates dir if needed.
func openSpool(dir string, now func() time.Time) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create spool directory %q: %w", dir, err)
	}
	return &spool{dir: dir, pid: os.Getpid(), now: now}, nil
}

// defaultSpoolDir is <user cache dir>/peakline/spool, else
// /var/tmp/peakline-spool.
func defaultSpoolDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "peakline", "spool")
	}
	return filepath.Join("/var/tmp", "peakline-spool")
}

// write stores body and returns the file's path.
func (s *spool) write(body []byte) (string, error) {
	name := fmt.Sprintf("%020d-%d-%06d%s", s.now().UnixNano(), s.pid, s.seq.Add(1), spoolExt)
	file := filepath.Join(s.dir, name)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("cannot spool batch: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("cannot spool batch: %w", err)
	}
	return file, nil
}

// list returns the spooled batches, oldest first.
func (s *spool) list() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list spool directory %q: %w", s.dir, err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), spoolExt) {
			files = append(files, filepath.Join(s.dir, e.Name()))
		}
	}
	slices.Sort(files)
	return files, nil
}

// reject keeps a refused batch as <name>.rejected: from its spool file
// when it has one, else from body.
func (s *spool) reject(file string, body []byte) (string, error) {
	if file == "" {
		var err error
		if file, err = s.write(body); err != nil {
			return "", err
		}
	}
	if err := os.Rename(file, file+spoolRejectedExt); err != nil {
		return "", fmt.Errorf("cannot keep rejected batch: %w", err)
	}
	return file + spoolRejectedExt, nil
}
