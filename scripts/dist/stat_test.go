package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// needTool finds a command on PATH, or skips the test; under CI=true
// (.ci/run installs the tools) it fails it.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI=true: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// statLine is a file's mode, uid and gid as "drwxr-x--- 0:998".
func statLine(fi os.FileInfo) string {
	st := fi.Sys().(*syscall.Stat_t)
	mode := fi.Mode().String()
	if fi.IsDir() {
		mode = "d" + mode[1:]
	}
	return fmt.Sprintf("%s %d:%d", mode, st.Uid, st.Gid)
}
