package ansible

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// copyRealTree copies a real tree into a temp dir so a test can damage it.
func copyRealTree(t *testing.T, name string) string {
	t.Helper()
	src := realTree(name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// readWithin runs Read and fails the test if it does not return within
// a few seconds: a read that blocks on a named pipe or never ends at
// /dev/zero fails here instead of hanging the test binary.
func readWithin(t *testing.T, path string, opts ReadOptions) ([]*Job, error) {
	t.Helper()
	type result struct {
		jobs []*Job
		err  error
	}
	done := make(chan result, 1)
	go func() {
		jobs, err := Read(path, opts)
		done <- result{jobs, err}
	}()
	select {
	case r := <-done:
		return r.jobs, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("Read(%q) did not return within 5s", path)
		return nil, nil
	}
}

// TestReadRefusesWhatIsNoRegularFile puts in a real runner tree, in place
// of one of its files, something whose read would block forever, never
// end, or come from outside the tree, and checks Read refuses it at once,
// naming the file and why, and returns no job.
func TestReadRefusesWhatIsNoRegularFile(t *testing.T) {
	const (
		event   = "artifacts/demo2/job_events/6-02fc0000-0001-bfc5-3899-000000000005.json"
		profile = "profiling_data/1-02fc0000-0001-bfc5-3899-000000000005-cpu.json"
	)
	replace := func(t *testing.T, root, rel string) string {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return p
	}
	fifo := func(t *testing.T, root, rel string) string {
		p := replace(t, root, rel)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target string) func(t *testing.T, root, rel string) string {
		return func(t *testing.T, root, rel string) string {
			p := replace(t, root, rel)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	// A valid copy of the file, outside the tree.
	outside := func(t *testing.T, root, rel string) string {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "elsewhere.json")
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return link(out)(t, root, rel)
	}
	f := func(name, rel string, damage func(t *testing.T, root, rel string) string, wantErr error, wantText string) {
		t.Run(name, func(t *testing.T) {
			root := copyRealTree(t, "runner-basic")
			p := damage(t, root, rel)
			jobs, err := readWithin(t, root, ReadOptions{})
			if !errors.Is(err, wantErr) {
				t.Fatalf("Read: %v, want %v", err, wantErr)
			}
			if jobs != nil {
				t.Errorf("Read returned %d jobs with its error", len(jobs))
			}
			for _, w := range []string{p, wantText} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	f("fifo as job event", event, fifo, ErrNotRegular, "named pipe")
	f("fifo as profiling file", profile, fifo, ErrNotRegular, "named pipe")
	f("fifo as extravars", "env/extravars", fifo, ErrNotRegular, "named pipe")
	f("fifo as status", "artifacts/demo2/status", fifo, ErrNotRegular, "named pipe")
	f("link to /dev/zero as job event", event, link("/dev/zero"), ErrNotRegular, "character device")
	f("link to /dev/zero as profiling file", profile, link("/dev/zero"), ErrNotRegular, "character device")
	f("link out of the tree as job event", event, outside, ErrOutsideTree, "elsewhere.json")
	f("link out of the tree as profiling file", profile, outside, ErrOutsideTree, "elsewhere.json")
	f("link to /etc/passwd as extravars", "env/extravars", link("/etc/passwd"), ErrOutsideTree, "/etc/passwd")
	f("dir linked out of the tree", "artifacts/demo2/job_events", func(t *testing.T, root, rel string) string {
		dir := filepath.Join(root, filepath.FromSlash(rel))
		moved := filepath.Join(t.TempDir(), "job_events")
		if err := os.Rename(dir, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}, ErrOutsideTree, "outside")
}

// TestReadKeepsLinksInsideTheTree: a link to a file of the same tree is read.
func TestReadKeepsLinksInsideTheTree(t *testing.T) {
	want, err := Read(realTree("runner-basic"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := copyRealTree(t, "runner-basic")
	p := filepath.Join(root, "profiling_data", "1-02fc0000-0001-bfc5-3899-000000000005-cpu.json")
	kept := filepath.Join(root, "kept-cpu.json")
	if err := os.Rename(p, kept); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "kept-cpu.json"), p); err != nil {
		t.Fatal(err)
	}
	got, err := readWithin(t, root, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(renderJobs(got)) != string(renderJobs(want)) {
		t.Fatalf("the tree read through a link differs:\n%s\nwant\n%s", renderJobs(got), renderJobs(want))
	}
}

// TestReadRefusesLargeFiles: a file over ReadOptions.MaxFileBytes, or a
// sparse 8 GiB one over the default, is refused naming it and the limit,
// before anything is read.
func TestReadRefusesLargeFiles(t *testing.T) {
	root := copyRealTree(t, "runner-basic")
	// The largest file of the tree.
	p, size := "", int64(0)
	err := filepath.WalkDir(root, func(q string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil && fi.Size() > size {
			p, size = q, fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = readWithin(t, root, ReadOptions{MaxFileBytes: size - 1})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) {
		t.Fatalf("Read with a limit 1 byte short of %s: %v, want ErrTooLarge naming it", p, err)
	}
	if _, err := readWithin(t, root, ReadOptions{MaxFileBytes: size}); err != nil {
		t.Fatalf("Read with the limit at the largest file's size: %v", err)
	}

	p = filepath.Join(root, "profiling_data", "2-02fc0000-0001-bfc5-3899-000000000006-memory.json")
	if err := os.Truncate(p, 8<<30); err != nil {
		t.Skipf("cannot make a sparse 8 GiB file: %v", err)
	}
	_, err = readWithin(t, root, ReadOptions{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "8589934592 bytes") {
		t.Fatalf("Read of an 8 GiB file: %v, want ErrTooLarge naming it and its size", err)
	}
}

// TestOpenDoesNotBlockOnSwappedFIFO: a named pipe put in place after the
// check is opened without blocking and refused.
func TestOpenDoesNotBlockOnSwappedFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "1-x.json")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := newFileGate("", 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := g.openChecked(p, nil) // as after a check that saw a regular file
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("open of a named pipe: %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("open of a named pipe blocked")
	}
}

// TestOpenRefusesAFileSwappedAfterItsCheck: a link retargeted out of the
// tree between the check and the open is not read.
func TestOpenRefusesAFileSwappedAfterItsCheck(t *testing.T) {
	root := t.TempDir()
	inside, outside := filepath.Join(root, "cpu-real.json"), filepath.Join(t.TempDir(), "secret.json")
	for _, p := range []string{inside, outside} {
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "cpu.json")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	g, err := newFileGate(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := g.stat(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if f, err := g.openChecked(link, checked); !errors.Is(err, errChanged) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("open of a link retargeted after its check: %v, want errChanged", err)
	}
}

// TestBoundedFileStopsAFileThatGrows: reads past the limit fail, though
// the file was within it when opened.
func TestBoundedFileStopsAFileThatGrows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cpu.json")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, _ := newFileGate("", 10)
	f, err := g.open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, err := io.ReadAll(f)
	if !errors.Is(err, ErrTooLarge) || string(b) != "0123456789" {
		t.Fatalf("ReadAll = %q, %v; want the 10 bytes and ErrTooLarge", b, err)
	}

	// At the limit exactly, the read ends cleanly.
	f2, err := newFileGate("", 14)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f2.open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "0123456789more" {
		t.Fatalf("ReadAll at the limit = %q, %v", b, err)
	}
}

// TestEventReaderRefusesFIFO: the live follower's reader refuses a named
// pipe among the event files at once.
func TestEventReaderRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "3-x.json")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := NewEventReader().ReadFile(p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || errors.Is(err, ErrBadEvent) || !strings.Contains(err.Error(), p) {
			t.Fatalf("ReadFile of a named pipe: %v, want ErrNotRegular naming it", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile of a named pipe blocked")
	}
}
