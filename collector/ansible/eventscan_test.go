package ansible

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// checkLikeUnmarshal checks that decodeEvent accepts data exactly when
// json.Unmarshal into a rawEvent does, with the same result.
func checkLikeUnmarshal(t *testing.T, data []byte) {
	t.Helper()
	var got, want rawEvent
	gotErr := decodeEvent(bytes.NewReader(data), &got)
	wantErr := json.Unmarshal(data, &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("decodeEvent(%q): %v; json.Unmarshal: %v", data, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeEvent(%q) = %+v (event_data %+v), json.Unmarshal %+v (event_data %+v)", data, got, got.EventData, want, want.EventData)
	}
}

func TestDecodeEventLikeUnmarshal(t *testing.T) {
	f := func(data string) {
		t.Helper()
		checkLikeUnmarshal(t, []byte(data))
	}
	// Kept fields, and how encoding/json matches their keys.
	f(`{"uuid": "u", "counter": 3, "event": "playbook_on_task_start", "created": "2026-11-30T03:39:35.979439"}`)
	f(`{"UUID": "u", "Counter": 3, "EVENT": "e"}`)
	f(`{"uu\u0069d": "u", "counter": 3}`)
	f(`{"uuıd": "u"}`)                            // the dotless i is no i under case folding
	f("{\"\u212aey\": 1}")                        // the Kelvin sign folds to k: no such field, skipped
	f("{\"tas\u212a\": 1}")                       // nor at the top level
	f("{\"event_data\": {\"tas\u212a\": \"t\"}}") // but event_data's "task"
	f(`{"uuid": "a", "UUID": "b"}`)
	f(`{"counter": 1, "counter": null}`)
	f(`{"counter": 1.5}`)
	f(`{"counter": "3"}`)
	f(`{"counter": 1e2}`)
	f(`{"counter": 99999999999999999999}`)
	f(`{"uuid": 5, "counter": 3}`)
	f(`{"uuid": {"a": [1, 2]}, "counter": 3}`)
	f(`{"created": "x\ny"}`)
	f(`{"created": "tab\there \u00e9 \ud83d\ude00"}`)
	// event_data, and what is skipped.
	f(`{"event_data": {"task": "t", "name": "n", "task_uuid": "x", "play": "p", "role": "r", "task_path": "a.yml:3", "playbook": "pb", "res": {"stdout": "` + strings.Repeat("x", 5000) + `"}}}`)
	f(`{"event_data": null, "counter": 1}`)
	f(`{"event_data": {"task": "a"}, "event_data": {"play": "b"}}`)
	f(`{"event_data": "s"}`)
	f(`{"event_data": [1]}`)
	f(`{"event_data": {"task": 5}}`)
	f(`{"stdout": "\u001b[0;32mok\u001b[0m", "counter": 2, "x": [true, false, null, -0.5e-3, 0, {}, []]}`)
	// A task result's rc and a stats event's hosts.
	f(`{"counter": 1, "event": "runner_on_failed", "event_data": {"res": {"rc": -9, "stdout": "", "RC": 137}}}`)
	f(`{"event_data": {"res": {"rc": 1.5}}}`)
	f(`{"event_data": {"res": {"rc": null}}}`)
	f(`{"event_data": {"res": {"rc": "137"}}}`)
	f(`{"event_data": {"res": {"rc": -9}, "res": []}}`)
	f(`{"event_data": {"res": "Killed"}}`)
	f(`{"event_data": {"res": {"rc": 99999999999999999999}}}`)
	f(`{"event_data": {"processed": {"h1": 1, "h2": 1, "h1": 2}}}`)
	f(`{"event_data": {"processed": {"h\u0031": 1, "h1": 1}}}`)
	f(`{"event_data": {"processed": [1, 2]}}`)
	f(`{"event_data": {"processed": {}}}`)
	// Not JSON, or not an object.
	f(``)
	f(`   `)
	f(`null`)
	f(`5`)
	f(`-`)
	f(`"s"`)
	f(`[]`)
	f(`{}`)
	f(`{} {}`)
	f(`{}x`)
	f(`{"counter": 1,}`)
	f(`{"counter" 1}`)
	f(`{"counter": 01}`)
	f(`{"counter": 1.}`)
	f(`{"counter": 1e}`)
	f(`{"x": tru}`)
	f(`{"x": "\x"}`)
	f(`{"x": "\u12g4"}`)
	f("{\"x\": \"a\x01b\"}")
	f(`{"counter": 6, "event": "playbook_on_task_start", `)
	f(`{"x": [1 2]}`)
	f("\xef\xbb\xbf{}")
	f(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))
	f(`{"x":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`)
}

func FuzzDecodeEvent(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "ansible", "runner-basic", "artifacts", "*", "job_events", "*.json"))
	bad, _ := filepath.Glob(filepath.Join("testdata", "trees", "bad", "*", "artifacts", "*", "job_events", "*.json"))
	for _, p := range append(paths, bad...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"UUID": "u", "event_data": {"TASK": "t"}, "event_data": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkLikeUnmarshal(t, data)
	})
}

// TestReadEventMemoryIsNotTheFileSize reads a job event holding a task's
// 48 MB output: the read allocates far less than the file.
func TestReadEventMemoryIsNotTheFileSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 48 MB file")
	}
	p := filepath.Join(t.TempDir(), "7-c81db707-8d10-4071-936e-b57264864300.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString(`{"uuid": "c81db707-8d10-4071-936e-b57264864300", "counter": 7, "event": "runner_on_ok", "stdout": "`)
	line := strings.Repeat("x", 99) + `\n`
	for range 480_000 {
		w.WriteString(line)
	}
	w.WriteString(`", "created": "2026-11-30T03:39:35.979439", "event_data": {"task": "slurp a log", "task_uuid": "02fc0000-0001-bfc5-3899-000000000005", "res": {"content": "` +
		strings.Repeat("QUJD", 1000) + `"}}}`)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ev, err := NewEventReader().ReadFile(p)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Counter != 7 || ev.Task != "slurp a log" || ev.TaskUUID != "02fc0000-0001-bfc5-3899-000000000005" || ev.TimeMs != 1796009975979 {
		t.Fatalf("event %+v", ev)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("file %d bytes, allocated %d", fi.Size(), alloc)
	if alloc > 1<<20 {
		t.Fatalf("reading a %d-byte event file allocated %d bytes, want at most 1 MiB", fi.Size(), alloc)
	}
}
