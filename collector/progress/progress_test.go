package progress_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/progress"
)

// clock is a test clock moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// Off a terminal: a plain line once an interval has passed since the
// last (none before the first; at 5.1 s and 10.2 s of a 15 s pass), one
// at the end, no carriage return or escape sequence anywhere.
func TestPlainLines(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)}
	b := progress.New(&out, 50, "reading site", progress.Options{Every: 5 * time.Second, Now: c.now, Unit: "files"})
	for i := 1; i <= 50; i++ {
		c.advance(300 * time.Millisecond) // 15 s in all
		b.Set(i)
	}
	c.advance(200 * time.Millisecond)
	b.Finish()
	b.Finish()
	want := "reading site: 17 of 50 files (34%) after 5s\n" +
		"reading site: 34 of 50 files (68%) after 10s\n" +
		"reading site: 50 of 50 files (100%), done in 15.2s\n"
	if out.String() != want {
		t.Fatalf("plain output\n%q\nwant\n%q", out.String(), want)
	}
}

// A short pass prints its end alone; Add counts up; an unknown total
// prints the count alone; a nil bar does nothing.
func TestPlainShortAndUnknown(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	b := progress.New(&out, 0, "reading the events of AWX job 42", progress.Options{Now: c.now, Unit: "events"})
	b.Add(200)
	c.advance(time.Second)
	b.Add(200)
	b.Finish()
	if want := "reading the events of AWX job 42: 400 events, done in 1s\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	var nilBar *progress.Bar
	nilBar.Set(1)
	nilBar.Add(1)
	nilBar.Finish()
}

// A file that is no terminal (a pipe, a log file) gets plain lines by
// itself; forced to a terminal, the output is the progress bar's.
func TestTerminalDetection(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if progress.IsTerminal(f) || progress.IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a file or a buffer taken for a terminal")
	}
	b := progress.New(f, 3, "reading", progress.Options{})
	b.Set(3)
	b.Finish()
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(string(got), "\r\x1b") || !strings.HasPrefix(string(got), "reading: 3 of 3 (100%), done in ") {
		t.Fatalf("a log file got %q", got)
	}
	var out bytes.Buffer
	yes := true
	b = progress.New(&out, 3, "reading", progress.Options{Terminal: &yes})
	b.Set(2)
	b.Finish()
	if !strings.Contains(out.String(), "\r") {
		t.Fatalf("the terminal bar wrote %q, want its carriage-return frames", out.String())
	}
}
