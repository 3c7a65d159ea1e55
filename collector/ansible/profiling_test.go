package ansible

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseProfileName(t *testing.T) {
	f := func(name string, wantOK bool, wantRes, wantUUID string, wantCSV bool) {
		t.Helper()
		got, ok := parseProfileName(name)
		if ok != wantOK {
			t.Fatalf("parseProfileName(%q) ok = %v, want %v", name, ok, wantOK)
		}
		if ok && (resources[got.resource] != wantRes || got.uuid != wantUUID || got.csv != wantCSV) {
			t.Errorf("parseProfileName(%q) = %s %q csv=%v, want %s %q csv=%v", name, resources[got.resource], got.uuid, got.csv, wantRes, wantUUID, wantCSV)
		}
	}
	f("cpu.csv", true, "cpu", "", true)
	f("memory.json", true, "memory", "", false)
	f("pids.csv", true, "pids", "", true)
	f("0-02fc0000-0001-bfc5-3899-000000000004-cpu.json", true, "cpu", "02fc0000-0001-bfc5-3899-000000000004", false)
	f("17-abc-memory.csv", true, "memory", "abc", true)
	f("disk.csv", false, "", "", false)
	f("cpu.txt", false, "", "", false)
	f("x-abc-cpu.json", false, "", "", false)
	f("0--cpu.json", false, "", "", false)
	f("stdout.txt", false, "", "", false)
	f("0-abc-cpu.json.tmp", false, "", "", false)
}

func TestParseJSONSeq(t *testing.T) {
	// Whitespace before the first RS, an empty record, a record without
	// its final LF (complete, so not truncated), no task_uuid.
	data := []byte("\n\x1e{\"timestamp\": 1796009975.9854548, \"task_name\": \"a\", \"task_uuid\": \"u1\", \"value\": 1.5}\n" +
		"\x1e\n" +
		"\x1e{\"timestamp\": 1796009976.0004, \"task_name\": \"b\", \"value\": 2}")
	got, err := parseJSONSeq(nil, bytes.NewReader(data), 1, "file-uuid", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []sample{
		{ms: 1796009975985, value: 1.5 * 1048576, resource: 1, uuid: "u1", name: "a"},
		{ms: 1796009976000, value: 2 * 1048576, resource: 1, uuid: "file-uuid", name: "b"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// Records of the wrong shape say which field is wrong.
	for in, want := range map[string]string{
		"\x1e5\n": "record is a JSON number, want an object",
		"\x1e{\"timestamp\": \"1\", \"value\": 1}\n": `field "timestamp" is a JSON string, want a float64`,
	} {
		if _, err := parseJSONSeq(nil, bytes.NewReader([]byte(in)), 0, "", nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseJSONSeq(%q): got %v, want %q", in, err, want)
		}
	}
	// A broken record after line breaks is reported at its own line.
	_, err = parseJSONSeq(nil, bytes.NewReader([]byte("\x1e{\"timestamp\": 1, \"value\": 1}\n\x1e{\"timestamp\": 1,\n \"value\": }\n")), 0, "", nil)
	var le *lineError
	if !errors.As(err, &le) || le.line != 2 || le.record != 2 {
		t.Errorf("got %v, want an error at line 2, record 2", err)
	}
}

func TestParseCSV(t *testing.T) {
	data := []byte("1796009960.0945702,burn some cpu,u1,45.01171875\r\n" +
		"1796009960.3449125,\"copy a, b\",u1,76.5625\r\n" + // quoted comma
		"1796009960.5952797,copy a, b,u1,78.34375\r\n" + // unquoted: 5 fields
		"\r\n" +
		"1796009960.8455715,x,,1\r\n") // no uuid
	got, err := parseCSV(nil, bytes.NewReader(data), 2, "file-uuid", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []sample{
		{ms: 1796009960095, value: 45.01171875, resource: 2, uuid: "u1", name: "burn some cpu"},
		{ms: 1796009960345, value: 76.5625, resource: 2, uuid: "u1", name: "copy a, b"},
		{ms: 1796009960595, value: 78.34375, resource: 2, uuid: "u1", name: "copy a, b"},
		{ms: 1796009960846, value: 1, resource: 2, uuid: "file-uuid", name: "x"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestNewSampleRejects(t *testing.T) {
	f := func(resource uint8, ts, v float64, want string) {
		t.Helper()
		_, err := newSample(resource, ts, v, "u", "n")
		if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), want) {
			t.Errorf("newSample(%d, %v, %v) = %v, want %v saying %q", resource, ts, v, err, ErrBadValue, want)
		}
	}
	f(0, math.NaN(), 1, "not unix seconds")
	f(0, 0, 1, "not unix seconds")
	f(0, -5, 1, "not unix seconds")
	f(0, 1796009975985, 1, "not unix seconds") // milliseconds
	f(0, 1796009975, math.NaN(), "not finite")
	f(2, 1796009975, math.Inf(1), "not finite")
	f(2, 1796009975, -1, "negative")
	f(1, 1796009975, math.MaxFloat64/2, "out of range")
}

func TestParseEmpty(t *testing.T) {
	for _, data := range [][]byte{nil, {}, []byte("\n")} {
		if got, err := parseJSONSeq(nil, bytes.NewReader(data), 0, "", nil); err != nil || len(got) != 0 {
			t.Errorf("parseJSONSeq(%q) = %v, %v; want no samples", data, got, err)
		}
		if got, err := parseCSV(nil, bytes.NewReader(data), 0, "", nil); err != nil || len(got) != 0 {
			t.Errorf("parseCSV(%q) = %v, %v; want no samples", data, got, err)
		}
	}
}

func TestParseCreated(t *testing.T) {
	const want = 1796009975979 // 2026-11-30T03:39:35.979439Z
	f := func(s string, want int64) {
		t.Helper()
		got, err := ParseCreated(s)
		if err != nil || got != want {
			t.Errorf("ParseCreated(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	f("2026-11-30T03:39:35.979439", want) // Python's utcnow().isoformat(): UTC
	f("2026-11-30T03:39:35.979439+00:00", want)
	f("2026-11-30T03:39:35.979439Z", want)
	f("2026-11-30T05:39:35.979439+02:00", want)
	f("2026-11-29T22:39:35.979439-0500", want)
	f("2026-11-30 03:39:35.979439", want)
	f("2026-11-30T03:39:35.9795", 1796009975980) // rounded to the nearest ms
	f("2026-11-30T03:39:35", 1796009975000)
	for _, bad := range []string{"", "yesterday", "1796009975.979", "2026-11-30"} {
		if _, err := ParseCreated(bad); err == nil {
			t.Errorf("ParseCreated(%q): want an error", bad)
		}
	}
}

// checkParsed checks the invariants of any successful parse.
func checkParsed(t *testing.T, got []sample, err error) {
	t.Helper()
	if err != nil {
		var le *lineError
		if !errors.As(err, &le) || le.line < 1 {
			t.Fatalf("error %v is not located at a line", err)
		}
		return
	}
	for _, s := range got {
		if s.ms <= 0 || s.ms > 1e14 || math.IsNaN(s.value) || math.IsInf(s.value, 0) || s.value < 0 {
			t.Fatalf("parsed a bad sample %+v", s)
		}
	}
}

func fuzzSeeds(f *testing.F, glob string) {
	paths, _ := filepath.Glob(glob)
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
}

func FuzzParseJSONSeq(f *testing.F) {
	fuzzSeeds(f, filepath.Join("..", "..", "testdata", "ansible", "runner-basic", "profiling_data", "*.json"))
	fuzzSeeds(f, filepath.Join("testdata", "trees", "bad", "*", "*.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseJSONSeq(nil, bytes.NewReader(data), 1, "u", newInterner())
		checkParsed(t, got, err)
	})
}

func FuzzParseCSV(f *testing.F) {
	fuzzSeeds(f, filepath.Join("..", "..", "testdata", "ansible", "recap-csv", "*", "*.csv"))
	fuzzSeeds(f, filepath.Join("testdata", "trees", "bad", "*", "*.csv"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseCSV(nil, bytes.NewReader(data), 0, "u", newInterner())
		checkParsed(t, got, err)
	})
}

// FuzzProfileRoundTrip writes generated samples the way cgroup_perf_recap
// does (JSON-seq; CSV with CRLF and quoted names) and parses them back.
func FuzzProfileRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint16(10), uint8(0))
	f.Add(uint64(2), uint16(300), uint8(0xff))
	f.Fuzz(func(t *testing.T, seed uint64, n uint16, nameMask uint8) {
		rng := rand.New(rand.NewPCG(seed, 42))
		names := []string{"burn some cpu", "copy a, b", `say "hi"`, "multi\nline", "ünïcode", " padded ", ""}
		type rec struct {
			ts, v      float64
			name, uuid string
		}
		recs := make([]rec, int(n)%2000)
		ts := 1.6e9 + rng.Float64()*3e8
		for i := range recs {
			ts += rng.Float64()
			name := names[0]
			if nameMask&(1<<(i%8)) != 0 {
				name = names[rng.IntN(len(names))]
			}
			recs[i] = rec{ts: ts, v: rng.ExpFloat64() * 100, name: name, uuid: "u" + string(rune('a'+rng.IntN(5)))}
		}
		var js, cs bytes.Buffer
		cw := csv.NewWriter(&cs)
		cw.UseCRLF = true
		for _, r := range recs {
			b, _ := json.Marshal(map[string]any{"timestamp": r.ts, "task_name": r.name, "task_uuid": r.uuid, "value": r.v})
			js.WriteByte(recordSeparator)
			js.Write(b)
			js.WriteByte('\n')
			_ = cw.Write([]string{formatFloat(r.ts), r.name, r.uuid, formatFloat(r.v)})
		}
		cw.Flush()
		for _, res := range []uint8{0, 1, 2} {
			want := make([]sample, len(recs))
			for i, r := range recs {
				v := r.v
				if res == 1 {
					v *= 1048576
				}
				want[i] = sample{ms: int64(math.Round(r.ts * 1000)), value: v, resource: res, uuid: r.uuid, name: r.name}
			}
			gotJS, err := parseJSONSeq(nil, bytes.NewReader(js.Bytes()), res, "", nil)
			if err != nil || !slices.Equal(gotJS, want) {
				t.Fatalf("JSON-seq round trip: err %v, %d samples, want %d", err, len(gotJS), len(want))
			}
			gotCSV, err := parseCSV(nil, bytes.NewReader(cs.Bytes()), res, "", nil)
			if err != nil || !slices.Equal(gotCSV, want) {
				t.Fatalf("CSV round trip: err %v, %d samples, want %d", err, len(gotCSV), len(want))
			}
		}
	})
}

// formatFloat writes v as Python's repr does for the plugin's magnitudes.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
