package tsdb

import (
	"testing"
	"time"
)

// BenchmarkDiskAdmit is the cost the free-space rule adds to each write:
// the cached reading, renewed by statfs once a second or after half the
// room above the threshold is written.
//
//	go test -run '^$' -bench BenchmarkDiskAdmit -count 6 ./tsdb/ | benchstat -
func BenchmarkDiskAdmit(b *testing.B) {
	g := newDiskGuard(b.TempDir(), 1<<20, time.Now, nil)
	if g.reading() <= 1<<30 {
		b.Skip("needs 1 GiB free on the temp dir")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := g.admit(64<<10, 0); err != nil {
			b.Fatal(err)
		}
	}
}
