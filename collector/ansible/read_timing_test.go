package ansible

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// writeRecapDir writes a cgroup_perf_recap dir holding one cpu.json of
// records JSON-seq records, each naming a task of nameLen bytes (all the
// same task), and returns the dir and the file's size.
func writeRecapDir(tb testing.TB, records, nameLen int) (string, int64) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "ansible-perf-1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "cpu.json"))
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	name := strings.Repeat("n", nameLen)
	for i := range records {
		fmt.Fprintf(w, "\x1e{\"timestamp\": %d.%03d, \"task_name\": %q, \"task_uuid\": \"02fc0000-0001-bfc5-3899-000000000004\", \"value\": %d.5}\n",
			1796009960+i/4, i%4*250, name, i%97)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir, fi.Size()
}

// TestReadProfileMemoryIsNotTheFileSize reads two profiling files of the
// same 12000 samples, one of plugin-sized records (1.4 MB) and one whose
// records name a 4 KB task (49 MB): a read that held the file (os.ReadFile)
// would allocate the 47 MB difference, a streaming one the same for both.
func TestReadProfileMemoryIsNotTheFileSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 49 MB file")
	}
	const records = 12_000
	alloc := func(nameLen int) (allocBytes uint64, fileBytes int64) {
		dir, size := writeRecapDir(t, records, nameLen)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		jobs, err := Read(dir, ReadOptions{})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Samples() != records {
			t.Fatalf("read %d jobs, want 1 of %d samples", len(jobs), records)
		}
		return after.TotalAlloc - before.TotalAlloc, size
	}
	smallAlloc, smallSize := alloc(16)
	bigAlloc, bigSize := alloc(4000)
	t.Logf("file %d bytes: allocated %d; file %d bytes: allocated %d", smallSize, smallAlloc, bigSize, bigAlloc)
	if bigSize-smallSize < 40<<20 {
		t.Fatalf("the files differ by %d bytes, want at least 40 MiB", bigSize-smallSize)
	}
	if bigAlloc > smallAlloc+1<<20 {
		t.Fatalf("a file %d bytes larger with the same samples allocated %d bytes more, want at most 1 MiB more",
			bigSize-smallSize, bigAlloc-smallAlloc)
	}
}

// BenchmarkReadProfile reads a profiling file of plugin-sized records
// (name=short, about 110 bytes each) and of records naming a long task
// (name=long, about 1 KB), and reports the bytes allocated per byte of file:
// the samples Read returns, not the file held whole.
//
//	go test -run '^$' -bench BenchmarkReadProfile -benchmem ./collector/ansible/ | benchstat -
func BenchmarkReadProfile(b *testing.B) {
	for _, c := range []struct {
		name             string
		records, nameLen int
	}{{"short", 100_000, 16}, {"long", 10_000, 1000}} {
		b.Run(fmt.Sprintf("name=%s/records=%d", c.name, c.records), func(b *testing.B) {
			dir, size := writeRecapDir(b, c.records, c.nameLen)
			b.ReportAllocs()
			b.SetBytes(size)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			for b.Loop() {
				jobs, err := Read(dir, ReadOptions{})
				if err != nil || len(jobs) != 1 || jobs[0].Samples() != c.records {
					b.Fatalf("Read: %v", err)
				}
			}
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/float64(size), "alloc-B/file-B")
		})
	}
}

// BenchmarkReadEvent reads a job event file whose stdout holds size bytes
// of a task's output, and reports the bytes allocated per byte of file.
//
//	go test -run '^$' -bench BenchmarkReadEvent -benchmem ./collector/ansible/ | benchstat -
func BenchmarkReadEvent(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("stdout=%d", size), func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "7-c81db707-8d10-4071-936e-b57264864300.json")
			body := `{"uuid": "c81db707-8d10-4071-936e-b57264864300", "counter": 7, "event": "runner_on_ok", "stdout": "` +
				strings.Repeat("ok: [localhost] \\u001b[0m\\n", size/26+1)[:size] +
				`", "created": "2026-11-30T03:39:35.979439", "event_data": {"task": "t", "task_uuid": "02fc0000-0001-bfc5-3899-000000000005"}}`
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
			r := NewEventReader()
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			for b.Loop() {
				if ev, err := r.ReadFile(p); err != nil || ev.Counter != 7 || ev.Task != "t" {
					b.Fatalf("ReadFile: %+v, %v", ev, err)
				}
			}
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/float64(len(body)), "alloc-B/file-B")
		})
	}
}
