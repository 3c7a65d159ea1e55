package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/cgroup"
	"github.com/peakline/peakline/collector/ship"
)

// Environment variables the command gets.
const (
	// EnvJobID holds the job id the samples are stored under; it is absent
	// when the id is not known at start (ansible-runner without --ident
	// and no --job: the id becomes the ident runner makes up).
	EnvJobID = "PEAKLINE_JOB_ID"
	// EnvCgroup holds the job's cgroup directory (on v1 the one in the
	// memory hierarchy), which `peakline collect --attach` accepts.
	EnvCgroup = "PEAKLINE_CGROUP"
)

// ErrNoCommand means LiveConfig has neither a Command nor Attach.
var ErrNoCommand = errors.New("no command to run and no cgroup to attach to")

// The defaults of LiveConfig's zero fields, for the collect command's flags.
const (
	DefaultPollInterval    = 250 * time.Millisecond
	DefaultMaxQueueSamples = 100_000
)

// LiveConfig configures Collect. Zero durations and sizes take defaults.
type LiveConfig struct {
	// Server is the Peakline server's base URL, e.g. http://host:9090.
	Server string
	// JobID is the job id (--job). Default: the ansible-runner ident
	// (--ident, or the artifacts dir runner makes), else
	// <hostname>-<UTC start time>-<pid>; the id in use is logged.
	JobID string
	// Template is the job template id the server's collection policy is
	// asked about (--template); "" is the template "default". It is
	// also sent as the job's template_id.
	Template string
	// TemplateName is the job template's name sent with the job
	// (--template-name).
	TemplateName string
	// EventsDir is the job_events directory to follow (--events). By
	// default `ansible-runner run DIR` commands are recognised and their
	// artifacts/<ident>/job_events followed; `ansible-playbook` commands
	// run with Peakline's Ansible callback plugin enabled (see
	// setupCallback), which writes job events to follow; other commands
	// have none, which is warned about. Samples taken while no task is
	// known get counter 0.
	EventsDir string
	// Attach is an existing cgroup to sample until it has no process left
	// (--attach): its directory, or a cgroup path as in /proc/PID/cgroup.
	// Command must be empty then.
	Attach string
	// SpoolDir holds batches the server has not acknowledged (--spool-dir).
	// Default: <user cache dir>/peakline/spool, else /var/tmp/peakline-spool.
	SpoolDir string
	// Ident is the job's ansible-runner ident when the command line does
	// not carry it: for `ansible-runner run DIR` without --ident, the
	// artifacts/<Ident> dir to follow instead of the first new one; in any
	// mode, the job id when JobID is empty.
	Ident string
	// PollInterval is the default sampling interval (default 250ms);
	// CPUInterval, MemoryInterval and PIDsInterval override it per resource.
	PollInterval, CPUInterval, MemoryInterval, PIDsInterval time.Duration
	// MaxQueueSamples bounds the samples kept in memory while the server
	// does not answer; later batches go to SpoolDir (default 100000).
	MaxQueueSamples int
	// Command is the command to run, with its arguments.
	Command []string
	// Stdin, Stdout, Stderr are the command's streams; nil is /dev/null.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Logger receives the collector's own log (nil: discarded).
	Logger *slog.Logger
	// Notices receives the lines for the person running the job, whatever
	// the log level: the job page URL once the job id is known, and the
	// warning when no job events arrived (nil: discarded).
	Notices io.Writer
	// Transport holds the token, CA bundle and client certificate sent to
	// Server (--token-file, --ca-file, --cert-file, --key-file).
	Transport ship.TransportConfig
	// MemoryLimitBytes limits the command's cgroup to that much memory
	// (--memory-limit), as a container group's pod limit does: a job
	// outgrowing it is OOM-killed. 0: no limit of its own.
	MemoryLimitBytes int64
}

// liveTuning holds the knobs tests turn; defaultLiveTuning is production.
type liveTuning struct {
	cgroupRoot   string        // root of the cgroup tree ("/")
	settle       time.Duration // longest a sample waits for its task
	flushEvery   time.Duration // how often settled samples are batched
	flushTimeout time.Duration // how long the exit waits for the server
	eventsEvery  time.Duration // how often job_events is listed
	identWait    time.Duration // how long a job id waits for runner's ident
	minBackoff   time.Duration
	maxBackoff   time.Duration
	client       *http.Client
	now          func() time.Time
	clock        Clock // what samples are stamped with (nil: SystemClock)
}

func defaultLiveTuning() liveTuning {
	return liveTuning{
		cgroupRoot:   "/",
		settle:       5 * time.Second,
		flushEvery:   time.Second,
		flushTimeout: 10 * time.Second,
		eventsEvery:  200 * time.Millisecond,
		identWait:    30 * time.Second,
		minBackoff:   500 * time.Millisecond,
		maxBackoff:   30 * time.Second,
		client:       &http.Client{Timeout: 15 * time.Second},
		now:          time.Now,
	}
}

// Collect runs cfg.Command in a fresh cgroup while sampling its CPU, memory
// and PIDs, attributes each sample to the Ansible task running at the time
// (from the job events as they are written) and streams the samples to
// cfg.Server; or, with cfg.Attach, samples an existing cgroup until it is
// empty or ctx ends.
//
// The collector never makes the job fail: exitCode is always the command's
// (128+N when signal N ended it; 127 when it cannot be found), whatever
// happens to collection. err reports the collector's own setup problems
// (no cgroup, no command found), which were also logged; the command ran
// regardless when it could. Mistakes in cfg (no command, both Command and
// Attach, a poll interval under 10ms) run nothing and return 2. With
// Attach, exitCode is 0, or 1 when the cgroup cannot be opened.
//
// Before anything else the server's collection policy is asked
// (GET /api/v1/settings and /api/v1/templates/{Template}); when it says
// off, the command runs untouched (no cgroup, no sampling) and that is
// logged once. When the server cannot be asked within 3s, the collector
// collects and spools: losing a job's data is worse than storing it
// unasked, and a server that is down gets the spool later.
//
// Samples reach the server in gzip JSON ingest batches about every second;
// while it is down or slow they queue in memory up to MaxQueueSamples and
// then in SpoolDir, retried with exponential backoff. At exit the collector
// waits up to 10s for the server, spools what is left, and the next Collect
// (any job) resends it. When ctx ends, the command gets SIGTERM and is
// still waited for.
//
// A 401 or 403 answer (cfg.Transport's token refused, or none sent) is
// logged once as an error; the run sends nothing more and spools every
// batch, which a later run with an accepted token sends. An unusable
// cfg.Transport (unreadable or empty token file, bad certificates) runs
// nothing and returns 2.
func Collect(ctx context.Context, cfg LiveConfig) (exitCode int, err error) {
	tune := defaultLiveTuning()
	if cfg.Server != "" {
		tr, err := ship.NewTransport(cfg.Transport, cfg.Server, cfg.Logger)
		if err != nil {
			return 2, fmt.Errorf("cannot collect: %w", err)
		}
		tune.client.Transport = tr
	}
	return collectLive(ctx, cfg, tune)
}

func collectLive(ctx context.Context, cfg LiveConfig, tune liveTuning) (int, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "collect")
	if err := cfg.fillDefaults(); err != nil {
		return 2, err
	}
	if cfg.Attach != "" {
		return collectAttach(ctx, &cfg, tune, log)
	}
	if cfg.Server == "" {
		log.Error("no server to send samples to (--server); running the command without collection")
		code, _ := runPlain(ctx, &cfg, log)
		return code, errors.New("cannot collect: --server is empty")
	}

	policy, err := FetchPolicy(ctx, tune.client, cfg.Server, cfg.Template)
	if err != nil {
		log.Warn("cannot ask the server whether to collect; collecting and spooling", "err", err)
	} else if ok, reason := policy.Decide(); !ok {
		log.Info("not collecting: "+reason+"; running the command untouched", "template", cfg.Template)
		return runPlain(ctx, &cfg, log)
	}

	path, err := exec.LookPath(cfg.Command[0])
	if err != nil {
		log.Error("cannot find the command", "err", err)
		return 127, fmt.Errorf("cannot find command %q: %w", cfg.Command[0], err)
	}

	// Where the job events are, and what the job is called.
	ids := &liveJobID{id: cfg.JobID, now: tune.now, log: log, announce: announcer(&cfg)}
	ids.deadline = tune.now().Add(tune.identWait)
	var follower *eventFollower
	ra, isRunner := parseRunnerCommand(cfg.Command)
	switch {
	case cfg.EventsDir != "":
		follower = newEventFollower(fixedDir(cfg.EventsDir), tune.now, log)
		if ids.id == "" {
			ids.id = cfg.Ident
		}
	case isRunner:
		if ra.ident == "" {
			ra.ident = cfg.Ident
		}
		loc := newRunnerLocator(ra)
		follower = newEventFollower(loc.locate, tune.now, log)
		if ids.id == "" {
			ids.id = ra.ident
			ids.ident = loc.identNow
		}
	}
	if ids.id == "" && ids.ident == nil {
		ids.id = generateJobID(tune.now())
	}
	if ids.id != "" {
		log.Info("collecting", "job", ids.id)
		ids.tell(ids.id)
	}

	// ansible-playbook gets Peakline's callback plugin, which writes the
	// job events. Any other command has none: a follower of a directory
	// that stays empty would only hold every sample for Settle.
	var callback *callbackSetup
	warnedNoEvents := false
	switch {
	case follower != nil:
	case isPlaybookCommand(cfg.Command):
		wd, _ := os.Getwd()
		callback, err = setupCallback(ids.id, os.Environ(), wd)
		if err != nil {
			noEventsWarning(&cfg, log, "Peakline's Ansible callback plugin cannot be enabled ("+err.Error()+")")
			warnedNoEvents = true
			break
		}
		defer func() {
			if err := callback.remove(); err != nil {
				log.Warn("cannot remove the callback plugin directory", "err", err)
			}
		}()
		follower = newEventFollower(fixedDir(callback.eventsDir), tune.now, log)
	default:
		noEventsWarning(&cfg, log, "the command is neither ansible-playbook nor ansible-runner")
		warnedNoEvents = true
	}

	layout, err := cgroup.Detect(tune.cgroupRoot)
	var cg *cgroup.Cgroup
	if err == nil {
		if n, err := layout.RemoveStale(staleCgroup); n > 0 || err != nil {
			log.Info("removed cgroups of collectors that are gone", "cgroups", n, "err", err)
		}
		cg, err = layout.Create(fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), tune.now().UnixMilli()))
	}
	if err != nil {
		log.Error("cannot make a cgroup for the job; running the command without collection", "err", err)
		code, _ := runPlain(ctx, &cfg, log)
		return code, fmt.Errorf("cannot collect: %w", err)
	}
	defer func() {
		if err := cg.Remove(); err != nil {
			log.Warn("cannot remove the job's cgroup", "err", err)
		}
	}()
	if cfg.MemoryLimitBytes > 0 {
		if err := cg.SetMemoryLimit(uint64(cfg.MemoryLimitBytes)); err != nil {
			log.Error("cannot limit the job's memory; running the command without collection", "err", err)
			code, _ := runPlain(ctx, &cfg, log)
			return code, fmt.Errorf("cannot collect: --memory-limit: %w", err)
		}
	}

	env := append(os.Environ(), EnvCgroup+"="+cg.Path())
	if ids.id != "" {
		env = append(env, EnvJobID+"="+ids.id)
	}
	if callback != nil {
		env = append(env, callback.env...)
	}
	// The CPU baseline is read from the empty cgroup, before the command
	// starts: what the command uses before sampling starts is in the
	// first sample, not lost.
	p := newLivePipeline(&cfg, tune, cg, follower, ids, log)
	p.session.Baseline()
	cmd, placeErr, err := startInCgroup(&cfg, path, env, cg, log)
	if err != nil {
		log.Error("cannot start the command", "err", err)
		return 126, err
	}
	if placeErr != nil {
		log.Error("cannot move the command into its cgroup; running it without collection", "err", placeErr)
		return waitCommand(ctx, cmd, log), fmt.Errorf("cannot collect: %w", placeErr)
	}
	log.Debug("command started", "pid", cmd.Process.Pid, "cgroup", cg.Path(), "mode", cg.Mode())

	p.start()
	code := waitCommand(ctx, cmd, log)
	status := "successful"
	if code != 0 {
		status = "failed"
	}
	p.session.SetInfo(ansible.JobInfo{TemplateID: cfg.Template, TemplateName: cfg.TemplateName, Status: status, Forks: commandForks(cfg.Command, os.Environ())})
	p.stop()
	if !warnedNoEvents && !follower.events.seenAny() {
		switch {
		case cfg.EventsDir != "":
			noEventsWarning(&cfg, log, "none arrived in --events "+cfg.EventsDir)
		case isRunner:
			noEventsWarning(&cfg, log, "ansible-runner wrote none that collect found")
		default:
			noEventsWarning(&cfg, log, "ansible-playbook wrote none through Peakline's callback plugin (it ended before its playbook started, or ANSIBLE_CALLBACKS_ENABLED was changed under it)")
		}
	}
	return code, nil
}

// noEventsWarning says, once per job, that its samples are not attributed
// to tasks, why, and what to do: on cfg.Notices, else in the log (not
// both: on the command line both are stderr).
func noEventsWarning(cfg *LiveConfig, log *slog.Logger, why string) {
	msg := "no job events: tasks are not attributed; " + why +
		"; run ansible-playbook or ansible-runner under collect, or pass --events DIR (a job_events directory)"
	if cfg.Notices != nil {
		fmt.Fprintln(cfg.Notices, "peakline collect: WARNING: "+msg)
		return
	}
	log.Warn(msg)
}

// announcer returns the function that prints the job page URL to
// cfg.Notices.
func announcer(cfg *LiveConfig) func(id string) {
	return func(id string) {
		if cfg.Notices != nil && cfg.Server != "" {
			fmt.Fprintln(cfg.Notices, "peakline collect: job page "+JobPageURL(cfg.Server, id))
		}
	}
}

// JobPageURL is the URL of job id's page on the server at base.
func JobPageURL(base, id string) string {
	return strings.TrimRight(base, "/") + "/jobs/" + url.PathEscape(id)
}

// collectAttach samples an existing cgroup until it is empty or ctx ends.
func collectAttach(ctx context.Context, cfg *LiveConfig, tune liveTuning, log *slog.Logger) (int, error) {
	if cfg.Server == "" {
		return 2, errors.New("cannot collect: --server is empty")
	}
	layout, err := cgroup.Detect(tune.cgroupRoot)
	var cg *cgroup.Cgroup
	if err == nil {
		cg, err = layout.Open(cfg.Attach)
	}
	if err != nil {
		log.Error("cannot attach", "cgroup", cfg.Attach, "err", err)
		return 1, fmt.Errorf("cannot attach to %q: %w", cfg.Attach, err)
	}
	defer cg.Remove() // closes only: the cgroup is not ours
	ids := &liveJobID{id: cfg.JobID, now: tune.now, log: log, announce: announcer(cfg)}
	if ids.id == "" {
		ids.id = cfg.Ident
	}
	if ids.id == "" {
		ids.id = generateJobID(tune.now())
	}
	var follower *eventFollower
	if cfg.EventsDir != "" {
		follower = newEventFollower(fixedDir(cfg.EventsDir), tune.now, log)
	}
	log.Info("attached", "cgroup", cg.Path(), "job", ids.id)
	ids.tell(ids.id)
	p := newLivePipeline(cfg, tune, cg, follower, ids, log)
	p.start()
	t := time.NewTicker(cfg.PollInterval)
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-t.C:
			if populated, err := cg.Populated(); err != nil || !populated {
				if err != nil {
					log.Warn("cannot tell whether the cgroup is empty; stopping", "err", err)
				}
				running = false
			}
		}
	}
	t.Stop()
	p.stop()
	return 0, nil
}

func (cfg *LiveConfig) fillDefaults() error {
	if cfg.Attach != "" && len(cfg.Command) > 0 {
		return errors.New("cannot collect: --attach samples an existing cgroup and takes no command")
	}
	if cfg.Attach == "" && len(cfg.Command) == 0 {
		return ErrNoCommand
	}
	for name, d := range map[string]time.Duration{
		"--poll-interval": cfg.PollInterval, "--cpu-poll-interval": cfg.CPUInterval,
		"--memory-poll-interval": cfg.MemoryInterval, "--pid-poll-interval": cfg.PIDsInterval,
	} {
		if d < 0 || (d > 0 && d < 10*time.Millisecond) {
			return fmt.Errorf("cannot collect: %s %v must be at least 10ms", name, d)
		}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	for _, d := range []*time.Duration{&cfg.CPUInterval, &cfg.MemoryInterval, &cfg.PIDsInterval} {
		if *d == 0 {
			*d = cfg.PollInterval
		}
	}
	if cfg.MaxQueueSamples <= 0 {
		cfg.MaxQueueSamples = DefaultMaxQueueSamples
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = ship.DefaultSpoolDir()
	}
	return nil
}

// cgroupPrefix starts the name of a job's cgroup: peakline-<pid>-<unix ms>,
// the pid being the collector's.
const cgroupPrefix = "peakline-"

// staleCgroup tells whether a cgroup name is one of a collector process
// that no longer exists (killed before it removed its cgroup).
func staleCgroup(name string) bool {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	// Signal 0 checks that the process exists; EPERM means it does.
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// generateJobID makes a job id for a job that has none:
// <hostname>-<UTC start time>-<pid>, unique on a host.
func generateJobID(now time.Time) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s-%s-%d", host, now.UTC().Format("20060102T150405Z"), os.Getpid())
}

// liveJobID decides the job id, which may wait for ansible-runner to name
// its ident dir. It is safe for concurrent use.
type liveJobID struct {
	mu       sync.Mutex
	id       string
	ident    func() string // runner's ident once known; nil when id is fixed
	deadline time.Time     // after it a generated id is used
	now      func() time.Time
	log      *slog.Logger
	// announce is called once with the id decided while waiting
	// (decide); the caller announces an id known from the start.
	announce func(id string)
}

// tell calls announce, if set.
func (j *liveJobID) tell(id string) {
	if j.announce != nil {
		j.announce(id)
	}
}

// get returns the id, or "" while it waits for runner's ident.
func (j *liveJobID) get() string { return j.decide(false) }

// decide returns the id; with force it never waits.
func (j *liveJobID) decide(force bool) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.id != "" {
		return j.id
	}
	if j.ident == nil {
		j.id = generateJobID(j.now())
		j.tell(j.id)
		return j.id
	}
	if id := j.ident(); id != "" {
		j.id = id
		j.log.Info("collecting", "job", id, "from", "ansible-runner ident")
		j.tell(id)
		return id
	}
	if force || j.now().After(j.deadline) {
		j.id = generateJobID(j.now())
		j.log.Warn("ansible-runner made no ident dir; using a generated job id", "job", j.id)
		j.tell(j.id)
	}
	return j.id
}

// livePipeline is the running part of a collection: a session (sampler →
// batcher) sending to the shipper, with the events follower beside.
type livePipeline struct {
	follower *eventFollower // nil: no job events
	session  *Session
	shipper  *ship.Shipper
	spool    *ship.Spool // nil: no usable spool directory
	ids      *liveJobID
	tune     liveTuning
	log      *slog.Logger

	followStop, shipStop context.CancelFunc
	followDone           chan struct{}
}

func newLivePipeline(cfg *LiveConfig, tune liveTuning, stats Stats, follower *eventFollower, ids *liveJobID, log *slog.Logger) *livePipeline {
	sp, err := ship.OpenSpool(cfg.SpoolDir, tune.now)
	if err != nil {
		log.Warn("no spool; batches the server does not take stay in memory", "err", err)
		sp = nil
	}
	p := &livePipeline{follower: follower, ids: ids, tune: tune, log: log, spool: sp}
	p.shipper = ship.NewShipper(ship.ShipperConfig{
		Server: cfg.Server, HTTP: tune.client, TokenFile: cfg.Transport.TokenFile, Spool: sp,
		MaxQueueSamples: cfg.MaxQueueSamples, MinBackoff: tune.minBackoff, MaxBackoff: tune.maxBackoff, Logger: log,
	})
	// An attached cgroup's job ends with no exit code to tell how: it
	// gets no status.
	status := "running"
	if cfg.Attach != "" {
		status = ""
	}
	var events *Events
	if follower != nil {
		events = follower.events
	}
	p.session = newSession(SessionConfig{
		// Both ways of collecting sample a cgroup of the job's own.
		Info: ansible.JobInfo{TemplateID: cfg.Template, TemplateName: cfg.TemplateName, Status: status, Measured: ansible.MeasuredCgroup,
			Forks: commandForks(cfg.Command, os.Environ())},
		Stats: stats, Events: events,
		PollInterval: cfg.PollInterval, CPUInterval: cfg.CPUInterval, MemoryInterval: cfg.MemoryInterval, PIDsInterval: cfg.PIDsInterval,
		Settle: tune.settle, FlushInterval: tune.flushEvery,
		Send: p.shipper.Enqueue, Logger: log, Clock: tune.clock,
	}, ids.get) // fillDefaults checked the intervals
	return p
}

// start resends the spool of earlier runs and starts sampling.
func (p *livePipeline) start() {
	if n := p.shipper.LoadSpool(); n > 0 {
		p.log.Info("resending spooled batches", "batches", n)
	}
	shipCtx, shipStop := context.WithCancel(context.Background())
	p.shipStop = shipStop
	go p.shipper.Run(shipCtx)

	p.session.Start()
	if p.follower != nil {
		followCtx, followStop := context.WithCancel(context.Background())
		p.followStop, p.followDone = followStop, make(chan struct{})
		go func() { defer close(p.followDone); p.follower.run(followCtx, p.tune.eventsEvery) }()
	}
}

// stop takes the last samples and events, sends everything, spools what
// the server did not take, and logs a summary.
func (p *livePipeline) stop() {
	if p.follower != nil {
		p.followStop() // the follower scans once more as it stops
	}
	p.session.StopSampling()
	if p.follower != nil {
		<-p.followDone
	}
	p.ids.decide(true)
	samples := p.session.Close()
	unsent := p.shipper.Finish(p.shipStop, p.tune.flushTimeout)
	p.shipStop()
	s := p.shipper.Stats()
	args := []any{"job", p.ids.get(), "samples", samples, "sent_samples", s.SentSamples, "batches", s.SentBatches}
	if s.RejectedBatches > 0 {
		args = append(args, "rejected_batches", s.RejectedBatches, "rejected_samples", s.RejectedSamples)
	}
	if unsent > 0 && p.spool != nil {
		p.log.Warn("the server did not take every batch; they are spooled and the next collect resends them",
			append(args, "unsent_samples", unsent, "spool", p.spool.Dir())...)
		return
	}
	p.log.Info("collection done", args...)
}
