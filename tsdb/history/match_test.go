package history

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// tk is a task run given as "play|role|name|path"; empty parts may be
// left out from the end.
func tk(spec string) TaskRun {
	p := strings.Split(spec+"|||", "|")
	return TaskRun{Play: p[0], Role: p[1], Name: p[2], Path: p[3]}
}

// runOf makes a run of the given tasks.
func runOf(id string, specs ...string) Run {
	r := Run{JobID: id}
	for _, s := range specs {
		r.Tasks = append(r.Tasks, tk(s))
	}
	return r
}

// render shows Match's answer as "key: at0 at1 …" lines.
func render(tasks []Task) string {
	var b strings.Builder
	for _, t := range tasks {
		fmt.Fprintf(&b, "%s:", t.Key)
		for _, at := range t.At {
			fmt.Fprintf(&b, " %d", at)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestMatch(t *testing.T) {
	f := func(name string, runs []Run, want string) {
		t.Helper()
		before := fmt.Sprint(runs)
		got := render(Match(runs))
		if got != strings.TrimLeft(want, "\n") {
			t.Errorf("%s:\ngot\n%swant\n%s", name, got, strings.TrimLeft(want, "\n"))
		}
		if fmt.Sprint(runs) != before {
			t.Errorf("%s: Match modified its input", name)
		}
	}
	a := "web||install|/tmp/awx_1_x/project/site.yml:3"
	b := "web||allocate cache|/tmp/awx_1_x/project/site.yml:14"
	c := "web|cache|warm|/tmp/awx_1_x/project/roles/cache/tasks/main.yml:2"
	f("unchanged", []Run{runOf("1", a, b, c), runOf("2", a, b, c), runOf("3", a, b, c)}, `
site.yml:3 install: 0 0 0
site.yml:14 allocate cache: 1 1 1
roles/cache/tasks/main.yml:2 warm: 2 2 2
`)
	// The private data dir differs per run (AWX's /tmp/awx_<id>_<rand>, an
	// execution environment's /runner): the same task.
	f("private data dir differs", []Run{
		runOf("1", "web||install|/tmp/awx_1_x/project/site.yml:3"),
		runOf("2", "web||install|/runner/project/site.yml:3"),
	}, `
site.yml:3 install: 0 0
`)
	// Renamed: the old name's history ends, the new one's starts.
	f("renamed", []Run{runOf("1", a, b), runOf("2", a, b), runOf("3", a, "web||allocate the cache|/tmp/awx_1_x/project/site.yml:14")}, `
site.yml:3 install: 0 0 0
site.yml:14 allocate the cache: -1 -1 1
site.yml:14 allocate cache: 1 1 -1
`)
	// Added in the middle: the lines below move, their tasks stay.
	f("added", []Run{
		runOf("1", a, "web||allocate cache|/tmp/awx_1_x/project/site.yml:14"),
		runOf("2", a, "web||new task|/tmp/awx_1_x/project/site.yml:14", "web||allocate cache|/tmp/awx_1_x/project/site.yml:20"),
	}, `
site.yml:3 install: 0 0
site.yml:14 new task: -1 1
site.yml:20 allocate cache: 1 2
`)
	f("removed", []Run{runOf("1", a, b, c), runOf("2", a, c)}, `
site.yml:3 install: 0 0
roles/cache/tasks/main.yml:2 warm: 2 1
site.yml:14 allocate cache: 1 -1
`)
	// Repeated (include_tasks in a loop, a handler twice): the n-th start
	// matches the n-th; extra repetitions are extra tasks.
	inc := "web||step|/tmp/awx_1_x/project/inc.yml:1"
	f("repeated", []Run{runOf("1", a, inc, inc, inc), runOf("2", a, inc, inc), runOf("3", a, inc, inc, inc, inc)}, `
site.yml:3 install: 0 0 0
inc.yml:1 step: 1 1 1
inc.yml:1 step #2: 2 2 2
inc.yml:1 step #3: 3 -1 3
inc.yml:1 step #4: -1 -1 4
`)
	// The same name in two plays, and without task_path (no job events):
	// play, role, name and position decide.
	f("same name, other play; no paths", []Run{
		runOf("1", "a||gather", "b||gather", "b||gather"),
		runOf("2", "b||gather", "a||gather", "b||gather"),
	}, `
gather: 1 0
gather #2: 0 1
gather #3: 2 2
`)
	// A task moved to another line and repeated: exact matches first,
	// then the rest by position.
	f("moved and repeated", []Run{
		runOf("1", "p||x|/p/project/a.yml:5", "p||x|/p/project/a.yml:9"),
		runOf("2", "p||x|/p/project/a.yml:6", "p||x|/p/project/a.yml:9"),
	}, `
a.yml:6 x: 0 0
a.yml:9 x: 1 1
`)
	f("no runs", nil, "")
	f("a run without tasks", []Run{runOf("1", a), {JobID: "2"}}, `
site.yml:3 install: 0 -1
`)
}

func TestNormalizePath(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := NormalizePath(in); got != want {
			t.Errorf("NormalizePath(%q) = %q, want %q", in, got, want)
		}
	}
	f("/tmp/awx_42_abc/project/roles/web/tasks/main.yml:3", "roles/web/tasks/main.yml:3")
	f("/runner/project/site.yml:14", "site.yml:14")
	f("/runner/project/sub/project/x.yml:1", "sub/project/x.yml:1")
	f("/runner/requirements_collections/ansible_collections/ns/c/roles/r/tasks/main.yml:7", "ansible_collections/ns/c/roles/r/tasks/main.yml:7")
	f("/home/me/site.yml:2", "/home/me/site.yml:2")
	f("", "")
}

// The samples before a run's first task (counter 0, no name, no path)
// are no task of the template's: they match nothing, so no history row
// holds them. A task after it with neither name nor task_path (counter >
// 0) is a task, with a key that names it, unique like the others.
func TestMatchBeforeFirstTask(t *testing.T) {
	nameless := tk("p|||")
	nameless.Counter = 5
	r1 := runOf("1", "||", "p||a|/x/project/a.yml:1", "p||(unnamed task)|")
	r1.Tasks = append(r1.Tasks, nameless)
	r2 := runOf("2", "||", "p||a|/x/project/a.yml:1")
	r2.Tasks = append(r2.Tasks, nameless)
	runs := []Run{r1, r2}
	before := fmt.Sprint(runs)
	if got, want := render(Match(runs)), "a.yml:1 a: 1 1\n(unnamed task): 3 2\n(unnamed task) #2: 2 -1\n"; got != want {
		t.Errorf("Match = %q, want %q", got, want)
	}
	if fmt.Sprint(runs) != before {
		t.Errorf("Match modified its runs")
	}
	f := func(tr TaskRun, want bool) {
		t.Helper()
		if got := BeforeFirstTask(tr); got != want {
			t.Errorf("BeforeFirstTask(%+v) = %v, want %v", tr, got, want)
		}
	}
	f(TaskRun{}, true)
	f(TaskRun{Counter: 0, Name: "x"}, false)
	f(TaskRun{Counter: 0, Path: "a.yml:1"}, false)
	f(TaskRun{Counter: 3}, false)
}

// Keys are unique whatever the names.
func TestMatchKeysUnique(t *testing.T) {
	var runs []Run
	for i := range 4 {
		var specs []string
		for j := range 30 {
			specs = append(specs, fmt.Sprintf("p||t%d|/x/project/a.yml:%d", j%(i+2), j%3))
		}
		runs = append(runs, runOf(fmt.Sprint(i), specs...))
	}
	tasks := Match(runs)
	var keys []string
	for ti, task := range tasks {
		keys = append(keys, task.Key)
		for ri, at := range task.At {
			if at >= 0 && runs[ri].Tasks[at].Name != task.Name {
				t.Errorf("task %d %q holds %q of run %d", ti, task.Name, runs[ri].Tasks[at].Name, ri)
			}
		}
	}
	// Every task of every run is in exactly one Task.
	for ri, r := range runs {
		seen := make([]int, len(r.Tasks))
		for _, task := range tasks {
			if at := task.At[ri]; at >= 0 {
				seen[at]++
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("run %d task %d is in %d tasks, want 1", ri, i, n)
			}
		}
	}
	slices.Sort(keys)
	if len(slices.Compact(keys)) != len(tasks) {
		t.Errorf("keys not unique: %q", keys)
	}
}
