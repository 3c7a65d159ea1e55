package main

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/server"
)

// sampleOf is what a stored sample is: its value's bits and its task.
type sampleOf struct {
	bits    uint64
	counter int64
	uuid    string
	task    string
}

// samplesOf maps every sample of j (resource and time) to its value and
// task.
func samplesOf(t *testing.T, j *ansible.Job) map[string]sampleOf {
	t.Helper()
	out := map[string]sampleOf{}
	for _, s := range j.Series {
		for i, ms := range s.Ts {
			k := fmt.Sprintf("%s@%d", s.Resource, ms)
			if _, dup := out[k]; dup {
				t.Fatalf("job %s: two %s samples at %d ms", j.ID, s.Resource, ms)
			}
			out[k] = sampleOf{math.Float64bits(s.Vs[i]), s.Counter, s.UUID, s.Task}
		}
	}
	return out
}

// The --data and --server adapters read the same stored job as the same
// job: a server holding two real runs, the second with its tasks' play,
// role and path, behind a token and a query limit of 10 samples (the
// remote read pages), is read through its own store and through its
// Prometheus API; both give exactly the samples (times, value bits,
// tasks), tasks and info that were stored, and nil for a job it does not
// hold.
func TestReattrAdaptersSameJob(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yml")
	must(t, os.WriteFile(authFile, []byte("tokens:\n  - name: grafana\n    token: read-token-1234567\n    scopes: [read]\n"), 0o600))
	tokenFile := filepath.Join(dir, "read.token")
	must(t, os.WriteFile(tokenFile, []byte("read-token-1234567\n"), 0o600))
	auth, err := server.NewAuthenticator(authFile, nil)
	must(t, err)
	cfg := server.Config{Security: server.SecurityConfig{Auth: auth}, Prometheus: server.PromConfig{QueryMaxSamples: 10}}
	srv, err := server.Open(server.Setup{DataDir: filepath.Join(dir, "data"), Config: cfg}, nil, nil)
	must(t, err)
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	ctx := context.Background()
	var stored []*ansible.Job
	for _, src := range []string{"testdata/ansible/runner-basic", "testdata/ansible/runner-loops"} {
		jobs, err := ansible.Read(src, ansible.ReadOptions{JobID: "job-" + filepath.Base(src), TemplateID: "7", TemplateName: "demo"})
		must(t, err)
		j := jobs[0]
		j.Info.Status, j.Info.Playbook, j.Info.Measured = "failed", "site.yml", ansible.MeasuredCgroup
		if _, err := ingestJob(ctx, srv, j); err != nil {
			t.Fatalf("ingest %s: %v", j.ID, err)
		}
		stored = append(stored, j)
	}

	tr, err := ship.NewTransport(ship.TransportConfig{TokenFile: tokenFile}, hs.URL, nil)
	must(t, err)
	remote, err := openRemoteJobs(hs.URL+"/", tr, tokenFile, nil)
	must(t, err)
	defer remote.store.Close()
	local := &localJobs{srv: srv, dataDir: dir}

	withPath := 0
	for _, want := range stored {
		l, err := local.Read(ctx, want.ID)
		if err != nil || l == nil {
			t.Fatalf("local read of %s: %v, %v", want.ID, l, err)
		}
		r, err := remote.Read(ctx, want.ID)
		if err != nil || r == nil {
			t.Fatalf("remote read of %s: %v, %v", want.ID, r, err)
		}
		if !reflect.DeepEqual(l, r) {
			t.Fatalf("job %s read locally\n%+v\nand remotely\n%+v", want.ID, l, r)
		}
		if got, w := samplesOf(t, l), samplesOf(t, want); !reflect.DeepEqual(got, w) || len(w) == 0 {
			t.Fatalf("job %s: %d samples read, %d stored, or they differ", want.ID, len(got), len(w))
		}
		if len(l.Tasks) != len(want.Tasks) {
			t.Fatalf("job %s: %d tasks read, want %d", want.ID, len(l.Tasks), len(want.Tasks))
		}
		for i, task := range want.Tasks {
			got := l.Tasks[i]
			if got.Counter != task.Counter || got.UUID != task.UUID || got.Name != task.Name || got.StartMs != task.StartMs ||
				got.Play != task.Play || got.Role != task.Role || got.Path != task.Path {
				t.Fatalf("job %s: task %d read as %+v, want %+v", want.ID, i, got, task)
			}
			if task.Path != "" {
				withPath++
			}
		}
		if l.Info != want.Info {
			t.Fatalf("job %s: info %+v, want %+v", want.ID, l.Info, want.Info)
		}
	}
	if withPath == 0 {
		t.Fatal("no stored task has a task path: the fixture does not test them")
	}
	// A token the server refuses is named.
	bad := filepath.Join(dir, "bad.token")
	must(t, os.WriteFile(bad, []byte("not-a-token-1234567\n"), 0o600))
	badTr, err := ship.NewTransport(ship.TransportConfig{TokenFile: bad}, hs.URL, nil)
	must(t, err)
	refused, err := openRemoteJobs(hs.URL, badTr, bad, nil)
	must(t, err)
	defer refused.store.Close()
	if j, err := refused.Read(ctx, stored[0].ID); j != nil || err == nil || !strings.Contains(err.Error(), "server refused the token from --token-file "+bad+": 401") {
		t.Fatalf("read with a refused token: %v, %v; want the refusal naming %s", j, err, bad)
	}
	for _, s := range []interface {
		Read(context.Context, string) (*ansible.Job, error)
	}{local, remote} {
		if j, err := s.Read(ctx, "no-such-job"); j != nil || err != nil {
			t.Fatalf("%T read of a job not stored: %v, %v; want nil, nil", s, j, err)
		}
	}
}
