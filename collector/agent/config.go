package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/discover"
	"github.com/peakline/peakline/collector/ship"
)

// ErrConfig wraps every mistake in a Config: Run returns it before doing
// anything, with the flag to fix named.
var ErrConfig = errors.New("bad agent configuration")

// The defaults of Config's zero fields, for the agent command's flags.
const (
	DefaultPollInterval     = 250 * time.Millisecond
	DefaultAWXPollInterval  = time.Second
	DefaultAWXMaxConcurrent = 4
	DefaultAWXPageSize      = 200 // AWX's largest page_size
	DefaultAWXSettle        = 5 * time.Minute
	DefaultDrainTimeout     = 10 * time.Minute
	DefaultMaxHeldSamples   = 100_000
)

// Config configures Run. Zero durations and sizes take the defaults the
// field docs give.
type Config struct {
	// Server is the Peakline server's base URL (--server).
	Server string
	// Transport holds the token, CA bundle and client certificate sent to
	// Server (--token-file, --ca-file, --cert-file, --key-file).
	Transport ship.TransportConfig
	// AWXURL is the AWX (or Ansible Automation Platform controller) base
	// URL, e.g. https://awx.example.com (--awx-url).
	AWXURL string
	// AWXTokenFile holds a read-only AWX OAuth2 token (--awx-token-file).
	AWXTokenFile string
	// AWXCAFile is a PEM bundle trusted for AWX's certificate besides the
	// system roots (--awx-ca-file).
	AWXCAFile string
	// AWXPageSize is the page_size of job event requests (default 200,
	// AWX's largest).
	AWXPageSize int
	// CgroupRoot is the directory the host's cgroup hierarchies are in
	// (--cgroup-root): /sys/fs/cgroup on the host (the default),
	// /host/sys/fs/cgroup in a container that mounts the host's there.
	CgroupRoot string
	// ProcRoot is the host's /proc (--proc-root).
	ProcRoot string
	// PollInterval is the sampling interval (default 250ms); CPUInterval,
	// MemoryInterval and PIDsInterval override it per resource.
	PollInterval, CPUInterval, MemoryInterval, PIDsInterval time.Duration
	// DiscoverInterval is how often the node is scanned for new jobs
	// (default PollInterval), so sampling starts within one interval of a
	// job's start.
	DiscoverInterval time.Duration
	// AWXPollInterval is the least time between two AWX requests about one
	// job (default 1s); AWXMaxConcurrent bounds the AWX requests in flight
	// over all jobs (default 4).
	AWXPollInterval  time.Duration
	AWXMaxConcurrent int
	// SpoolDir holds the batches the server has not taken, for every job
	// (--spool-dir). Default: /var/lib/peakline-agent/spool for root, else
	// <user cache dir>/peakline-agent/spool.
	SpoolDir string
	// MaxHeldSamples bounds the samples one job holds while its tasks are
	// unknown (AWX not answering); past it the oldest go out with counter
	// 0, logged once per job (default 100000: about 2.3 hours at 4 Hz,
	// 3 resources).
	MaxHeldSamples int
	// DrainTimeout bounds how long a finished job's events are still
	// followed for its last samples' tasks (default 10m). Past it the
	// samples go out with the tasks known; those taken after AWX last
	// answered (AWX still down) with counter 0.
	DrainTimeout time.Duration
	// AWXSettle is how long a sample waits for AWX to show the task it
	// belongs to (default 5m): AWX saves events seconds late. A sample
	// goes out attributed with the tasks known once it is AWXSettle old
	// and AWX answered AWXSettle or more after it with no task start
	// since; while AWX does not answer, samples are held (up to
	// MaxHeldSamples) and attributed once it answers again.
	AWXSettle time.Duration
	// Rules say where jobs are and how their ids are told
	// (discover.DefaultRules when zero).
	Rules discover.Rules
	// CgroupParents are top-level cgroups walked for job containers
	// besides Rules' (--cgroup-parent KIND:TOP, such as
	// podman:awx.slice for podman's cgroup_parent), with the default
	// container names of KIND (discover.Rules.AddParent).
	CgroupParents []string
	// JobTypes are the AWX unified job types measured (--job-types; nil:
	// DefaultJobTypes). Every type that runs ansible-runner
	// (awx.RunnerTypes) runs as ansible_runner_<id> or automation-job-<id>;
	// a job of a type left out is dropped once AWX names its type.
	JobTypes []string
	// PolicyFallback is what becomes of a job when the server's
	// collection policy cannot be read (--policy-fallback): PolicyCollect
	// or PolicyDrop; "" is DefaultPolicyFallback.
	PolicyFallback string
	// Logger receives the agent's log (nil: discarded).
	Logger *slog.Logger
}

// Values of Config.PolicyFallback.
const (
	PolicyCollect = "collect"
	PolicyDrop    = "drop"
	// DefaultPolicyFallback collects: a server that cannot be asked is
	// most often down or misconfigured for a while, and a job not
	// collected then is lost for good, while one collected against the
	// policy can be deleted.
	DefaultPolicyFallback = PolicyCollect
)

// DefaultJobTypes returns the job types measured by default: playbook
// jobs and ad hoc commands, the runs an administrator tunes. Project and
// inventory updates and system jobs are AWX's own housekeeping.
func DefaultJobTypes() []string { return []string{awx.TypeJob, awx.TypeAdHocCommand} }

// fillDefaults checks cfg and sets the defaults of its zero fields. Errors
// wrap ErrConfig and name the flag.
func (cfg *Config) fillDefaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if err := checkURL(cfg.Server); err != nil {
		return bad("--server: %v (want the base URL of a peakline serve, e.g. http://peakline.example.com:9090)", err)
	}
	if err := checkURL(cfg.AWXURL); err != nil {
		return bad("--awx-url: %v (want the base URL of AWX, e.g. https://awx.example.com)", err)
	}
	if cfg.AWXTokenFile == "" {
		return bad("--awx-token-file: is required (a file holding a read-only AWX token)")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--poll-interval", cfg.PollInterval}, {"--cpu-poll-interval", cfg.CPUInterval},
		{"--memory-poll-interval", cfg.MemoryInterval}, {"--pid-poll-interval", cfg.PIDsInterval},
		{"--discover-interval", cfg.DiscoverInterval}, {"--awx-poll-interval", cfg.AWXPollInterval},
		{"--drain-timeout", cfg.DrainTimeout}, {"--awx-settle", cfg.AWXSettle},
	} {
		if d.v < 0 || (d.v > 0 && d.v < 10*time.Millisecond) {
			return bad("%s: %v must be at least 10ms", d.flag, d.v)
		}
	}
	if cfg.AWXMaxConcurrent < 0 {
		return bad("--awx-max-concurrent: %d must be at least 1", cfg.AWXMaxConcurrent)
	}
	if cfg.MaxHeldSamples < 0 {
		return bad("--max-held-samples: %d must be at least 1", cfg.MaxHeldSamples)
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	for _, d := range []struct{ flag, dir string }{{"--cgroup-root", cfg.CgroupRoot}, {"--proc-root", cfg.ProcRoot}} {
		if fi, err := os.Stat(d.dir); err != nil || !fi.IsDir() {
			return bad("%s: %q is not a directory", d.flag, d.dir)
		}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	for _, d := range []*time.Duration{&cfg.CPUInterval, &cfg.MemoryInterval, &cfg.PIDsInterval, &cfg.DiscoverInterval} {
		if *d == 0 {
			*d = cfg.PollInterval
		}
	}
	if cfg.AWXPollInterval == 0 {
		cfg.AWXPollInterval = DefaultAWXPollInterval
	}
	if cfg.AWXMaxConcurrent == 0 {
		cfg.AWXMaxConcurrent = DefaultAWXMaxConcurrent
	}
	if cfg.MaxHeldSamples == 0 {
		cfg.MaxHeldSamples = DefaultMaxHeldSamples
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.AWXSettle == 0 {
		cfg.AWXSettle = DefaultAWXSettle
	}
	if cfg.AWXPageSize < 0 || cfg.AWXPageSize > 200 {
		return bad("--awx-page-size: %d must be between 1 and 200 (AWX's largest)", cfg.AWXPageSize)
	}
	if len(cfg.Rules.Scopes) == 0 && cfg.Rules.JobIDEnv == "" {
		cfg.Rules = discover.DefaultRules()
	}
	for _, p := range cfg.CgroupParents {
		kind, top, ok := strings.Cut(p, ":")
		if !ok {
			return bad("--cgroup-parent: %q is not KIND:TOP (e.g. podman:awx.slice or kubernetes:kubelet.slice)", p)
		}
		// Rules' Scopes may be shared with the caller's: grow a copy.
		cfg.Rules.Scopes = slices.Clip(cfg.Rules.Scopes)
		if err := cfg.Rules.AddParent(discover.Kind(kind), top); err != nil {
			return bad("--cgroup-parent: %v", err)
		}
	}
	if cfg.JobTypes == nil {
		cfg.JobTypes = DefaultJobTypes()
	}
	for _, typ := range cfg.JobTypes {
		if !slices.Contains(awx.RunnerTypes, typ) {
			return bad("--job-types: %q is not an AWX job type that runs on a node; give some of %s", typ, strings.Join(awx.RunnerTypes, ","))
		}
	}
	switch cfg.PolicyFallback {
	case "":
		cfg.PolicyFallback = DefaultPolicyFallback
	case PolicyCollect, PolicyDrop:
	default:
		return bad("--policy-fallback: %q must be %s or %s", cfg.PolicyFallback, PolicyCollect, PolicyDrop)
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = DefaultSpoolDir(os.Geteuid())
	}
	return nil
}

// DefaultSpoolDir is the spool directory of an agent running as uid euid:
// /var/lib/peakline-agent/spool for root (the systemd unit's
// StateDirectory), else <user cache dir>/peakline-agent/spool.
func DefaultSpoolDir(euid int) string {
	if euid == 0 {
		return "/var/lib/peakline-agent/spool"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "peakline-agent", "spool")
	}
	return filepath.Join(os.TempDir(), "peakline-agent-spool")
}

func checkURL(s string) error {
	if s == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", s)
	}
	return nil
}
