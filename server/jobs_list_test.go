package server_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/peakline/peakline/tsdb"
)

// jobsPageDoc is the GET /api/v1/jobs answer as a client decodes it.
type jobsPageDoc struct {
	Jobs []struct {
		JobID   string         `json:"job_id"`
		First   int64          `json:"first"`
		Last    int64          `json:"last"`
		Tasks   int            `json:"tasks"`
		Samples map[string]int `json:"samples"`
	} `json:"jobs"`
	Next  string `json:"next"`
	Total int    `json:"total"`
}

// listJob stores a one-task job starting at startMs with two CPU samples.
func listJob(t *testing.T, store *tsdb.Store, id string, startMs int64) {
	t.Helper()
	b := &tsdb.Batch{JobID: id, Tasks: []tsdb.Task{{Counter: 3, UUID: "u-" + id, Name: "task", StartMs: startMs}},
		Series: []tsdb.SeriesData{{Resource: "cpu", Counter: 3, UUID: "u-" + id, Task: "task", Ts: []int64{startMs + 10, startMs + 20}, Vs: []float64{1, 2}}}}
	if _, err := store.Append(t.Context(), b); err != nil {
		t.Fatal(err)
	}
}

// walkJobs reads every page of GET /api/v1/jobs with query, calling
// between (if not nil) after each page, and returns the ids in order.
func walkJobs(t *testing.T, base string, query url.Values, between func(page int)) ([]string, int) {
	t.Helper()
	var ids []string
	total := -1
	for page := 0; ; page++ {
		var doc jobsPageDoc
		if code := getJSON(t, base+"/api/v1/jobs?"+query.Encode(), &doc); code != 200 {
			t.Fatalf("GET /api/v1/jobs?%s: %d", query.Encode(), code)
		}
		for _, j := range doc.Jobs {
			ids = append(ids, j.JobID)
			if j.Tasks != 1 || j.Samples["cpu"] != 2 || j.Last != j.First+20 {
				t.Errorf("job %+v, want 1 task, 2 cpu samples, last = first + 20", j)
			}
		}
		if total < 0 {
			total = doc.Total
		}
		if doc.Next == "" {
			return ids, total
		}
		if page > 100 {
			t.Fatalf("more than 100 pages")
		}
		query.Set("cursor", doc.Next)
		if between != nil {
			between(page)
		}
	}
}

// Paging walks every job once, newest first (by first time, then id),
// whatever is added meanwhile; q filters by id in any case.
func TestListJobsPages(t *testing.T) {
	hs, store := newTestServer(t)
	const base = 1_796_000_000_000
	var want []string // newest first
	for i := 22; i >= 0; i-- {
		// Pairs of jobs share a first time: the id breaks the tie.
		for _, suffix := range []string{"a", "B"} {
			if i%2 == 1 && suffix == "B" {
				continue
			}
			id := fmt.Sprintf("job-%02d-%s", i, suffix)
			listJob(t, store, id, base+int64(i/2)*1000)
		}
	}
	// The expected order from the rule, not from the server.
	type key struct {
		first int64
		id    string
	}
	var keys []key
	ids, err := store.JobIDs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var i int
		var suffix string
		if _, err := fmt.Sscanf(id, "job-%02d-%s", &i, &suffix); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key{base + int64(i/2)*1000, id})
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.first != b.first {
			return int(b.first - a.first)
		}
		return strings.Compare(a.id, b.id)
	})
	for _, k := range keys {
		want = append(want, k.id)
	}

	got, total := walkJobs(t, hs.URL, url.Values{"limit": {"5"}}, nil)
	if !slices.Equal(got, want) || total != len(want) {
		t.Fatalf("pages of 5 list %q (total %d), want %q (%d)", got, total, want, len(want))
	}
	if got, _ := walkJobs(t, hs.URL, url.Values{}, nil); !slices.Equal(got, want) {
		t.Fatalf("the default page lists %q, want %q", got, want)
	}

	// While a person pages, a newer job and an older one arrive: the
	// newer sorts before the cursor and is not shown on later pages, the
	// older one is; nothing repeats or goes missing.
	got, _ = walkJobs(t, hs.URL, url.Values{"limit": {"4"}}, func(page int) {
		if page == 1 {
			listJob(t, store, "arrived-newer", base+3_600_000)
			listJob(t, store, "arrived-older", base-3_600_000)
		}
	})
	if wantNow := append(slices.Clone(want), "arrived-older"); !slices.Equal(got, wantNow) {
		t.Fatalf("paging while jobs arrive lists %q, want %q", got, wantNow)
	}

	// q is a substring of the id, in any case, applied before paging.
	got, total = walkJobs(t, hs.URL, url.Values{"q": {"-b"}, "limit": {"2"}}, nil)
	var wantB []string
	for _, id := range want {
		if strings.HasSuffix(id, "-B") {
			wantB = append(wantB, id)
		}
	}
	if !slices.Equal(got, wantB) || total != len(wantB) {
		t.Fatalf("q=-b lists %q (total %d), want %q", got, total, wantB)
	}
	var none jobsPageDoc
	if getJSON(t, hs.URL+"/api/v1/jobs?q=nothing-like-this", &none); len(none.Jobs) != 0 || none.Next != "" || none.Total != 0 {
		t.Fatalf("q matching nothing: %+v, want no jobs, no next, total 0", none)
	}
}

// Bad paging parameters are refused with 400 naming them.
func TestListJobsBadParameters(t *testing.T) {
	hs, store := newTestServer(t)
	listJob(t, store, "one", 1_796_000_000_000)
	f := func(query, want string) {
		t.Helper()
		var doc struct {
			Error string `json:"error"`
		}
		if code := getJSON(t, hs.URL+"/api/v1/jobs?"+query, &doc); code != 400 || doc.Error != want {
			t.Errorf("GET /api/v1/jobs?%s: %d %q, want 400 %q", query, code, doc.Error, want)
		}
	}
	f("limit=0", `limit: must be a whole number from 1 to 5000, got "0"`)
	f("limit=5001", `limit: must be a whole number from 1 to 5000, got "5001"`)
	f("limit=ten", `limit: must be a whole number from 1 to 5000, got "ten"`)
	f("cursor=%25%25", `cursor: is not one this server gave in "next"; start again without it`)
	f("cursor=bm90IGEgY3Vyc29y", `cursor: is not one this server gave in "next"; start again without it`) // "not a cursor"
	var doc jobsPageDoc
	if getJSON(t, hs.URL+"/api/v1/jobs?limit=5000", &doc); len(doc.Jobs) != 1 || doc.Next != "" {
		t.Errorf("limit=5000: %+v, want the one job", doc)
	}
}
