// Package disktest gives tests a small real file system to fill: a tmpfs
// mounted for the test, a filler file that leaves a chosen number of
// bytes free, and its removal. It is imported by tests only; it owns no
// store and no server.
package disktest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size bytes on a new folder and returns it;
// it is unmounted after every later cleanup (a store's Close, a serve
// stopped) ran. The test is skipped only where mounting is not permitted
// (not root; CI runs as root).
func MountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to mount a %d-byte tmpfs (CI runs as root)", size)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("mount -t tmpfs -o size=%d: %v (not permitted here)", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a filler file into dir that leaves about leave bytes of its
// file system free, and returns its path for Free.
func Fill(t testing.TB, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := free - leave; n > 0; n -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(n, int64(len(buf)))]); err != nil {
			t.Fatalf("write filler: %v", err)
		}
	}
	return path
}

// Free removes the filler file Fill wrote, giving its space back.
func Free(t testing.TB, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
