package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/collector/agent"
	"github.com/peakline/peakline/collector/discover"
)

// agentCommand is `peakline agent`: the per-node AWX agent.
func agentCommand(newLogger func() (*slog.Logger, error)) *cobra.Command {
	var cfg agent.Config
	rules := discover.DefaultRules()
	var scopes []string
	cmd := &cobra.Command{
		Use:   "agent --server URL --awx-url URL --awx-token-file FILE",
		Short: "Sample every AWX job running on this node and stream it to a server, task by task",
		Long: `agent runs on an AWX execution node (podman) or Kubernetes node and
samples every AWX job found running there: it scans the cgroups for job
containers (podman libpod-<id>.scope, Kubernetes cri-containerd-<id>.scope)
and, with --process-tree, /proc for the processes of jobs that have no
cgroup of their own; tells each job's AWX id from conmon's world-readable
-n ansible_runner_<id> first, else from JOB_ID or HOSTNAME in its
processes' environment where readable; asks AWX what the id is (a job of
a type --job-types leaves out, or an id AWX does not know, is dropped);
samples its CPU, memory and PIDs like collect,
attributes each sample to the task running at the time from the job's
events in the AWX API, and streams batches to the server. It reads
cgroupfs and /proc, asks AWX (read-only token), listens on nothing.

It obeys the server's collection policy as collect does: once AWX names a
job's template it asks the server (answers reused for 30s per template)
and, when the policy says no, drops the job's samples (held until then) and
leaves the job alone. When the server cannot be asked, or AWX never names
the template, the job is collected.

--scope KIND:TOP:REGEXP (repeatable) replaces the default places jobs are
looked for: KIND is podman or kubernetes, TOP a top-level cgroup (a glob),
REGEXP matches a container cgroup's name, its first group the container id.

Every flag is also an environment variable (PEAKLINE_AWX_URL for --awx-url)
and a key of the --config file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("scope") {
				rules.Scopes = rules.Scopes[:0]
				for _, s := range scopes {
					r, err := parseScope(s)
					if err != nil {
						return codedError{code: exitUsage, err: fmt.Errorf("--scope: %w", err)}
					}
					rules.Scopes = append(rules.Scopes, r)
				}
			}
			if err := checkRuleFlags(rules, scopes); err != nil {
				return codedError{code: exitUsage, err: err}
			}
			cfg.Rules = rules
			cfg.Logger = logger
			err = agent.Run(cmd.Context(), cfg)
			if errors.Is(err, agent.ErrConfig) {
				return codedError{code: exitUsage, err: err}
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return codedError{code: exitUsage, err: err} })
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", "", "base URL of the peakline serve to stream to")
	clientFlags(f, &cfg.Transport)
	f.StringVar(&cfg.AWXURL, "awx-url", "", "base URL of AWX, e.g. https://awx.example.com")
	f.StringVar(&cfg.AWXTokenFile, "awx-token-file", "", "file holding a read-only AWX OAuth2 token (read once at start)")
	f.StringVar(&cfg.AWXCAFile, "awx-ca-file", "", "PEM CA bundle trusted for AWX's certificate, in addition to the system roots")
	f.StringVar(&cfg.CgroupRoot, "cgroup-root", "/sys/fs/cgroup", "where the host's cgroup hierarchies are (e.g. /host/sys/fs/cgroup in a container)")
	f.StringVar(&cfg.ProcRoot, "proc-root", "/proc", "the host's /proc (e.g. /host/proc in a container)")
	pollFlags(f, &cfg.PollInterval, &cfg.CPUInterval, &cfg.MemoryInterval, &cfg.PIDsInterval)
	f.DurationVar(&cfg.DiscoverInterval, "discover-interval", 0, "how often to look for new jobs (default: --poll-interval)")
	f.DurationVar(&cfg.AWXPollInterval, "awx-poll-interval", agent.DefaultAWXPollInterval, "least time between two AWX requests about one job")
	f.IntVar(&cfg.AWXMaxConcurrent, "awx-max-concurrent", agent.DefaultAWXMaxConcurrent, "most AWX requests in flight at once, over all jobs")
	f.IntVar(&cfg.AWXPageSize, "awx-page-size", agent.DefaultAWXPageSize, "page_size of job event requests (AWX's largest is 200)")
	f.DurationVar(&cfg.AWXSettle, "awx-settle", agent.DefaultAWXSettle, "how long a sample waits for its task while AWX answers; while AWX is down samples wait until it answers")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", agent.DefaultDrainTimeout, "longest a finished job's events are still followed")
	f.IntVar(&cfg.MaxHeldSamples, "max-held-samples", agent.DefaultMaxHeldSamples, "most samples one job holds while its tasks are unknown")
	f.StringVar(&cfg.SpoolDir, "spool-dir", "", "where batches wait while the server is unreachable (default: /var/lib/peakline-agent/spool for root, else the user cache dir)")
	f.StringArrayVar(&scopes, "scope", nil, "KIND:TOP:REGEXP where job containers are (repeatable; default: podman machine.slice, user.slice, libpod_parent; kubernetes kubepods.slice, kubepods, kubelet.slice)")
	f.IntVar(&rules.MaxDepth, "scope-depth", rules.MaxDepth, "cgroup levels below a scope's TOP searched for containers")
	f.StringVar(&rules.JobIDEnv, "job-id-env", rules.JobIDEnv, "environment variable holding the AWX job id in a job's processes")
	f.StringVar(&rules.PodNameEnv, "pod-name-env", rules.PodNameEnv, `environment variable holding the pod name ("" to not use it)`)
	f.StringVar(&rules.PodName, "pod-name", rules.PodName, "regexp of AWX job pod names; first group = job id")
	f.StringSliceVar(&rules.Trusted, "job-process", rules.Trusted, "process names (comm) whose environment is read for the job id")
	f.StringVar(&rules.ConmonComm, "conmon-comm", rules.ConmonComm, `name of podman's conmon process ("" to not use it)`)
	f.StringVar(&rules.ConmonName, "conmon-name", rules.ConmonName, "regexp of conmon's -n container name; first group = job id")
	f.StringArrayVar(&cfg.CgroupParents, "cgroup-parent", nil, "KIND:TOP another top-level cgroup holding job containers, e.g. podman:awx.slice (podman's cgroup_parent); repeatable")
	f.StringSliceVar(&cfg.JobTypes, "job-types", agent.DefaultJobTypes(), "AWX job types to measure, of job, ad_hoc_command, project_update, inventory_update, system_job")
	f.StringVar(&cfg.PolicyFallback, "policy-fallback", agent.DefaultPolicyFallback, "what to do with a job when the server's collection policy cannot be read: collect or drop")
	f.BoolVar(&rules.ProcessTree, "process-tree", rules.ProcessTree, "also sample jobs without a cgroup of their own through their process tree (reads job processes' environment: needs the jobs' uid or CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH)")
	return cmd
}

// parseScope reads KIND:TOP:REGEXP.
func parseScope(s string) (discover.ScopeRule, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return discover.ScopeRule{}, fmt.Errorf("%q is not KIND:TOP:REGEXP (e.g. podman:machine.slice:^libpod-([0-9a-f]{64})\\.scope$)", s)
	}
	kind := discover.Kind(parts[0])
	if kind != discover.KindPodman && kind != discover.KindKubernetes {
		return discover.ScopeRule{}, fmt.Errorf("%q: kind %q must be %s or %s", s, parts[0], discover.KindPodman, discover.KindKubernetes)
	}
	return discover.ScopeRule{Kind: kind, Top: parts[1], Name: parts[2]}, nil
}

// checkRuleFlags names the flag of a discovery rule collector/discover
// refuses: each flag's value is checked alone, the other rules at their
// defaults, by discover's own check. scopeArgs are the --scope values, in
// rules.Scopes' order when --scope was given.
func checkRuleFlags(rules discover.Rules, scopeArgs []string) error {
	check := func(flag string, set func(r *discover.Rules)) error {
		r := discover.DefaultRules()
		set(&r)
		if _, err := discover.NewScanner("", "", r); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		return nil
	}
	for i, sc := range rules.Scopes {
		flag := "--scope"
		if i < len(scopeArgs) {
			flag = fmt.Sprintf("--scope %q", scopeArgs[i])
		}
		if err := check(flag, func(r *discover.Rules) { r.Scopes = []discover.ScopeRule{sc} }); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		flag string
		set  func(r *discover.Rules)
	}{
		{"--scope-depth", func(r *discover.Rules) { r.MaxDepth = rules.MaxDepth }},
		{"--job-id-env", func(r *discover.Rules) { r.JobIDEnv = rules.JobIDEnv }},
		{"--pod-name", func(r *discover.Rules) { r.PodName, r.PodNameEnv = rules.PodName, rules.PodNameEnv }},
		{"--pod-name-env", func(r *discover.Rules) { r.PodNameEnv = rules.PodNameEnv }},
		{"--job-process", func(r *discover.Rules) { r.Trusted = rules.Trusted }},
		{"--conmon-name", func(r *discover.Rules) { r.ConmonName, r.ConmonComm = rules.ConmonName, rules.ConmonComm }},
		{"--conmon-comm", func(r *discover.Rules) { r.ConmonComm = rules.ConmonComm }},
	} {
		if err := check(c.flag, c.set); err != nil {
			return err
		}
	}
	return nil
}
