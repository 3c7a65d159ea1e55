// Package history compares the runs of one job template task by task: it
// matches each task of a run to the same task of the other runs (Match),
// and flags a run's task whose duration, CPU or memory stands out against
// the other runs of the window (Rule). It is pure: it reads no store and
// does no I/O; the server feeds it the per-run task statistics it reads
// from the store (the job's tasks payload) and encodes what it returns.
//
// # Task identity
//
// Task uuids and counters change from run to run; what stays is where the
// task is written and what it is called. A task occurrence is identified
// by its play, role, name and task_path (file:line of the task in the
// playbook or role, from the job events). task_path is normalised first
// (NormalizePath): the private data dir differs per run
// (/tmp/awx_42_x/project/site.yml:14 and /runner/project/site.yml:14 are
// the same task), so the path keeps what follows the first "/project/"
// (or from "ansible_collections/" on), else it is kept whole.
//
// Runs are matched newest first, each against the tasks known from the
// newer runs, in three passes:
//
//  1. exact: same play, role, name and task_path, and the same position
//     among the run's tasks of that play, role, name and task_path (the
//     n-th start of a task repeated by a loop of include_tasks, or a
//     handler notified twice, matches the n-th);
//  2. moved: a task not matched so far that has the same play, role and
//     name as a known task not matched in this run, in order of position
//     (a line inserted above a task moves its file:line; the task stays);
//  3. otherwise the task is new: its history starts in this run.
//
// So a renamed task starts a new history (its old name's history ends),
// an added task has no entry in older runs, a removed one none in newer
// runs, and a task repeated more often in one run than another has extra
// entries for the extra repetitions. Tasks without task_path (no job
// events) match by play, role, name and position alone.
//
// Tasks are listed in the order of the newest run they appear in: the
// tasks of the newest run in its order, then those of older runs that
// the newer ones lack. A task's key is "file:line name" as the newest
// run where it appears has it (or the name alone without a task_path;
// "(unnamed task)" with neither), suffixed " #2", " #3"… when two tasks
// would share a key. The samples taken before a run's first task starts
// (counter 0 with no name: ansible's own start-up) are no task of the
// template's and are left out (BeforeFirstTask).
//
// # Regressions
//
// See Rule: for each task and metric, a run's value against the median
// and the median absolute deviation of the other runs of the window.
// A run still going (status new, pending, waiting or running; see
// Unfinished) is checked like the others, so a task that already ran
// heavier than usual is flagged before the run ends, but it is no
// baseline for the other runs: its last task is cut short, and its low
// figures would make a finished run look heavy. Every other status
// (failed and canceled too, and none) counts as finished.
//
// # Contention
//
// A task on a busy node runs slower and burstier for reasons of the
// node's, not its own. Each task run carries its stall shares (Waited:
// the share of its wall time it waited for a CPU, on memory, …, as the
// collector measured them). A duration or CPU finding of a run whose task
// waited for a CPU so much more than in the other runs that the wait
// alone explains a slowdown (see Rule and Contended), or a CPU peak of a
// run that waited much less than the others, is contended
// (Regression.Contended), with the figures that decided: reported, but no
// regression. Memory and PID findings are never contended.
package history
