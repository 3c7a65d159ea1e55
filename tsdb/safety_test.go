package tsdb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Strings handed out by the store stay valid after compaction rewrites
// and unmaps the blocks they were read from: job ids from JobIDs, and
// task names and uuids of a cached job.
func TestStringsOutliveCompaction(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-2 * time.Hour).UnixMilli()
	var want []string
	for i := range 20 {
		id := fmt.Sprintf("job-%02d", i)
		want = append(want, id)
		if _, err := s.Append(ctx, exampleBatch(id, start+int64(i)*10_000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	ids, err := s.JobIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.ReadJob(ctx, "job-19", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	// Each delete compacts and rewrites the blocks without the job; the
	// blocks the strings above were read from are closed and unmapped.
	for _, id := range []string{"job-00", "job-01"} {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(ids, ","); got != strings.Join(want, ",") {
		t.Fatalf("job ids read before the deletes = %s, want %s", got, strings.Join(want, ","))
	}
	var names []string
	for _, task := range kept.Tasks {
		names = append(names, task.UUID+"/"+task.Name)
	}
	if got, w := strings.Join(names, ","), "uuid-burn some cpu/burn some cpu,uuid-allocate memory/allocate memory,uuid-say hello/say hello"; got != w {
		t.Fatalf("tasks of the job read before the deletes = %s, want %s", got, w)
	}
	again, err := s.ReadJob(ctx, "job-19", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Tasks, kept.Tasks) {
		t.Fatalf("cached tasks %+v differ from %+v", again.Tasks, kept.Tasks)
	}
}
