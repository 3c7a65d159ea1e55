package ship

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// spoolExt ends the name of a spooled batch; spoolRejectedExt that of a
// batch the server refused, kept for inspection and not resent;
// spoolTempExt that of a batch being written.
const (
	spoolExt         = ".json.gz"
	spoolRejectedExt = ".rejected"
	spoolTempExt     = ".tmp"
)

// Spool is a directory of ingest batches the server has not acknowledged:
// each file is the exact gzip body to POST, named
// <unix ns>-<pid>-<seq>.json.gz so that names sort by age.
//
// A batch is written to a temporary name, fsynced, renamed and the
// directory fsynced before write returns: once it has, the batch survives
// a crash of the process and a power cut, and no crash leaves half a batch
// under a Spool name. Removing a sent batch and keeping a rejected one
// also fsync the directory, so that a power cut cannot bring a sent batch
// back to be sent again (harmless, the server stores it once, but wasted)
// or a rejected one back into the queue.
//
// Several collectors may share a directory: one may resend another's
// batch, which the server stores once. It is safe for concurrent use.
type Spool struct {
	dir string
	pid int
	now func() time.Time
	seq atomic.Uint64
}

// Dir returns the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// OpenSpool creates dir if needed and removes the temporary files of
// collectors that died while writing a batch.
func OpenSpool(dir string, now func() time.Time) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create spool directory %q: %w", dir, err)
	}
	s := &Spool{dir: dir, pid: os.Getpid(), now: now}
	if err := s.removeStaleTemps(); err != nil {
		return nil, err
	}
	return s, nil
}

// DefaultSpoolDir is <user cache dir>/peakline/spool, else
// /var/tmp/peakline-spool.
func DefaultSpoolDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "peakline", "spool")
	}
	return filepath.Join("/var/tmp", "peakline-spool")
}

// write stores body durably and returns the file's path.
func (s *Spool) write(body []byte) (string, error) {
	name := fmt.Sprintf("%020d-%d-%06d%s", s.now().UnixNano(), s.pid, s.seq.Add(1), spoolExt)
	file := filepath.Join(s.dir, name)
	tmp := file + spoolTempExt
	if err := writeSynced(tmp, body); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("cannot spool batch: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("cannot spool batch: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		// The rename may not be on disk: the batch is not spooled, and
		// the caller keeps it.
		_ = os.Remove(file)
		return "", fmt.Errorf("cannot spool batch: %w", err)
	}
	return file, nil
}

// remove deletes a sent batch. A file already gone (another collector
// sent it) is no error.
func (s *Spool) remove(file string) error {
	if err := os.Remove(file); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cannot remove sent spool file: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("cannot remove sent spool file: %w", err)
	}
	return nil
}

// list returns the spooled batches, oldest first.
func (s *Spool) list() ([]string, error) {
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
func (s *Spool) reject(file string, body []byte) (string, error) {
	if file == "" {
		var err error
		if file, err = s.write(body); err != nil {
			return "", err
		}
	}
	if err := os.Rename(file, file+spoolRejectedExt); err != nil {
		return "", fmt.Errorf("cannot keep rejected batch: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return "", fmt.Errorf("cannot keep rejected batch: %w", err)
	}
	return file + spoolRejectedExt, nil
}

// removeStaleTemps removes the <name>.tmp files whose writer is a process
// that no longer exists: it was killed between creating the file and
// renaming it, so the batch was never spooled (its collector still held it
// in memory, or lost it with the process).
func (s *Spool) removeStaleTemps() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("cannot list spool directory %q: %w", s.dir, err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), spoolExt+spoolTempExt)
		if !ok || e.IsDir() {
			continue
		}
		// <unix ns>-<pid>-<seq>
		parts := strings.Split(name, "-")
		if len(parts) != 3 {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid <= 0 || pid == s.pid || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot remove stale spool file: %w", err)
		}
	}
	return nil
}

// writeSynced creates name (which must not exist) holding data, and
// fsyncs it.
func writeSynced(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs a directory, making the creations, renames and removals
// of names in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
