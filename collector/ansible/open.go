package ansible

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultMaxFileBytes is the largest file Read reads when
// ReadOptions.MaxFileBytes is 0. A cgroup_perf_recap file of a ten-hour job
// polled every 250ms is about 15 MB; a job event holding a task's whole
// output can be a few MB.
const DefaultMaxFileBytes int64 = 256 << 20

var (
	// ErrNotRegular means a file Read would read is a named pipe, a
	// device, a socket or a directory: reading it could block forever or
	// never end.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge means a file is larger than ReadOptions.MaxFileBytes.
	ErrTooLarge = errors.New("file larger than the limit")
	// ErrOutsideTree means a symbolic link in the tree Read was given
	// leads to a file outside it.
	ErrOutsideTree = errors.New("symbolic link leads out of the tree")
)

// fileGate decides which files a Read may open: regular files of at most
// maxBytes, under root when root is set. It is not safe to change while a
// Read runs.
type fileGate struct {
	root     string // the tree's real path (symbolic links resolved); "": no tree check
	maxBytes int64
}

// newFileGate returns the gate of the tree at root ("" for none).
func newFileGate(root string, maxBytes int64) (fileGate, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileBytes
	}
	g := fileGate{maxBytes: maxBytes}
	if root != "" {
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			return g, fmt.Errorf("cannot resolve %q: %w", root, err)
		}
		if g.root, err = filepath.Abs(real); err != nil {
			return g, fmt.Errorf("cannot resolve %q: %w", root, err)
		}
	}
	return g, nil
}

// check refuses path unless it is a regular file of at most g.maxBytes
// whose real path lies under g.root. It opens nothing, so a named pipe
// cannot block it. A missing file wraps fs.ErrNotExist.
func (g fileGate) check(path string) error {
	_, err := g.stat(path)
	return err
}

// stat is check, returning what the file checked is.
func (g fileGate) stat(path string) (fs.FileInfo, error) {
	lfi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	fi, real := lfi, ""
	if lfi.Mode()&fs.ModeSymlink != 0 {
		if real, err = filepath.EvalSymlinks(path); err != nil {
			return nil, fmt.Errorf("cannot resolve symbolic link: %w", err)
		}
		if fi, err = os.Stat(real); err != nil {
			return nil, err
		}
	}
	if err := g.checkInfo(fi); err != nil {
		if real != "" {
			return nil, fmt.Errorf("%w (the symbolic link leads to %q)", err, real)
		}
		return nil, err
	}
	if g.root == "" {
		return fi, nil
	}
	if real == "" {
		// A directory above the file may be a link out of the tree.
		if real, err = filepath.EvalSymlinks(path); err != nil {
			return nil, fmt.Errorf("cannot resolve: %w", err)
		}
	}
	if abs, err := filepath.Abs(real); err == nil {
		real = abs
	}
	if rel, err := filepath.Rel(g.root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%w: it leads to %q, outside %q", ErrOutsideTree, real, g.root)
	}
	return fi, nil
}

// checkInfo refuses what is not a regular file of at most g.maxBytes.
func (g fileGate) checkInfo(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: it is %s", ErrNotRegular, kindOf(fi.Mode()))
	}
	if fi.Size() > g.maxBytes {
		return fmt.Errorf("%w: it holds %d bytes, the limit is %d", ErrTooLarge, fi.Size(), g.maxBytes)
	}
	return nil
}

// open checks path (see check) and opens it for a bounded read. The open
// does not block on a named pipe swapped in after the check (O_NONBLOCK),
// and the opened file must be the one checked; reads past g.maxBytes fail
// with ErrTooLarge (a file that grows while it is read).
func (g fileGate) open(path string) (*boundedFile, error) {
	checked, err := g.stat(path)
	if err != nil {
		return nil, err
	}
	return g.openChecked(path, checked)
}

// errChanged means a file was replaced between its check and its open.
var errChanged = errors.New("replaced while it was opened; read again")

// openChecked is open after the check that found checked (nil: none):
// what path names may have been swapped since.
func (g fileGate) openChecked(path string, checked fs.FileInfo) (*boundedFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = g.checkInfo(fi)
	}
	if err == nil && checked != nil && !os.SameFile(checked, fi) {
		err = errChanged
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &boundedFile{f: f, left: g.maxBytes, maxBytes: g.maxBytes}, nil
}

// boundedFile reads an opened regular file up to a byte limit.
type boundedFile struct {
	f        *os.File
	left     int64
	maxBytes int64
}

// Read reads like os.File.Read and fails with ErrTooLarge once the file
// holds more than the limit.
func (b *boundedFile) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.f.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%w: it grew past the limit of %d bytes while read", ErrTooLarge, b.maxBytes)
		} else if err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.f.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedFile) Close() error { return b.f.Close() }

// kindOf names a file's type for a refusal.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// readSmall reads a whole small file through g, at most limit bytes (and
// g's limit); a missing file is no error and yields nil.
func (g fileGate) readSmall(path string, limit int64) ([]byte, error) {
	f, err := g.open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: it holds more than %d bytes", ErrTooLarge, limit)
	}
	return data, nil
}

// OpenRegular opens path for reading when it is a regular file of at most
// maxBytes (DefaultMaxFileBytes when 0), as Read opens every file: it
// refuses named pipes, devices and sockets (ErrNotRegular) without
// blocking, and larger files (ErrTooLarge), and reads from the returned
// reader fail with ErrTooLarge past maxBytes. Close it when done.
func OpenRegular(path string, maxBytes int64) (io.ReadCloser, error) {
	g, _ := newFileGate("", maxBytes)
	return g.open(path)
}
