// Command peakline stores the CPU, memory and PID samples of Ansible jobs
// per task and serves each job's performance graph in one request.
//
// This file only wires packages together: flags and settings in, the
// store, server, collector and bench packages do the work.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/units"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/peakline/peakline/bench"
	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/live"
	"github.com/peakline/peakline/collector/progress"
	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/query"
	"github.com/peakline/peakline/tsdb/remote"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := rootCommand(os.Stdout, os.Stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "peakline:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries an exit code out of a command (collect passes the
// command's own code through).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func rootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "peakline",
		Short:         "Per-task CPU, memory and PID graphs of Ansible jobs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	logLevel := root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().String("config", "", "settings file (YAML or JSON) whose keys are flag names; env PEAKLINE_CONFIG")
	parseLevel := func() (slog.Level, error) {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
			return 0, usageError("--log-level: must be debug, info, warn or error, got %q", *logLevel)
		}
		return lvl, nil
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := applySettings(cmd, os.LookupEnv); err != nil {
			return asUsage(err)
		}
		_, err := parseLevel() // in every command, whether it logs or not
		return err
	}
	newLogger := func() (*slog.Logger, error) {
		lvl, err := parseLevel()
		if err != nil {
			return nil, err
		}
		return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})), nil
	}
	root.AddCommand(serveCommand(newLogger), importCommand(newLogger), collectCommand(newLogger), queryCommand())
	root.AddCommand(bench.Command())
	root.AddCommand(regressionsCommand())
	root.AddCommand(rightsizeCommand())
	root.AddCommand(agentCommand(newLogger))
	root.AddCommand(docsCommand())
	root.AddCommand(versionCommand())
	// cobra adds completion at Execute; added now, it is walked too, so
	// that `peakline completion nosuch` is a usage error like any other.
	root.InitDefaultCompletionCmd()
	usageExits(root)
	return root
}

func serveCommand(newLogger func() (*slog.Logger, error)) *cobra.Command {
	var (
		dataDir, listen, eventsURL string
		retention                  time.Duration
		maxFutureSkew              time.Duration
		cfg                        server.Config
		edge                       server.Edge
		rem                        tsdb.Remote
		remoteCacheTTL             time.Duration
		remoteHeaders              []string
		minFreeDisk                = byteSize(tsdb.DefaultMinFreeDisk)
	)
	cmd := &cobra.Command{
		Use:   "serve --data DIR | --remote-write-url URL --remote-query-url BASE --settings FILE",
		Short: "Serve the graph API, ingest and web page over a store",
		Long: `serve answers the HTTP API, JSON ingest, Prometheus remote write and
query API, and the web page, over either an embedded store (--data DIR) or,
stateless, a Prometheus-compatible engine (--remote-write-url and
--remote-query-url, with --settings a file every replica shares; the
engine's retention applies and --retention is refused).

Every flag is also an environment variable (PEAKLINE_LISTEN for --listen)
and a key of the --config file (listen: 127.0.0.1:8080).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger()
			if err != nil {
				return err
			}
			if err := server.CheckEventsURL(eventsURL); err != nil {
				return usageError("--events-url: %w", err)
			}
			if !(cfg.RegressionFactor >= 1) || math.IsInf(cfg.RegressionFactor, 0) {
				return usageError("--regression-factor: must be a number >= 1, got %v", cfg.RegressionFactor)
			}
			if retention < 0 {
				return usageError("--retention: must not be negative, got %s", retention)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			if maxFutureSkew <= 0 {
				return usageError("--max-future-skew: must be positive, got %s", maxFutureSkew)
			}
			// Listen address, credentials and TLS are checked before the
			// store is opened: a refusal to start touches no data.
			wrapListener, err := edge.Apply(cmd.Context(), listen, &cfg.Security, logger)
			if err != nil {
				return asUsage(err) // the flags' files: auth, certificates
			}
			cfg.EventsURL = eventsURL
			if err := server.CheckAWXUIURL(cfg.AWXUIURL); err != nil {
				return usageError("--awx-ui-url: %w", err)
			}
			if minFreeDisk < 0 {
				return usageError("--min-free-disk: must not be negative (0 turns the rule off), got %d", minFreeDisk)
			}
			if (rem.WriteURL != "" || rem.QueryURL != "") && cmd.Flags().Changed("min-free-disk") {
				return usageError("--min-free-disk: only with --data (a remote engine keeps its own disk)")
			}
			storeMinFree := int64(minFreeDisk)
			if storeMinFree == 0 {
				storeMinFree = -1 // tsdb.Options: negative turns the rule off, zero is the default
			}
			if rem.WriteURL == "" && rem.QueryURL == "" {
				for _, name := range []string{"remote-cache-ttl", "remote-timeout", "remote-header", "remote-memory-budget"} {
					if cmd.Flags().Changed(name) {
						return usageError("--%s: only with --remote-write-url and --remote-query-url (a remote engine)", name)
					}
				}
			}
			if remoteCacheTTL <= 0 {
				// A cache of a remote store without a bound would serve
				// one replica's view of a job for good.
				return usageError("--remote-cache-ttl: must be positive (1ms reads the engine nearly every time), got %s", remoteCacheTTL)
			}
			if rem.Timeout <= 0 {
				return usageError("--remote-timeout: must be positive, got %s", rem.Timeout)
			}
			if rem.MemoryBudget < 1<<20 {
				return usageError("--remote-memory-budget: must be at least 1048576 (1 MiB), got %d", rem.MemoryBudget)
			}
			if rem.Header, err = parseHeaders(remoteHeaders); err != nil {
				return err
			}
			srv, err := server.Open(server.Setup{DataDir: dataDir, Remote: rem, Config: cfg,
				Store: tsdb.Options{Retention: retention, MaxFutureSkew: maxFutureSkew, CacheTTL: remoteCacheTTL, MinFreeDisk: storeMinFree}}, logger, reg)
			if err != nil {
				return err
			}
			defer func() {
				if err := srv.Close(); err != nil {
					logger.Error("close store", "err", err)
				}
			}()
			store := srv.Store()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			ln, scheme := wrapListener(ln)
			base := scheme + "://" + ln.Addr().String()
			logger.Info("serving", "url", base+"/", "data", dataDir, "remote_query_url", rem.QueryURL)
			fmt.Fprintf(cmd.OutOrStdout(), "peakline: serving on %s/ (jobs: %s/api/v1/jobs)\n", base, base)
			if ids, err := store.JobIDs(cmd.Context()); err == nil {
				const shown = 10 // a store of many jobs is listed by the page, not here
				for _, id := range ids[:min(len(ids), shown)] {
					fmt.Fprintf(cmd.OutOrStdout(), "peakline: job %s: %s/jobs/%s (graph data: %s/api/v1/jobs/%s/graph)\n", id, base, url.PathEscape(id), base, url.PathEscape(id))
				}
				if len(ids) > shown {
					fmt.Fprintf(cmd.OutOrStdout(), "peakline: and %d more jobs: %s/\n", len(ids)-shown, base)
				}
			}
			return srv.Serve(cmd.Context(), ln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "", "store directory (created if missing)")
	f.StringVar(&rem.WriteURL, "remote-write-url", "", "instead of --data: remote write URL of a Prometheus-compatible engine (e.g. http://vminsert:8480/insert/0/prometheus/api/v1/write)")
	f.StringVar(&rem.QueryURL, "remote-query-url", "", "instead of --data: base of the engine's Prometheus API, /api/v1/query etc. appended (e.g. http://vmselect:8481/select/0/prometheus)")
	f.DurationVar(&remoteCacheTTL, "remote-cache-ttl", tsdb.DefaultRemoteCacheTTL, "with --remote-query-url: longest a replica serves a job, summary or span from its cache (other replicas' writes show after at most this)")
	f.DurationVar(&rem.Timeout, "remote-timeout", remote.DefaultRequestTimeout, "with --remote-query-url: longest one request to the engine may take; a slower engine's answer is a 503 with Retry-After")
	f.Int64Var(&rem.MemoryBudget, "remote-memory-budget", remote.DefaultMemoryBudget, "with --remote-query-url: bytes that all reads of the engine may decode and hold at once; a read beyond is a 503 with Retry-After, an answer past it alone a 502")
	f.StringArrayVar(&remoteHeaders, "remote-header", nil, "with --remote-write-url: a header sent with every request to the engine, e.g. 'X-Scope-OrgID: peakline' (repeat for more)")
	f.StringVar(&cfg.SettingsPath, "settings", "", "collection policy file (default DATA/settings.json; required with --remote-write-url: a file every replica shares)")
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&eventsURL, "events-url", "", "job-events link template with {job_id}, {counter_gte}, {counter_lte}")
	f.StringVar(&cfg.AWXUIURL, "awx-ui-url", "", "base URL of the AWX web UI (https://awx.example): event links of AWX jobs open their output page, URL/#/jobs/playbook/{id}/output, instead of --events-url's API search")
	f.DurationVar(&retention, "retention", 0, "delete jobs whose newest sample is older than this, measured against the wall clock (0 keeps everything)")
	f.Var(&minFreeDisk, "min-free-disk", "with --data: refuse writes (507 with Retry-After) while the data dir's file system has less free space than this, e.g. 128MiB or 1GB; 0 turns the rule off")
	f.DurationVar(&maxFutureSkew, "max-future-skew", tsdb.DefaultMaxFutureSkew, "refuse samples further ahead of the server's clock than this")
	f.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body accepted, as sent")
	f.Int64Var(&cfg.MaxDecodedBytes, "max-decoded-bytes", server.DefaultMaxDecodedBytes, "largest request body accepted after decompression (times --max-concurrent-ingest bounds ingest memory)")
	f.IntVar(&cfg.MaxBatchSamples, "max-batch-samples", server.DefaultMaxBatchSamples, "most samples accepted in one ingest batch")
	f.IntVar(&cfg.MaxBatchSeries, "max-batch-series", server.DefaultMaxBatchSeries, "most series accepted in one JSON ingest batch")
	f.IntVar(&cfg.MaxBatchTasks, "max-batch-tasks", server.DefaultMaxBatchTasks, "most tasks accepted in one JSON ingest batch")
	f.Float64Var(&cfg.RegressionFactor, "regression-factor", server.DefaultRegressionFactor, "template history: flag a task's value when it is at least this many times the median of the other runs (and beyond their spread and the metric's floor)")
	f.IntVar(&cfg.MaxConcurrentIngest, "max-concurrent-ingest", server.DefaultMaxConcurrentIngest, "ingest requests (JSON and remote write) decoded and stored at once, each once its body is in; more get 429 with Retry-After")
	f.Int64Var(&cfg.MaxReadBytes, "max-read-bytes", server.DefaultMaxReadBytes, "memory the heavy reads (template history, a job's graph and tasks, the jobs list) may hold at once, by the estimate each reserves before it starts; past it 429 with Retry-After")
	f.DurationVar(&cfg.BodyReadTimeout, "ingest-body-timeout", server.DefaultBodyReadTimeout, "longest an ingest body may take to arrive after its headers; a slower one gets 408")
	f.Int64Var(&cfg.MaxBodyBytesInFlight, "max-body-bytes-in-flight", server.DefaultMaxBodyBytesInFlight, "bytes of ingest bodies held at once, being received or served, whatever the number of clients (at least --max-body-bytes); past it 429 with Retry-After")
	f.DurationVar(&cfg.Prometheus.QueryTimeout, "query-timeout", query.DefaultTimeout, "Prometheus API: longest evaluation of one query")
	f.IntVar(&cfg.Prometheus.QueryMaxSamples, "query-max-samples", query.DefaultMaxSamples, "Prometheus API: most samples one query may hold in memory")
	f.IntVar(&cfg.Prometheus.QueryMaxConcurrency, "query-max-concurrency", query.DefaultMaxConcurrency, "Prometheus API: queries evaluated at once; more wait")
	f.IntVar(&cfg.Prometheus.QueryMaxPoints, "query-max-points", query.DefaultMaxPoints, "Prometheus API: most steps the subqueries of one query evaluate together; more is refused before evaluation")
	f.IntVar(&cfg.Prometheus.QueryMaxLength, "query-max-length", query.DefaultMaxQueryLength, "Prometheus API: longest query text in bytes")
	f.DurationVar(&cfg.Prometheus.LookbackDelta, "query-lookback-delta", query.DefaultLookbackDelta, "Prometheus API: how far back an instant selector looks")
	f.DurationVar(&cfg.Prometheus.RollupWindow, "query-rollup-window", query.DefaultRollupWindow, "Prometheus API: window of rate(x) written without one in an instant query")
	f.StringVar(&edge.AuthFile, "auth-file", "", "YAML file of tokens and users with scopes (read, ingest, admin); reloaded on change and on SIGHUP")
	f.BoolVar(&edge.InsecureNoAuth, "insecure-no-auth", false, "serve a non-loopback --listen without authentication (anyone who can connect may read, write and delete)")
	f.StringVar(&edge.TLS.CertFile, "tls-cert-file", "", "PEM certificate chain: serve HTTPS (reloaded when it changes)")
	f.StringVar(&edge.TLS.KeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	f.StringVar(&edge.TLS.ClientCAFile, "tls-client-ca-file", "", "PEM CA certificates: require client certificates signed by them (mutual TLS)")
	f.StringSliceVar(&edge.AllowedHosts, "allowed-hosts", nil, `Host header names served ("*" for any; default: the --listen host, localhost, 127.0.0.1, ::1 and the certificate's names; every local name and address when listening on all interfaces)`)
	f.DurationVar(&edge.AuthPoll, "auth-file-poll", server.DefaultAuthPoll, "how often --auth-file is checked for changes")
	f.IntVar(&cfg.Security.MaxTemplates, "max-templates", server.DefaultMaxTemplates, "most job templates with their own collection setting")
	return cmd
}

func importCommand(newLogger func() (*slog.Logger, error)) *cobra.Command {
	var dataDir, serverURL, jobID, templateID, templateName string
	var tc ship.TransportConfig
	var awxCfg awx.Config
	var keep string
	var force bool
	var maxFileBytes int64
	cmd := &cobra.Command{
		Use:   "import [--data DIR | --server URL] [--job ID] [--template ID] [--template-name NAME] [--awx-url URL --awx-token-file FILE] PATH... | import --awx-url URL --awx-token-file FILE --job N [--data DIR | --server URL]",
		Short: "Import ansible-runner, cgroup_perf_recap or AWX profiling trees",
		Long: `Import reads each PATH, which may be:
  - an ansible-runner private data dir (artifacts/<ident>/job_events + profiling_data/),
  - a cgroup_perf_recap output dir (cpu.csv, memory.csv, pids.csv or per-task files),
  - an AWX playbook_profiling/<job_id>/ dir,
and stores its jobs, either directly in a store (--data, server stopped) or
by posting ingest batches to a running server (--server). Importing the
same tree twice stores nothing twice.

Every tree is read whole before anything is stored. Import reads regular
files only, each of at most --max-file-size bytes, and within the tree
(symbolic links leading out of it are refused): a named pipe, a device, a
socket, a larger file or such a link fails the import at once, naming the
file, and nothing is stored.

A runner dir's env/extravars (as AWX writes them: awx_job_id,
awx_job_template_id, awx_job_template_name, or tower_*) give the job its
template, and its id when awx_job_id is there; artifacts/<ident>/status
its status. --job, --template and --template-name override them.

With --awx-url (and --awx-token-file, a read-only AWX token), --job is the
AWX job id: the job's events and metadata are read from the AWX API and
attribute the samples of PATH (cgroup_perf_recap files, profiling data, a
runner tree without job_events) to its tasks; the job gets the template,
status and playbook AWX names, and a progress bar shows the events read
(AWX gives 200 a request). AWX's events win: a runner tree's own
job_events are not read (a warning names them), so give one PATH, the
samples of that AWX job; samples none of which lie within the span of its
events are stored with a warning (is --job the job that made them?). A
job AWX does not call finished, or whose events AWX has not all saved yet
(event_processing_finished), is imported with the events it has so far,
with a warning: import it again later to complete it.

With --awx-url and --job but no PATH, import re-attributes the job's
samples already stored in Peakline (a peakline agent that could not read
the job's events from AWX stored them with counter 0) to the task starts
of AWX's events, and gives the job AWX's template, status and playbook
(how it was measured stays). It reads every stored sample (--server: with
the client's token, through the Prometheus query API), writes the
re-attributed job to a local file first (--keep FILE, default the user
cache dir; a PATH this command reads back) and prints its path and what
changed, then deletes the stored job (--server: a token with the admin
scope) and stores the re-attributed one, and checks that every sample is
stored again with the same time and value. Should anything fail after the
delete, the message says how to store the kept file. A job Peakline holds
no samples of is refused, and so are samples none of which lie within the
span of AWX's events, unless --force.

A regular-file PATH is read as JSON ingest batches of one job, one a line
(such a kept file).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, paths []string) error {
			logger, err := newLogger()
			if err != nil {
				return err
			}
			// The store's own progress lines are noise for a one-shot
			// import: show its warnings only unless asked for debug.
			if !logger.Enabled(cmd.Context(), slog.LevelDebug) {
				logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			}
			if (dataDir == "") == (serverURL == "") {
				return usageError("--data or --server: give exactly one of them")
			}
			if len(paths) == 0 && (awxCfg.URL == "" || jobID == "") {
				return usageError("requires at least 1 arg(s), only received 0: give the PATH to import, or --awx-url with --job and no PATH to re-attribute a job already stored")
			}
			if maxFileBytes <= 0 {
				return usageError("--max-file-size: must be a positive number of bytes, got %d", maxFileBytes)
			}
			if (keep != "" || force) && len(paths) > 0 {
				return usageError("--keep and --force: only with --awx-url and no PATH (re-attributing a stored job)")
			}
			var tr *ship.Transport // read the token before the trees: fail fast
			if serverURL != "" {
				if tr, err = ship.NewTransport(tc, serverURL, logger); err != nil {
					return asUsage(err) // the token and certificate files
				}
			}
			if awxCfg.URL != "" && len(paths) == 0 {
				return reattributeStored(cmd.Context(), reattrOptions{dataDir: dataDir, serverURL: serverURL, tokenFile: tc.TokenFile, transport: tr, awx: awxCfg,
					reattr: awx.ReattrOptions{JobFlag: jobID, TemplateID: templateID, TemplateName: templateName, Keep: keep, Force: force}},
					cmd.OutOrStdout(), cmd.ErrOrStderr(), logger)
			}
			opts := ansible.ReadOptions{JobID: jobID, TemplateID: templateID, TemplateName: templateName}
			var fromAWX *awx.ImportedJob // the events and metadata of --awx-url, read before the trees
			if awxCfg.URL != "" {
				if fromAWX, err = fetchAWXJob(cmd.Context(), awxCfg, jobID, paths, cmd.ErrOrStderr(), logger); err != nil {
					return err
				}
				opts.Events = fromAWX.Events
				opts.JobID = awx.JobID(fromAWX.ID) // --job 042 is AWX job 42
			} else if awxCfg.TokenFile != "" || awxCfg.CAFile != "" {
				return usageError("--awx-url: --awx-token-file and --awx-ca-file need the AWX URL to read the job from")
			}
			opts.MaxFileBytes = maxFileBytes
			jobs, err := readJobs(cmd.ErrOrStderr(), paths, opts)
			if errors.Is(err, ansible.ErrTooLarge) {
				return fmt.Errorf("%w; raise --max-file-size (now %d bytes) to import it", err, maxFileBytes)
			}
			if err != nil {
				return err
			}
			if fromAWX != nil {
				for _, j := range jobs {
					fromAWX.SetInfo(j, templateID != "", templateName != "")
					if msg := fromAWX.SpanMessage(j); msg != "" {
						logger.Warn(msg, "job", j.ID)
					}
				}
			}
			var sink func(context.Context, *ansible.Job) (tsdb.AppendResult, error)
			if dataDir != "" {
				srv, err := server.Open(server.Setup{DataDir: dataDir}, logger, nil)
				if err != nil {
					return fmt.Errorf("%w (is a peakline serve using it? then import with --server)", err)
				}
				defer srv.Close()
				sink = func(ctx context.Context, j *ansible.Job) (tsdb.AppendResult, error) {
					return ingestJob(ctx, srv, j) // the batches --server would post, through the same ingest
				}
			} else {
				client := &ship.Client{BaseURL: strings.TrimRight(serverURL, "/"), HTTP: &http.Client{Transport: tr}, TokenFile: tc.TokenFile}
				sink = func(ctx context.Context, j *ansible.Job) (tsdb.AppendResult, error) {
					batches := ship.Batches(j, 0)
					bar := newBar(cmd.ErrOrStderr(), len(batches), "posting "+j.ID, "batches")
					defer bar.Finish()
					for i := range batches {
						retrying := func(err error, wait time.Duration) {
							logger.Warn("import: server asks to retry", "job", j.ID, "batch", i+1, "wait", wait, "err", err)
						}
						if err := client.SendPatiently(ctx, &batches[i], 5*time.Minute, retrying); err != nil {
							var ae *ship.AuthError
							if errors.As(err, &ae) {
								return tsdb.AppendResult{}, ae // says all: no batch is taken with this token
							}
							return tsdb.AppendResult{}, fmt.Errorf("--server: batch %d of %d: %w", i+1, len(batches), err)
						}
						bar.Add(1)
					}
					return tsdb.AppendResult{Samples: -1}, nil
				}
			}
			for _, j := range jobs {
				res, err := sink(cmd.Context(), j)
				if err != nil {
					return fmt.Errorf("store job %q: %w", j.ID, err)
				}
				report(cmd.OutOrStdout(), j, res)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "", "store directory to write directly (the server must be stopped)")
	f.StringVar(&serverURL, "server", "", "base URL of a running peakline serve to post batches to")
	f.StringVar(&jobID, "job", "", "job id to store under (default: awx_job_id of env/extravars, else the runner ident, recap or AWX dir name)")
	f.StringVar(&templateID, "template", "", "job template id of the jobs (default: awx_job_template_id of env/extravars)")
	f.StringVar(&templateName, "template-name", "", "job template name of the jobs (default: awx_job_template_name of env/extravars)")
	clientFlags(f, &tc)
	awxFlags(f, &awxCfg)
	f.StringVar(&keep, "keep", "", "with --awx-url and no PATH: file to keep the re-attributed job in before the stored one is replaced (default: a new file in the user cache dir)")
	f.BoolVar(&force, "force", false, "with --awx-url and no PATH: re-attribute even when no stored sample lies within the span of AWX's events")
	f.Int64Var(&maxFileBytes, "max-file-size", ansible.DefaultMaxFileBytes, "largest file, in bytes, import reads: a larger one fails the import, naming it")
	return cmd
}

// readJobs reads every path before anything is stored, with a progress
// bar over the files.
func readJobs(stderr io.Writer, paths []string, opts ansible.ReadOptions) ([]*ansible.Job, error) {
	if opts.JobID != "" && len(paths) > 1 {
		return nil, usageError("--job: names one job, but several paths were given")
	}
	// Every path is checked before any is read: a stray file among
	// them (a README beside the runs of a glob) fails the import at once.
	for _, p := range paths {
		if err := checkImportPath(p); err != nil {
			return nil, err
		}
	}
	var all []*ansible.Job
	for _, p := range paths {
		if j, ok, err := awx.ReadKeptJob(p, opts.MaxFileBytes); ok || err != nil {
			if err != nil {
				return nil, err
			}
			all = append(all, j)
			continue
		}
		var bar *progress.Bar
		opts.Progress = func(done, total int) {
			if bar == nil {
				bar = newBar(stderr, total, "reading "+p, "files")
			}
			bar.Set(done)
		}
		jobs, err := ansible.Read(p, opts)
		if bar != nil {
			bar.Finish()
		}
		if err != nil {
			return nil, err
		}
		all = append(all, jobs...)
	}
	return all, nil
}

// checkImportPath tells whether import can read path: a tree of one of
// ansible.Read's layouts, or a regular file of JSON ingest batches (a kept
// file), which starts with '{'.
func checkImportPath(path string) error {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return ansible.CheckTree(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 512)
	n, _ := f.Read(b)
	if first := bytes.TrimLeft(b[:n], " \t\r\n"); len(first) == 0 || first[0] != '{' {
		return fmt.Errorf("cannot import %q: it is a file, not an ansible-runner, cgroup_perf_recap or AWX profiling tree (a directory) nor a file of JSON ingest batches; nothing was imported", path)
	}
	return nil
}

// newBar reports the progress of a long operation over total units on
// stderr: a bar on a terminal, plain lines elsewhere (package progress).
func newBar(w io.Writer, total int, what, unit string) *progress.Bar {
	return progress.New(w, total, what, progress.Options{Unit: unit})
}

// parseHeaders reads --remote-header values, "Name: value" each.
func parseHeaders(vals []string) (http.Header, error) {
	h := http.Header{}
	for _, v := range vals {
		name, val, ok := strings.Cut(v, ":")
		if name = strings.TrimSpace(name); !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, usageError("--remote-header: must be 'Name: value', got %q", v)
		}
		h.Add(name, strings.TrimSpace(val))
	}
	return h, nil
}

// ingestJob stores a job read from disk as the ingest batches import
// --server would post, through the server's own ingest (server.Ingest).
func ingestJob(ctx context.Context, srv *server.Server, j *ansible.Job) (tsdb.AppendResult, error) {
	var sum tsdb.AppendResult
	for i, b := range ship.Batches(j, srv.MaxBatchSamples()) {
		body, err := json.Marshal(&b)
		if err != nil {
			return sum, fmt.Errorf("encode batch %d: %w", i+1, err)
		}
		res, err := srv.Ingest(ctx, bytes.NewReader(body))
		if err != nil {
			return sum, err
		}
		sum.Samples += res.Samples
		sum.Tasks += res.Tasks
		sum.Duplicates += res.Duplicates
		sum.Conflicts += res.Conflicts
	}
	return sum, nil
}

// report prints what an import stored for one job.
func report(w io.Writer, j *ansible.Job, res tsdb.AppendResult) {
	perResource := map[string]int{}
	first, last := int64(0), int64(0)
	for _, s := range j.Series {
		perResource[s.Resource] += len(s.Ts)
		if len(s.Ts) == 0 {
			continue
		}
		if first == 0 || s.Ts[0] < first {
			first = s.Ts[0]
		}
		last = max(last, s.Ts[len(s.Ts)-1])
	}
	span := "no samples"
	if first != 0 {
		span = fmt.Sprintf("%s .. %s (%s)", time.UnixMilli(first).UTC().Format(time.RFC3339Nano), time.UnixMilli(last).UTC().Format(time.RFC3339Nano), time.Duration(last-first)*time.Millisecond)
	}
	stored := "posted to the server"
	if res.Samples >= 0 {
		stored = fmt.Sprintf("stored %d new samples, %d already present", res.Samples, res.Duplicates)
	}
	fmt.Fprintf(w, "job %s (%s): %d tasks; samples cpu=%d memory=%d pids=%d; %s; %s\n",
		j.ID, j.Source, len(j.Tasks), perResource["cpu"], perResource["memory"], perResource["pids"], span, stored)
}

func collectCommand(newLogger func() (*slog.Logger, error)) *cobra.Command {
	var cfg live.LiveConfig
	cmd := &cobra.Command{
		Use:   "collect --server URL [--job ID] [--template ID] [--template-name NAME] -- COMMAND ARGS... | collect --attach CGROUP --job ID",
		Short: "Sample a command's (or an existing) cgroup and stream it to a server, task by task",
		Long: `collect runs COMMAND in a fresh cgroup (v2 where the controllers are
available, else the v1 cpuacct, memory and pids controllers), samples its CPU,
memory and PIDs, attributes each sample to the running task by following the
job events (ansible-runner's job_events; for ansible-playbook, those
Peakline's own callback plugin writes), and streams batches to the server.
It prints the job's page URL once the job id is known, and a warning when no
job event arrived, so that no task is attributed. It exits with
the command's exit code; a collector problem never fails the command. With
--attach it samples an existing cgroup until it is empty or interrupted.

Every flag is also an environment variable (PEAKLINE_POLL_INTERVAL for
--poll-interval) and a key of the --config file (poll-interval: 250ms).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := newLogger()
			if err != nil {
				return err
			}
			if cfg.Server == "" {
				return usageError("--server: the URL of a peakline serve is required")
			}
			if cfg.Attach == "" && len(args) == 0 {
				return usageError("give a command after --, or --attach CGROUP_PATH")
			}
			if cfg.Attach != "" && len(args) > 0 {
				return usageError("--attach: samples an existing cgroup; drop the command after --")
			}
			if cfg.Attach != "" && cfg.JobID == "" {
				return usageError("--job: is required with --attach")
			}
			if cfg.MemoryLimitBytes < 0 || cfg.MemoryLimitBytes > 0 && cfg.Attach != "" {
				return errors.New("--memory-limit: must be a positive size for a command collect runs (an attached cgroup keeps its own)")
			}
			cfg.Command = args
			cfg.Stdin, cfg.Stdout, cfg.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			cfg.Logger = logger
			cfg.Notices = cmd.ErrOrStderr()
			code, err := live.Collect(cmd.Context(), cfg)
			if err != nil {
				logger.Warn("collector", "err", err)
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", "", "base URL of the peakline serve to stream to")
	f.StringVar(&cfg.JobID, "job", "", "job id (default: the runner ident, else host-time-pid)")
	f.StringVar(&cfg.Template, "template", "", "job template id, for the server's collection policy and sent with the job")
	f.StringVar(&cfg.TemplateName, "template-name", "", "job template name, sent with the job")
	f.StringVar(&cfg.EventsDir, "events", "", "job_events directory to follow (found by itself for ansible-runner run)")
	f.StringVar(&cfg.Ident, "ident", "", "ansible-runner ident whose artifacts to follow")
	f.StringVar(&cfg.Attach, "attach", "", "sample this existing cgroup instead of running a command")
	f.StringVar(&cfg.SpoolDir, "spool-dir", "", "where batches wait while the server is unreachable (default: user cache dir)")
	pollFlags(f, &cfg.PollInterval, &cfg.CPUInterval, &cfg.MemoryInterval, &cfg.PIDsInterval)
	f.IntVar(&cfg.MaxQueueSamples, "max-queue-samples", live.DefaultMaxQueueSamples, "samples held in memory before batches spool to disk")
	f.Var((*byteSize)(&cfg.MemoryLimitBytes), "memory-limit", "limit the command's cgroup to this much memory (e.g. 256MiB), as a container group's pod limit: it is OOM-killed past it (default: no limit of its own)")
	clientFlags(f, &cfg.Transport)
	return cmd
}

// clientFlags adds the credential and trust flags of a client of --server.
func clientFlags(f *pflag.FlagSet, tc *ship.TransportConfig) {
	f.StringVar(&tc.TokenFile, "token-file", "", "file holding the bearer token for --server (read once at start; keep it mode 600)")
	f.StringVar(&tc.CAFile, "ca-file", "", "PEM CA bundle trusted for --server's certificate, in addition to the system roots")
	f.StringVar(&tc.CertFile, "cert-file", "", "PEM client certificate for mutual TLS with --server (with --key-file)")
	f.StringVar(&tc.KeyFile, "key-file", "", "PEM private key of --cert-file")
}

// pollFlags adds the sampling interval flags, the same for collect and
// agent: --poll-interval and a per-resource interval defaulting to it.
func pollFlags(f *pflag.FlagSet, poll, cpu, memory, pids *time.Duration) {
	f.DurationVar(poll, "poll-interval", live.DefaultPollInterval, "sampling interval")
	f.DurationVar(cpu, "cpu-poll-interval", 0, "CPU sampling interval (default: --poll-interval)")
	f.DurationVar(memory, "memory-poll-interval", 0, "memory sampling interval (default: --poll-interval)")
	f.DurationVar(pids, "pid-poll-interval", 0, "PID sampling interval (default: --poll-interval)")
}

// applySettings fills every flag the command line did not set from the
// environment (PEAKLINE_ + the flag name in upper snake case), then from
// the --config file (keys are flag names). Explicit flags win.
func applySettings(cmd *cobra.Command, lookupEnv func(string) (string, bool)) error {
	envName := func(flag string) string {
		return "PEAKLINE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	}
	path, _ := cmd.Flags().GetString("config")
	if !cmd.Flags().Changed("config") {
		if v, ok := lookupEnv(envName("config")); ok {
			path = v
		}
	}
	file := map[string]any{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		if err := yaml.Unmarshal(b, &file); err != nil {
			return fmt.Errorf("--config: %s is not a YAML or JSON map of flag names to values: %w", path, err)
		}
	}
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "config" || f.Name == "help" {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
			return
		}
		if v, ok := file[f.Name]; ok {
			if err := f.Value.Set(fmt.Sprint(v)); err != nil {
				errs = append(errs, fmt.Errorf("--config %s: key %s: %w", path, f.Name, err))
			}
			delete(file, f.Name)
		}
	})
	for key := range file {
		if cmd.Flags().Lookup(key) == nil {
			errs = append(errs, fmt.Errorf("--config %s: unknown key %q (keys are the flag names of %q)", path, key, cmd.CommandPath()))
		}
	}
	return errors.Join(errs...)
}

func queryCommand() *cobra.Command {
	var (
		dataDir, serverURL, at, start, end string
		step                               time.Duration
		explain                            bool
		tc                                 ship.TransportConfig
	)
	cmd := &cobra.Command{
		Use:   "query [--data DIR | --server URL] [--time T | --start T --end T --step D] EXPR",
		Short: "Evaluate a MetricsQL/PromQL query over a store or a server",
		Long: `query evaluates EXPR (MetricsQL, a superset of PromQL) at --time, or at
every --step from --start to --end, over a store directory (--data; the server
must be stopped) or a running server (--server, through its Prometheus API).
Times are RFC 3339 or unix seconds; --time defaults to now. Answers print
the same from both, times in UTC to the millisecond; when no series
matched, query says so on stderr and prints nothing.`,
		Example: `  peakline query --data data --time 2026-11-30T03:39:40Z 'max by (task) (peakline_memory_bytes{job_id="demo2"})'
  peakline query --server http://127.0.0.1:8080 --start 2026-11-30T03:39:35Z --end 2026-11-30T03:39:42Z --step 1s 'peakline_cpu_percent'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (dataDir == "") == (serverURL == "") {
				return usageError("--data or --server: give exactly one of them")
			}
			isRange := start != "" || end != ""
			if isRange && (start == "" || end == "" || step <= 0) {
				return usageError("--start, --end and --step: a range query needs all three (--step > 0)")
			}
			if isRange && at != "" {
				return usageError("--time: give either --time or --start/--end/--step")
			}
			var tStart, tEnd, tAt time.Time
			var err error
			if isRange {
				if tStart, err = parseTime("--start", start); err != nil {
					return err
				}
				if tEnd, err = parseTime("--end", end); err != nil {
					return err
				}
			} else if tAt, err = parseTime("--time", at); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if serverURL != "" {
				logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
				tr, err := ship.NewTransport(tc, serverURL, logger)
				if err != nil {
					return asUsage(err) // the token and certificate files
				}
				client, err := promapi.NewClient(promapi.Config{Address: strings.TrimRight(serverURL, "/") + "/prometheus", Client: &http.Client{Transport: tr}})
				if err != nil {
					return usageError("--server: %w", err)
				}
				api := promv1.NewAPI(client)
				var v model.Value
				var warnings promv1.Warnings
				if isRange {
					v, warnings, _, err = api.QueryRange(cmd.Context(), args[0], promv1.Range{Start: tStart, End: tEnd, Step: step})
				} else {
					v, warnings, _, err = api.Query(cmd.Context(), args[0], tAt)
				}
				if ae := tr.Refusal(); err != nil && ae != nil {
					return ae
				}
				if err != nil {
					return err
				}
				for _, w := range warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
				}
				return printQuery(out, cmd.ErrOrStderr(), queryOutOfModel(v), args[0])
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			store, err := tsdb.Open(dataDir, tsdb.Options{}, logger, nil)
			if err != nil {
				return fmt.Errorf("--data: %w (is a peakline serve using it? then query with --server)", err)
			}
			defer store.Close()
			engine := query.New(store.Queryable(), query.Options{})
			if explain {
				promQL, err := engine.Translate(cmd.Context(), args[0], tStart, tEnd, step)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "promql:", promQL)
			}
			var res *query.Result
			if isRange {
				res, err = engine.Range(cmd.Context(), args[0], tStart, tEnd, step)
			} else {
				res, err = engine.Instant(cmd.Context(), args[0], tAt)
			}
			if err != nil {
				return err
			}
			defer res.Close()
			for _, w := range res.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return printQuery(out, cmd.ErrOrStderr(), queryOutOfPromQL(res.Value), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "", "store directory to query (the server must be stopped)")
	f.StringVar(&serverURL, "server", "", "base URL of a running peakline serve")
	f.StringVar(&at, "time", "", "evaluation time of an instant query (default now)")
	f.StringVar(&start, "start", "", "start of a range query")
	f.StringVar(&end, "end", "", "end of a range query")
	f.DurationVar(&step, "step", 0, "step of a range query")
	f.BoolVar(&explain, "explain", false, "print the PromQL the engine runs (with --data)")
	clientFlags(f, &tc)
	return cmd
}

// parseTime reads RFC 3339 or unix seconds; "" is now.
func parseTime(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.UnixMilli(int64(math.Round(f * 1000))), nil
	}
	return time.Time{}, usageError("%s: must be RFC 3339 (2026-11-30T03:39:40Z) or unix seconds, got %q", flag, s)
}

// byteSize is a flag of bytes: a number, or one with a unit (128MiB,
// 1GB: KiB and KB are 1024 and 1000).
type byteSize int64

func (b *byteSize) String() string { return units.Base2Bytes(*b).String() }
func (b *byteSize) Type() string   { return "bytes" }

func (b *byteSize) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*b = byteSize(n)
		return nil
	}
	n, err := units.ParseStrictBytes(s)
	if err != nil {
		return fmt.Errorf("want bytes, as a number or with a unit (128MiB, 1GB), got %q", s)
	}
	*b = byteSize(n)
	return nil
}
