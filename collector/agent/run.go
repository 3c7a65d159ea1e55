package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/cgroup"
	"github.com/peakline/peakline/collector/discover"
	"github.com/peakline/peakline/collector/ship"
)

// finishTimeout bounds how long Run waits for the server at exit before
// it spools what is left.
const finishTimeout = 10 * time.Second

// Run finds the AWX jobs running on the node every DiscoverInterval and
// samples each from the first scan that sees it until its cgroup (or
// process tree) is empty, attributing the samples to its tasks from the
// AWX API, and ships them to cfg.Server, until ctx ends. It returns an
// error wrapping ErrConfig for a mistake in cfg, or when the token files,
// certificates or discovery rules cannot be used; once running, it returns
// nil when ctx ends: a job that cannot be sampled is logged and skipped.
//
// Outages: while AWX does not answer, jobs are sampled and their samples
// held (at most MaxHeldSamples per job) until AWX answers and their tasks
// are known. While the server does not answer, batches queue in
// memory and then in SpoolDir, which every later run (of the agent or of
// `peakline collect` with the same --spool-dir) resends first. At exit
// each job's held samples are sent with the tasks known, the server is
// waited for up to 10s, and what it did not take is spooled.
//
// A job found at the agent's start was running before it: its samples
// from before are missing, which is logged once for the job.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.fillDefaults(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "agent")
	cfg.Logger = log

	status, _ := os.ReadFile("/proc/self/status")
	checkPrivileges(cfg.Rules.ProcessTree, status, os.Geteuid(), log)
	scanner, err := discover.NewScanner(cfg.CgroupRoot, cfg.ProcRoot, cfg.Rules)
	if err != nil {
		return fmt.Errorf("%w: discovery rules: %v", ErrConfig, err)
	}
	layout, err := cgroup.DetectAt(cfg.CgroupRoot, cfg.ProcRoot)
	if err != nil {
		log.Warn("no cgroup hierarchy; jobs are measured through their process trees only", "cgroup_root", cfg.CgroupRoot, "err", err)
		layout = nil
	}
	client, err := awx.NewClient(awx.Config{URL: cfg.AWXURL, TokenFile: cfg.AWXTokenFile, CAFile: cfg.AWXCAFile,
		PageSize: cfg.AWXPageSize, MaxInFlight: cfg.AWXMaxConcurrent, Log: log})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	httpClient, err := newHTTPClient(cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	spool, err := ship.OpenSpool(cfg.SpoolDir, time.Now)
	if err != nil {
		log.Warn("no spool; batches the server does not take stay in memory", "spool", cfg.SpoolDir, "err", err)
		spool = nil
	}
	shipper := ship.NewShipper(ship.ShipperConfig{Server: cfg.Server, HTTP: httpClient, TokenFile: cfg.Transport.TokenFile,
		Spool: spool, Logger: log})
	if n := shipper.LoadSpool(); n > 0 {
		log.Info("resending spooled batches", "batches", n)
	}
	shipCtx, shipStop := context.WithCancel(context.Background())
	defer shipStop()
	go shipper.Run(shipCtx)

	n := &node{cfg: cfg, scanner: scanner, layout: layout, awx: client, http: httpClient, send: shipper.Enqueue, log: log}
	a := newAgent(cfg, n, log)
	// Logged after the first scan: a job found later started after it.
	a.started = func() {
		log.Info("agent started", "server", cfg.Server, "awx", cfg.AWXURL, "cgroup_root", cfg.CgroupRoot,
			"proc_root", cfg.ProcRoot, "poll", cfg.PollInterval, "discover", cfg.DiscoverInterval, "spool", cfg.SpoolDir,
			"job_types", strings.Join(cfg.JobTypes, ","), "process_tree", cfg.Rules.ProcessTree, "policy_fallback", cfg.PolicyFallback)
	}
	a.run(ctx)

	unsent := shipper.Finish(shipStop, finishTimeout)
	st := shipper.Stats()
	args := []any{"sent_samples", st.SentSamples, "batches", st.SentBatches}
	if unsent > 0 {
		log.Warn("the server did not take every batch; they are spooled and the next start resends them",
			append(args, "unsent_samples", unsent, "spool", cfg.SpoolDir)...)
		return nil
	}
	log.Info("agent stopped", args...)
	return nil
}
