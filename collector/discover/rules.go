package discover

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Kind says how a job was found and what its cgroup is.
type Kind string

const (
	// KindPodman is a job in a podman container (an AWX execution node).
	KindPodman Kind = "podman"
	// KindKubernetes is a job in a Kubernetes pod (an AWX container group).
	KindKubernetes Kind = "kubernetes"
	// KindProcessTree is a job with no cgroup of its own: its processes
	// share another unit's cgroup (rootless podman with the cgroupfs
	// manager), so it is measured from /proc through a Tree.
	KindProcessTree Kind = "process-tree"
)

// ScopeRule says where a kind of container cgroup lives and how its
// directory is named.
type ScopeRule struct {
	Kind Kind
	// Top is the top-level cgroup directory the rule looks under
	// ("machine.slice"), relative to the hierarchy's root. It may be a
	// path.Match pattern ("kubepods*").
	Top string
	// Name is a regular expression matched against a cgroup directory's
	// base name; its first submatch is the container id.
	Name string
}

// Rules tell Scan and Tree where AWX jobs are and how to tell their ids.
// The zero value finds nothing; start from DefaultRules. Every field maps
// to a flag of the agent.
type Rules struct {
	// Scopes are the container cgroups to look for.
	Scopes []ScopeRule
	// MaxDepth is how many directory levels below Top a container cgroup
	// may be (rootless podman: user-UID.slice/user@UID.service/user.slice/
	// libpod-ID.scope is 4).
	MaxDepth int
	// JobIDEnv is the environment key holding the AWX job id (AWX's
	// build_env sets JOB_ID). Only this key (and PodNameEnv) is read from
	// a process's environment; the rest holds credentials and is never
	// kept.
	JobIDEnv string
	// PodNameEnv and PodName find the id of a Kubernetes job before
	// ansible-playbook starts: the container runtime sets HOSTNAME to the
	// pod name, and AWX names job pods automation-job-<id>[-<suffix>].
	// Empty PodNameEnv disables the rule.
	PodNameEnv string
	PodName    string
	// Trusted are the executable names whose environment is read:
	// a process counts when its comm (the kernel's first 15 bytes of the
	// name) or, for a Python interpreter, the base name of its script
	// (argv[1]) is one of them.
	Trusted []string
	// ConmonComm is the comm of podman's container monitor, and
	// ConmonName matches the container name it is given (-n or --name);
	// its first submatch is the job id. ansible-runner names the
	// container ansible_runner_<ident>, and AWX's ident is the job id.
	// Empty ConmonComm disables the rule.
	ConmonComm string
	ConmonName string
	// ProcessTree makes Scan report jobs whose trusted processes are in
	// no container cgroup (KindProcessTree), found by JobIDEnv in their
	// environment: the one mode that reads /proc/<pid>/environ of
	// processes outside containers, which needs the agent to run as the
	// jobs' user or to hold CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH. Off
	// by default.
	ProcessTree bool
}

// DefaultRules returns the rules for AWX 21–24 with podman (rootful and
// rootless, systemd or cgroupfs manager) and Kubernetes (systemd or cgroupfs
// driver; containerd, CRI-O or dockershim). See the package doc for where
// each comes from.
func DefaultRules() Rules {
	const hex64 = `([0-9a-f]{64})`
	return Rules{
		Scopes: []ScopeRule{
			{Kind: KindPodman, Top: "machine.slice", Name: `^libpod-` + hex64 + `\.scope$`},
			{Kind: KindPodman, Top: "user.slice", Name: `^libpod-` + hex64 + `\.scope$`},
			{Kind: KindPodman, Top: "libpod_parent", Name: `^libpod-` + hex64 + `$`},
			{Kind: KindKubernetes, Top: "kubepods.slice", Name: `^(?:cri-containerd|crio|docker)-` + hex64 + `\.scope$`},
			{Kind: KindKubernetes, Top: "kubepods", Name: `^(?:crio-)?` + hex64 + `$`},
			// kind (Kubernetes in containers) runs its kubelet with
			// --cgroup-root=/kubelet: kubelet.slice/kubelet-kubepods.slice/….
			{Kind: KindKubernetes, Top: "kubelet.slice", Name: `^(?:cri-containerd|crio|docker)-` + hex64 + `\.scope$`},
		},
		MaxDepth:   5,
		JobIDEnv:   "JOB_ID",
		PodNameEnv: "HOSTNAME",
		PodName:    `^automation-job-([0-9]+)(?:-[a-z0-9]+)?$`,
		Trusted:    []string{"ansible-playbook", "ansible-runner"},
		ConmonComm: "conmon",
		ConmonName: `^ansible_runner_([0-9]+)$`,
	}
}

// AddParent adds a top-level cgroup to walk for containers of kind, with
// the container name of the default rules: a systemd slice (top ending in
// .slice: podman's cgroup_parent under the systemd manager, kind's
// kubelet.slice) holds <runtime>-<id>.scope units, any other directory
// the cgroupfs forms (libpod-<id>, <id>). The rules are checked by
// NewScanner; AddParent refuses a kind or top that cannot be one.
func (r *Rules) AddParent(kind Kind, top string) error {
	if kind != KindPodman && kind != KindKubernetes {
		return fmt.Errorf("cgroup parent: kind %q must be %q or %q", kind, KindPodman, KindKubernetes)
	}
	if top == "" || strings.Contains(top, "/") {
		return fmt.Errorf("cgroup parent: %q must be one top-level cgroup directory name, such as machine.slice", top)
	}
	if _, err := path.Match(top, ""); err != nil {
		return fmt.Errorf("cgroup parent %q: %w", top, err)
	}
	slice := strings.HasSuffix(top, ".slice")
	for _, d := range DefaultRules().Scopes {
		if d.Kind == kind && strings.HasSuffix(d.Name, `\.scope$`) == slice {
			r.Scopes = append(r.Scopes, ScopeRule{Kind: kind, Top: top, Name: d.Name})
			return nil
		}
	}
	return fmt.Errorf("cgroup parent %q: no default container name for %s", top, kind)
}

// compiled is Rules checked and ready to match.
type compiled struct {
	Rules
	scopes     []scopeRule
	tops       []string // distinct Top patterns, in rule order
	podName    *regexp.Regexp
	conmonName *regexp.Regexp
	trusted    []string // comm forms (≤ 15 bytes)
	jobKey     []byte   // "JOB_ID="
	podKey     []byte   // "HOSTNAME="
}

type scopeRule struct {
	kind Kind
	top  string
	name *regexp.Regexp
}

// commLen is the longest comm the kernel keeps (TASK_COMM_LEN - 1).
const commLen = 15

func (r Rules) compile() (*compiled, error) {
	c := &compiled{Rules: r}
	var errs []error
	for i, s := range r.Scopes {
		if s.Kind != KindPodman && s.Kind != KindKubernetes {
			errs = append(errs, fmt.Errorf("scope rule %d: kind %q must be %q or %q", i, s.Kind, KindPodman, KindKubernetes))
		}
		if s.Top == "" || strings.Contains(s.Top, "/") {
			errs = append(errs, fmt.Errorf("scope rule %d: top %q must be one cgroup directory name, such as machine.slice", i, s.Top))
		} else if _, err := path.Match(s.Top, ""); err != nil {
			errs = append(errs, fmt.Errorf("scope rule %d: top %q: %w", i, s.Top, err))
		}
		re, err := regexp.Compile(s.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("scope rule %d: name: %w", i, err))
			continue
		}
		if re.NumSubexp() < 1 {
			errs = append(errs, fmt.Errorf("scope rule %d: name %q needs a group capturing the container id", i, s.Name))
			continue
		}
		c.scopes = append(c.scopes, scopeRule{kind: s.Kind, top: s.Top, name: re})
		if !slices.Contains(c.tops, s.Top) {
			c.tops = append(c.tops, s.Top)
		}
	}
	if r.MaxDepth < 1 {
		errs = append(errs, fmt.Errorf("max depth %d must be at least 1", r.MaxDepth))
	}
	if r.JobIDEnv == "" || strings.ContainsAny(r.JobIDEnv, "=\x00") {
		errs = append(errs, fmt.Errorf("job id environment key %q must be a variable name such as JOB_ID", r.JobIDEnv))
	}
	c.jobKey = []byte(r.JobIDEnv + "=")
	if r.PodNameEnv != "" {
		re, err := idPattern("pod name", r.PodName)
		if err != nil {
			errs = append(errs, err)
		}
		c.podName = re
		c.podKey = []byte(r.PodNameEnv + "=")
	}
	if r.ConmonComm != "" {
		re, err := idPattern("conmon name", r.ConmonName)
		if err != nil {
			errs = append(errs, err)
		}
		c.conmonName = re
		c.ConmonComm = truncComm(r.ConmonComm)
	}
	if len(r.Trusted) == 0 {
		errs = append(errs, errors.New("trusted process names are empty: give at least ansible-playbook"))
	}
	for _, t := range r.Trusted {
		c.trusted = append(c.trusted, truncComm(t))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid discovery rules: %w", errors.Join(errs...))
	}
	return c, nil
}

func idPattern(what, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%s pattern: %w", what, err)
	}
	if re.NumSubexp() < 1 {
		return nil, fmt.Errorf("%s pattern %q needs a group capturing the job id", what, expr)
	}
	return re, nil
}

func truncComm(s string) string {
	if len(s) > commLen {
		return s[:commLen]
	}
	return s
}

// trustedComm reports whether comm names a trusted executable, or is a
// Python interpreter whose script must be checked.
func (c *compiled) trustedComm(comm []byte) (trusted, python bool) {
	for _, t := range c.trusted {
		if string(comm) == t {
			return true, false
		}
	}
	return false, strings.HasPrefix(string(comm), "python")
}

// trustedScript reports whether a script path (argv[1] of a Python
// interpreter) names a trusted executable.
func (c *compiled) trustedScript(script []byte) bool {
	base := script
	if i := bytes.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	for _, t := range c.Trusted {
		if string(base) == t {
			return true
		}
	}
	return false
}
