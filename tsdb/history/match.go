package history

import (
	"strconv"
	"strings"
)

// TaskRun is one task of one run, with the statistics the job's tasks
// payload gives it.
type TaskRun struct {
	Counter    int64
	Name       string
	Play, Role string
	Path       string // task_path as the job events give it; "" unknown
	StartMs    int64
	EndMs      int64
	// Max and Mean hold the exact high-water mark and mean of each
	// resource with samples in the task.
	Max, Mean Stats
	// CPUSeconds is the CPU time of the task (see CPUSeconds); valid
	// when Max has CPU.
	CPUSeconds float64
	// Waited holds the task's stall figures by signal (StallCPU, …; see
	// Waited); nil when the run measured none.
	Waited map[string]float64
}

// Stats holds one figure per resource; nil where the task has no
// samples of it. It encodes as the tasks payload's maps do:
// {"cpu": 95.1, "memory": 232000000, "pids": 11}, absent resources left
// out.
type Stats struct {
	CPU    *float64 `json:"cpu,omitempty"`
	Memory *float64 `json:"memory,omitempty"`
	PIDs   *float64 `json:"pids,omitempty"`
}

// StatsOf makes Stats of a map by resource name ("cpu", "memory",
// "pids"), as downsample's task summaries hold them.
func StatsOf(m map[string]float64) Stats {
	get := func(name string) *float64 {
		if v, ok := m[name]; ok {
			return &v
		}
		return nil
	}
	return Stats{CPU: get("cpu"), Memory: get("memory"), PIDs: get("pids")}
}

// Run is one run (job) of a template.
type Run struct {
	JobID   string
	StartMs int64
	EndMs   int64
	Status  string
	Tasks   []TaskRun // in start order
	// Sizing is what the job's info says of its resources and inputs.
	Sizing Sizing
}

// Sizing is what a run's job info says of its resources and inputs;
// every field is zero where unknown.
type Sizing struct {
	Forks int // ansible's --forks (AWX job forks; ansible's default 5 when nothing said it)
	Hosts int // hosts the play ran on (playbook_on_stats)
	// MemoryLimitBytes is the memory limit of the job's cgroup; 0: none
	// or unknown.
	MemoryLimitBytes float64
	// OOMKills counts the OOM kills in the job's cgroup (or 1 for a
	// task result of a killed process in an imported run); OOMCounter is
	// the counter of the task running at the (last) kill, 0 unknown.
	OOMKills   int
	OOMCounter int64
	// ProjectRevision and EEImage are the project's SCM revision and the
	// execution environment's image.
	ProjectRevision, EEImage string
}

// UnnamedKey is the key of a task with neither name nor task_path (an
// event source that names none), as the pages label such a task.
const UnnamedKey = "(unnamed task)"

// BeforeFirstTask reports whether tr holds the samples taken before a
// job's first task started (counter 0, no name: ansible's own start-up,
// or a whole job collected without job events). Such a row is no task of
// the playbook's: Match leaves it out of the history.
func BeforeFirstTask(tr TaskRun) bool { return tr.Counter <= 0 && tr.Name == "" && tr.Path == "" }

// Task is one task matched across runs (see the package doc).
type Task struct {
	Key  string
	Name string
	Play string
	Role string
	Path string // normalised task_path of the newest run it appears in
	// At holds, per run (in the order given to Match), the index into
	// that run's Tasks of this task, or -1 where the run lacks it.
	At []int
}

// NormalizePath drops the per-run part of a task_path: it keeps what
// follows the first "/project/", else what starts at
// "ansible_collections/", else the whole path.
func NormalizePath(p string) string {
	if i := strings.Index(p, "/project/"); i >= 0 {
		return p[i+len("/project/"):]
	}
	if i := strings.Index(p, "ansible_collections/"); i >= 0 {
		return p[i:]
	}
	return p
}

type nameKey struct{ play, role, name string }

type exactKey struct {
	nameKey
	path string
	n    int // position among the run's tasks of the same name key and path
}

// Match matches the tasks of runs (oldest first) by the rule of the
// package doc and returns the tasks in the package doc's order; the
// samples before each run's first task (BeforeFirstTask) match nothing
// and are in no Task. It does not modify runs.
func Match(runs []Run) []Task {
	var tasks []Task
	exact := map[exactKey]int{}   // → index into tasks
	byName := map[nameKey][]int{} // → indices into tasks, in order
	newTask := func(ri int, tr *TaskRun, path string) int {
		t := Task{Name: tr.Name, Play: tr.Play, Role: tr.Role, Path: path, At: make([]int, len(runs))}
		for i := range t.At {
			t.At[i] = -1
		}
		tasks = append(tasks, t)
		k := nameKey{tr.Play, tr.Role, tr.Name}
		byName[k] = append(byName[k], len(tasks)-1)
		return len(tasks) - 1
	}
	for ri := len(runs) - 1; ri >= 0; ri-- {
		run := runs[ri].Tasks
		keys := make([]exactKey, len(run))
		seen := map[exactKey]int{}
		for i := range run {
			k := exactKey{nameKey: nameKey{run[i].Play, run[i].Role, run[i].Name}, path: NormalizePath(run[i].Path)}
			n := seen[k]
			seen[k] = n + 1
			k.n = n
			keys[i] = k
		}
		match := make([]int, len(run))
		used := map[int]bool{}
		for i, k := range keys { // 1: exact
			match[i] = -1
			if BeforeFirstTask(run[i]) {
				continue
			}
			if ti, ok := exact[k]; ok && !used[ti] {
				match[i], used[ti] = ti, true
			}
		}
		for i, k := range keys { // 2: moved
			if match[i] >= 0 || BeforeFirstTask(run[i]) {
				continue
			}
			for _, ti := range byName[k.nameKey] {
				if !used[ti] {
					match[i], used[ti] = ti, true
					break
				}
			}
		}
		for i, k := range keys { // 3: new
			if BeforeFirstTask(run[i]) {
				continue
			}
			if match[i] < 0 {
				match[i] = newTask(ri, &run[i], k.path)
			}
			tasks[match[i]].At[ri] = i
			if _, ok := exact[k]; !ok {
				exact[k] = match[i]
			}
		}
	}
	setKeys(tasks)
	return tasks
}

// setKeys gives each task its key: "path name", or the name alone, or
// UnnamedKey for neither, suffixed " #n" from the second task sharing one.
func setKeys(tasks []Task) {
	count := map[string]int{}
	for i := range tasks {
		k := tasks[i].Name
		if tasks[i].Path != "" {
			k = tasks[i].Path + " " + k
		}
		if k == "" {
			k = UnnamedKey
		}
		count[k]++
		if n := count[k]; n > 1 {
			k += " #" + strconv.Itoa(n)
		}
		tasks[i].Key = k
	}
}
