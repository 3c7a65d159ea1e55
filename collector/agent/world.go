package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/cgroup"
	"github.com/peakline/peakline/collector/discover"
	"github.com/peakline/peakline/collector/live"
	"github.com/peakline/peakline/collector/ship"
)

// node is the world of a real execution node: its cgroupfs and /proc
// (collector/discover, collector/cgroup), AWX (collector/awx) and the
// Peakline server (collector/ship).
type node struct {
	cfg     Config
	scanner *discover.Scanner
	layout  *cgroup.Layout // nil when the host has no cgroupfs: process trees only
	awx     *awx.Client
	http    *http.Client // the Peakline server's, for its collection policy
	send    func(body []byte, samples int)
	log     *slog.Logger

	toldDenied bool // a refused environment read was logged
}

func (n *node) scan() ([]target, error) {
	jobs, err := n.scanner.Scan()
	for _, cg := range n.scanner.Unwalked() {
		n.log.Warn("an ansible process runs in a container cgroup under a parent the agent does not walk: its cgroup is not measured; add its top-level cgroup with --cgroup-parent KIND:TOP",
			"cgroup", cg)
	}
	if denied := n.scanner.EnvironDenied(); denied > 0 && !n.toldDenied {
		n.toldDenied = true
		n.log.Warn("cannot read the environment of a job process (JOB_ID, HOSTNAME): containers are placed only by conmon's command line, process trees not at all; the agent needs the jobs' uid or CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (docs/agent.md)",
			"refused", denied, "uid", os.Geteuid())
	}
	out := make([]target, 0, len(jobs))
	for _, j := range jobs {
		t := target{jobID: strconv.FormatInt(j.ID, 10), cgroupDir: j.Cgroup, pids: j.PIDs, via: j.Via}
		if j.Kind == discover.KindProcessTree {
			// A tree has no identity but its job: one tree per job id.
			t.key = "tree/" + t.jobID
		} else {
			t.key = string(j.Kind) + "/" + j.ContainerID
		}
		out = append(out, t)
	}
	return out, err
}

func (n *node) open(t target) (*opened, error) {
	if t.cgroupDir == "" {
		id, err := strconv.ParseInt(t.jobID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("open process tree of job %q: %w", t.jobID, err)
		}
		tree, err := discover.NewTree(n.cfg.ProcRoot, id, n.cfg.Rules)
		if err != nil {
			return nil, fmt.Errorf("open process tree of job %s: %w", t.jobID, err)
		}
		return &opened{meter: tree, measured: ansible.MeasuredProcessTree, alive: tree.Populated, close: func() {}}, nil
	}
	if n.layout == nil {
		return nil, fmt.Errorf("open cgroup %s: no cgroup hierarchy in --cgroup-root %s", t.cgroupDir, n.cfg.CgroupRoot)
	}
	cg, err := n.layout.Open(t.cgroupDir)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", t.cgroupDir, err)
	}
	return &opened{meter: cg, measured: ansible.MeasuredCgroup, alive: cg.Populated, close: func() { _ = cg.Remove() }}, nil
}

func (n *node) start(ctx context.Context, t target, o *opened) (session, error) {
	id, err := strconv.ParseInt(t.jobID, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("start job %q: AWX job ids are numbers: %w", t.jobID, err)
	}
	log := n.log.With("job", t.jobID)
	events := live.NewEvents()
	s, err := live.NewSession(live.SessionConfig{
		JobID:  t.jobID,
		Info:   ansible.JobInfo{Measured: o.measured},
		Stats:  o.meter,
		Events: events,
		// The session's own settle is the agent's: AWX answers seconds
		// late, or not at all for a while.
		PollInterval: n.cfg.PollInterval, CPUInterval: n.cfg.CPUInterval,
		MemoryInterval: n.cfg.MemoryInterval, PIDsInterval: n.cfg.PIDsInterval,
		Settle:            n.cfg.AWXSettle,
		MaxPendingSamples: n.cfg.MaxHeldSamples,
		// Nothing goes out before the server's policy is known.
		Hold:   true,
		Send:   n.send,
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	// The follower names the job in its lines itself.
	f := awx.NewFollower(n.awx, id, n.followerConfig(events))
	js := &jobSession{s: s, f: f, stopped: make(chan struct{})}
	s.Start()
	go js.follow(ctx, n.cfg.AWXPollInterval)
	return js, nil
}

// followerConfig is the AWX follower's of a job whose events go to sink.
// Its backoff after failures takes a random part, up to a fifth, off each
// delay (awx.Backoff.Jitter), so that the followers (and the agents of
// other nodes) that failed together do not come back together.
func (n *node) followerConfig(sink awx.Sink) awx.FollowerConfig {
	return awx.FollowerConfig{MinInterval: n.cfg.AWXPollInterval, Backoff: awx.Backoff{Jitter: rand.Float64}, Log: n.log, Sink: sink, Unified: true}
}

// jobSession is a live.Session fed by an AWX follower.
type jobSession struct {
	s       *live.Session
	f       *awx.Follower
	stopped chan struct{} // closed when follow returns
}

// follow polls the follower, which hands the events to the session's
// Events and completes them (it makes at most one request per
// AWXPollInterval itself), until ctx ends.
func (j *jobSession) follow(ctx context.Context, every time.Duration) {
	defer close(j.stopped)
	// Ticking faster than the follower's own spacing keeps a poll from
	// waiting almost two intervals when the timer fires a hair early.
	t := time.NewTicker(max(every/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		_ = j.f.Poll(ctx) // the follower logs its failures and backs off
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (j *jobSession) info() (ansible.JobInfo, bool, bool) {
	m, ok := j.f.Job()
	if !ok {
		return ansible.JobInfo{}, false, false
	}
	return m.Info(), m.Final(), true
}

func (j *jobSession) awxType() (string, bool) {
	m, _ := j.f.Job()
	return m.Type, j.f.Unknown()
}

func (j *jobSession) setInfo(info ansible.JobInfo) { j.s.SetInfo(info) }
func (j *jobSession) stopSampling()                { j.s.StopSampling() }
func (j *jobSession) held() int                    { return j.s.PendingSamples() }
func (j *jobSession) release()                     { j.s.Release() }
func (j *jobSession) discard() (int, int)          { return j.s.Discard() }

func (j *jobSession) eventsComplete() bool {
	m, ok := j.f.Job()
	return j.f.Done() && ok && m.Final()
}

// close waits for follow to end (the lifecycle cancels its context first)
// so that the last events are in before the last samples go. The follower
// completed the events if AWX gave them all; else the samples taken after
// AWX last answered go out with no task (see live.Session.Close).
func (j *jobSession) close() {
	<-j.stopped
	j.s.Close()
}

func (n *node) policy(ctx context.Context, template string) (live.Policy, error) {
	return live.FetchPolicy(ctx, n.http, n.cfg.Server, template)
}

// newHTTPClient is the client of the Peakline server: cfg's token and TLS.
func newHTTPClient(cfg Config) (*http.Client, error) {
	tr, err := ship.NewTransport(cfg.Transport, cfg.Server, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}, nil
}
