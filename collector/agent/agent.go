package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/live"
)

// target is one AWX job a scan found running on the node.
type target struct {
	// jobID is the AWX job id.
	jobID string
	// key tells this run of the job apart on the node: the container's
	// cgroup, or the process tree's root pid. A key seen again after its
	// job was finished is not started twice.
	key string
	// cgroupDir is the job's own cgroup; "" when it has none and is
	// measured through its process tree.
	cgroupDir string
	// pids are the roots of the job's process tree (the processes with its
	// JOB_ID), when cgroupDir is "".
	pids []int
	// via says how the job id was told (discover.ViaConmon, …).
	via string
}

// meter reads one job's resources, in the units of cgroup.Cgroup's methods.
// Reads of a job that is gone return errors; they never panic.
type meter interface {
	CPU() (time.Duration, error)
	Memory() (current, peakSinceLast uint64, err error)
	PIDs() (current, peakSinceLast uint64, err error)
}

// opened is a job's meter with what the lifecycle needs around it.
type opened struct {
	meter    meter
	measured string // ansible.MeasuredCgroup or ansible.MeasuredProcessTree
	// alive reports whether the job still has a process; an error counts
	// as gone.
	alive func() (bool, error)
	close func()
}

// session is one job's running sampling pipeline (collector/live), its
// event source being the job's AWX follower.
type session interface {
	// info returns the job's metadata as AWX last gave it; ok is false
	// before AWX answered. final tells that AWX's status for the job will
	// not change anymore.
	info() (info ansible.JobInfo, final, ok bool)
	// awxType returns the unified job's type as AWX gave it ("" before
	// it answered), and whether AWX said it knows no unified job of the
	// id: a container that is no AWX job's, or one the token may not see.
	awxType() (typ string, unknown bool)
	// setInfo sets the job's info the next batch carries.
	setInfo(info ansible.JobInfo)
	// held returns the samples taken and not sent yet.
	held() int
	// release lets the samples go out as they settle: the session starts
	// held, until the server's policy says the job is collected.
	release()
	// discard stops the session and drops the samples not sent, for a
	// job the policy says not to collect; it returns those dropped and
	// those already sent.
	discard() (dropped, sent int)
	// stopSampling takes each resource's last sample and stops sampling;
	// the held samples wait for their tasks.
	stopSampling()
	// eventsComplete reports whether the event source has every event of
	// the job (AWX said the job is finished and no event is left).
	eventsComplete() bool
	// close attributes and sends every held sample with the tasks known,
	// and ends the session. It does not wait for the server: the shared
	// shipper queues and spools.
	close()
}

// world is everything outside the lifecycle: discovery, opening a job's
// cgroup or process tree, starting its session.
type world interface {
	scan() ([]target, error)
	open(t target) (*opened, error)
	// start starts sampling o with the job's AWX follower as event
	// source; the follower stops when ctx ends. The session is held (it
	// sends nothing) until release.
	start(ctx context.Context, t target, o *opened) (session, error)
	// policy asks the server's collection policy for a template id ("":
	// none); an error means the server could not be asked.
	policy(ctx context.Context, template string) (live.Policy, error)
}

// agent tracks the jobs on the node: the running ones by key, and the
// finished ones, and the jobs the server's policy declined, until a scan
// no longer sees them.
type agent struct {
	cfg      Config
	w        world
	log      *slog.Logger
	policies *policyCache

	mu       sync.Mutex
	running  map[string]string   // key → job id
	byJob    map[string]string   // job id → key of its running session
	finished map[string]struct{} // keys of jobs done while still seen
	declined map[string]struct{} // job ids not to collect while still seen
	wg       sync.WaitGroup

	scanFailing bool
	// started, when set, is called after the first scan.
	started func()
}

func newAgent(cfg Config, w world, log *slog.Logger) *agent {
	return &agent{
		cfg: cfg, w: w, log: log,
		policies: newPolicyCache(w.policy, cfg.PolicyFallback, log),
		running:  map[string]string{},
		byJob:    map[string]string{},
		finished: map[string]struct{}{},
		declined: map[string]struct{}{},
	}
}

// run scans every DiscoverInterval until ctx ends, then stops every job's
// sampling, flushes what it holds and returns.
func (a *agent) run(ctx context.Context) {
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	defer a.wg.Wait()
	defer stopJobs()
	a.scan(jobsCtx, true)
	if a.started != nil {
		a.started()
	}
	t := time.NewTicker(a.cfg.DiscoverInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			a.log.Info("stopping; flushing every job's samples")
			return
		case <-t.C:
			a.scan(jobsCtx, false)
		}
	}
}

// scan starts a session for every job found that has none, and forgets
// the finished jobs a scan no longer finds. first marks the scan at the
// agent's start: the jobs it finds were already running.
func (a *agent) scan(ctx context.Context, first bool) {
	found, err := a.w.scan()
	if err != nil {
		if !a.scanFailing {
			a.log.Warn("cannot scan for jobs; retrying every discovery interval", "err", err)
		}
		a.scanFailing = true
		if len(found) == 0 {
			return
		}
	} else if a.scanFailing {
		a.scanFailing = false
		a.log.Info("scanning for jobs works again")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := make(map[string]struct{}, len(found))
	seenJobs := make(map[string]struct{}, len(found))
	for _, t := range found {
		seen[t.key] = struct{}{}
		seenJobs[t.jobID] = struct{}{}
		if _, ok := a.running[t.key]; ok {
			continue
		}
		if _, ok := a.finished[t.key]; ok {
			continue
		}
		if _, ok := a.declined[t.jobID]; ok {
			continue
		}
		if other, ok := a.byJob[t.jobID]; ok {
			a.log.Debug("job found twice; sampling the first", "job", t.jobID, "sampled", other, "ignored", t.key)
			continue
		}
		a.running[t.key], a.byJob[t.jobID] = t.jobID, t.key
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			declined := a.runJob(ctx, t, first)
			a.mu.Lock()
			delete(a.running, t.key)
			delete(a.byJob, t.jobID)
			a.finished[t.key] = struct{}{}
			if declined {
				a.declined[t.jobID] = struct{}{}
			}
			a.mu.Unlock()
		}()
	}
	for key := range a.finished {
		if _, ok := seen[key]; !ok {
			delete(a.finished, key)
		}
	}
	for id := range a.declined {
		if _, ok := seenJobs[id]; !ok {
			delete(a.declined, id)
		}
	}
}
