package discover

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	f := func(line string, want procStat, wantComm string) {
		t.Helper()
		in := []byte(line)
		orig := bytes.Clone(in)
		got, comm, ok := parseStat(in)
		if !ok {
			t.Fatalf("parseStat(%q) failed", line)
		}
		if got != want || string(comm) != wantComm {
			t.Fatalf("parseStat(%q) = %+v, %q; want %+v, %q", line, got, comm, want, wantComm)
		}
		if !bytes.Equal(in, orig) {
			t.Fatalf("parseStat modified its input")
		}
	}
	// A real line of this machine's /proc/<pid>/stat (a copy of sleep
	// named ansible-playbook: the kernel keeps 15 bytes of the name).
	f("18318 (ansible-playboo) S 18317 18314 12090 0 -1 4194304 125 0 0 0 0 0 0 0 20 0 1 0 1900180 2990080 424 18446744073709551615 94286220587008 94286220604937 140728032884848 0 0 0 0 6 0 1 0 0 17 0 0 0 0 0 0 94286220619024 94286220620288 94286324183040 140728032889328 140728032889349 140728032889349 140728032890853 0\n",
		procStat{state: 'S', ppid: 18317, threads: 1, start: 1900180, rssPages: 424}, "ansible-playboo")
	// A comm with spaces and parentheses: the comm ends at the last ')'.
	f("952 (sh) (x) y) R 951 951 951 0 -1 4194560 1200 0 3 0 7 8 9 10 20 0 3 0 1200 2457600 200 18446744073709551615 1 1 0\n",
		procStat{state: 'R', ppid: 951, utime: 7, stime: 8, cutime: 9, cstime: 10, threads: 3, start: 1200, rssPages: 200}, "sh) (x) y")
	f("7 () Z 1 0 0 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 99 0 0",
		procStat{state: 'Z', ppid: 1, utime: 5, stime: 6, threads: 1, start: 99}, "")

	bad := func(line string) {
		t.Helper()
		if _, _, ok := parseStat([]byte(line)); ok {
			t.Fatalf("parseStat(%q) succeeded; want failure", line)
		}
	}
	bad("")
	bad("12 sleep S 1")                                              // no parentheses
	bad("12 (sleep) S 1 0 0 0 -1 0 0 0 0 0 5 6")                     // cut short
	bad("12 (sleep) S x 0 0 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 99 0 0") // ppid not a number
}

func TestEnvValue(t *testing.T) {
	env := []byte("PATH=/usr/bin\x00NOTJOB_ID=7\x00JOB_ID_OLD=8\x00AWX_TOKEN=s3cret\x00JOB_ID=103\x00INVENTORY_ID=3\x00")
	f := func(key, want string, wantOK bool) {
		t.Helper()
		v, ok := envValue(env, []byte(key+"="))
		if string(v) != want || ok != wantOK {
			t.Fatalf("envValue(%q) = %q, %v; want %q, %v", key, v, ok, want, wantOK)
		}
	}
	f("JOB_ID", "103", true)
	f("INVENTORY_ID", "3", true)
	f("PATH", "/usr/bin", true)
	f("HOSTNAME", "", false)
	f("JOB", "", false)
	// The last entry may lack its NUL.
	if v, ok := envValue([]byte("A=1\x00JOB_ID=5"), []byte("JOB_ID=")); string(v) != "5" || !ok {
		t.Fatalf("envValue without a final NUL = %q, %v", v, ok)
	}
}

func TestParseJobID(t *testing.T) {
	f := func(in string, want int64, wantOK bool) {
		t.Helper()
		got, ok := parseJobID([]byte(in))
		if got != want || ok != wantOK {
			t.Fatalf("parseJobID(%q) = %d, %v; want %d, %v", in, got, ok, want, wantOK)
		}
	}
	f("42", 42, true)
	f(" 42\n", 42, true)
	f("0", 0, false)
	f("-3", 0, false)
	f("4x", 0, false)
	f("", 0, false)
	f("1234567890123456789", 0, false) // too long to be an AWX id
}

func TestConmonArgs(t *testing.T) {
	f := func(cmdline, wantCID, wantName string) {
		t.Helper()
		cid, name := conmonArgs([]byte(cmdline))
		if string(cid) != wantCID || string(name) != wantName {
			t.Fatalf("conmonArgs(%q) = %q, %q; want %q, %q", cmdline, cid, name, wantCID, wantName)
		}
	}
	f("/usr/bin/conmon\x00--api-version\x001\x00-c\x00abc\x00-u\x00abc\x00-n\x00ansible_runner_7\x00--exit-dir\x00/x\x00", "abc", "ansible_runner_7")
	f("conmon\x00--cid=abc\x00--name\x00ansible_runner_8\x00", "abc", "ansible_runner_8")
	f("conmon\x00--cid\x00abc\x00--name=web\x00", "abc", "web")
	f("conmon\x00-c\x00", "", "")
	f("", "", "")
}

func TestAppendPids(t *testing.T) {
	got := appendPids([]int{1}, []byte("12\n7\n\nx\n30"))
	if want := []int{1, 12, 7, 30}; !slices.Equal(got, want) {
		t.Fatalf("appendPids = %v; want %v", got, want)
	}
}

func TestRulesValidate(t *testing.T) {
	if _, err := DefaultRules().compile(); err != nil {
		t.Fatalf("default rules: %v", err)
	}
	f := func(name string, edit func(*Rules)) {
		t.Helper()
		r := DefaultRules()
		edit(&r)
		if _, err := r.compile(); err == nil {
			t.Fatalf("%s: compile succeeded; want an error", name)
		}
	}
	f("no capture", func(r *Rules) { r.Scopes[0].Name = `^libpod-[0-9a-f]{64}\.scope$` })
	f("bad regexp", func(r *Rules) { r.Scopes[0].Name = `(` })
	f("top with slash", func(r *Rules) { r.Scopes[0].Top = "user.slice/user-1000.slice" })
	f("bad kind", func(r *Rules) { r.Scopes[0].Kind = KindProcessTree })
	f("depth", func(r *Rules) { r.MaxDepth = 0 })
	f("env key", func(r *Rules) { r.JobIDEnv = "JOB=ID" })
	f("conmon no capture", func(r *Rules) { r.ConmonName = `^ansible_runner_` })
	f("pod no capture", func(r *Rules) { r.PodName = `^automation-job-` })
	f("no trusted", func(r *Rules) { r.Trusted = nil })
	// Disabled rules need no pattern.
	r := DefaultRules()
	r.ConmonComm, r.ConmonName, r.PodNameEnv, r.PodName = "", "", "", ""
	if _, err := r.compile(); err != nil {
		t.Fatalf("rules with conmon and pod name off: %v", err)
	}
}

// FuzzParseStat builds stat lines the way the kernel does (any comm up to
// 15 bytes but NUL, any field values) and checks they parse back.
func FuzzParseStat(f *testing.F) {
	f.Add("ansible-playboo", uint32(1), uint64(5), uint64(6), uint64(7), uint64(8), uint16(1), uint64(99), uint64(424))
	f.Add("sh) (x) y", uint32(951), uint64(0), uint64(0), uint64(0), uint64(0), uint16(3), uint64(1), uint64(0))
	f.Add(") ) )", uint32(0), uint64(1<<40), uint64(0), uint64(0), uint64(0), uint16(65535), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, comm string, ppid uint32, utime, stime, cutime, cstime uint64, threads uint16, start, rss uint64) {
		comm = strings.ReplaceAll(comm, "\x00", "")
		if len(comm) > commLen {
			comm = comm[:commLen]
		}
		line := fmt.Sprintf("4242 (%s) S %d 1 1 0 -1 4194560 0 0 0 0 %d %d %d %d 20 0 %d 0 %d 0 %d 18446744073709551615 1 1 0\n",
			comm, ppid, utime, stime, cutime, cstime, threads, start, rss)
		got, gotComm, ok := parseStat([]byte(line))
		want := procStat{state: 'S', ppid: int(ppid), utime: utime, stime: stime, cutime: cutime, cstime: cstime,
			threads: uint64(threads), start: start, rssPages: rss}
		if !ok || got != want || string(gotComm) != comm {
			t.Fatalf("parseStat(%q) = %+v, %q, %v; want %+v, %q", line, got, gotComm, ok, want, comm)
		}
	})
}

// TestReadZeroesOutgrownBuffer reads an environment larger than the
// reader's buffer: the buffer it outgrew, which held the environment's
// first part, is zeroed, and wipe zeroes the one it kept.
func TestReadZeroesOutgrownBuffer(t *testing.T) {
	env := []byte(strings.Repeat("AWS_SECRET_ACCESS_KEY=s3cr3t\x00", 400) + "JOB_ID=42\x00")
	file := filepath.Join(t.TempDir(), "environ")
	if err := os.WriteFile(file, env, 0o600); err != nil {
		t.Fatal(err)
	}
	var r fileReader
	r.buf = make([]byte, 4096)
	first := r.buf
	got, err := r.read(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(env) {
		t.Fatalf("read %d bytes, want the file's %d", len(got), len(env))
	}
	if len(r.buf) <= len(first) {
		t.Fatalf("buffer stayed %d bytes for a %d-byte file", len(r.buf), len(env))
	}
	if i := bytes.IndexFunc(first, func(c rune) bool { return c != 0 }); i >= 0 {
		t.Errorf("the outgrown buffer still holds %q at %d", first[i:min(i+20, len(first))], i)
	}
	r.wipe()
	if i := bytes.IndexFunc(r.buf, func(c rune) bool { return c != 0 }); i >= 0 {
		t.Errorf("after wipe the buffer still holds %q at %d", r.buf[i:min(i+20, len(r.buf))], i)
	}
}
