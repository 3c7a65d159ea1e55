package workload

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// WriteRunnerTree writes j as an ansible-runner private data dir under
// dir: artifacts/<j.ID>/job_events/ with a task start event per task and a
// playbook_on_stats event, and profiling_data/ with one RFC 7464 JSON-seq
// file per task and resource, memory in MiB as cgroup_perf_recap writes
// it. It returns the number of files written.
func WriteRunnerTree(dir string, j *Job) (int, error) {
	events := filepath.Join(dir, "artifacts", j.ID, "job_events")
	prof := filepath.Join(dir, "profiling_data")
	for _, d := range []string{events, prof} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	files := 0
	writeEvent := func(counter int64, uuid, event string, ms int64, data map[string]any) error {
		doc := map[string]any{
			"uuid": uuid, "counter": counter, "event": event, "runner_ident": j.ID,
			"created":    time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000000"),
			"event_data": data,
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		files++
		return os.WriteFile(filepath.Join(events, fmt.Sprintf("%d-%s.json", counter, uuid)), b, 0o644)
	}
	for _, t := range j.Tasks {
		if err := writeEvent(t.Counter, t.UUID, "playbook_on_task_start", t.StartMs, map[string]any{"task": t.Name, "task_uuid": t.UUID}); err != nil {
			return files, fmt.Errorf("write task start %d: %w", t.Counter, err)
		}
	}
	if err := writeEvent(j.LastCounter, fmt.Sprintf("stats-%s", j.ID), "playbook_on_stats", j.LastEventMs, map[string]any{}); err != nil {
		return files, fmt.Errorf("write stats event: %w", err)
	}
	for _, s := range j.Series {
		t := j.Tasks[s.Task]
		name := filepath.Join(prof, fmt.Sprintf("%d-%s-%s.json", s.Task, t.UUID, s.Resource))
		if err := writeSeq(name, t, s); err != nil {
			return files, err
		}
		files++
	}
	return files, nil
}

// writeSeq writes one profiling file as 0x1E + JSON + LF records.
func writeSeq(name string, t Task, s JobSeries) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	taskName, _ := json.Marshal(t.Name)
	for i, ms := range s.Ts {
		v := s.Vs[i]
		if s.Resource == "memory" {
			v /= 1 << 20
		}
		fmt.Fprintf(w, "\x1e{\"timestamp\": %s, \"task_name\": %s, \"task_uuid\": %q, \"value\": %s}\n",
			strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64), taskName, t.UUID, strconv.FormatFloat(v, 'g', -1, 64))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
