package main

import (
	"bufio"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// daemonSetDoc is the part of a DaemonSet manifest the agent's privileges
// depend on, decoded independently of any Kubernetes library.
type daemonSetDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				HostPID                      bool              `yaml:"hostPID"`
				HostNetwork                  bool              `yaml:"hostNetwork"`
				HostIPC                      bool              `yaml:"hostIPC"`
				AutomountServiceAccountToken *bool             `yaml:"automountServiceAccountToken"`
				NodeSelector                 map[string]string `yaml:"nodeSelector"`
				Containers                   []struct {
					Name            string   `yaml:"name"`
					Args            []string `yaml:"args"`
					Ports           []any    `yaml:"ports"`
					SecurityContext struct {
						ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
						AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
						Privileged               *bool `yaml:"privileged"`
						Capabilities             struct {
							Drop []string `yaml:"drop"`
							Add  []string `yaml:"add"`
						} `yaml:"capabilities"`
					} `yaml:"securityContext"`
					Resources struct {
						Requests map[string]string `yaml:"requests"`
						Limits   map[string]string `yaml:"limits"`
					} `yaml:"resources"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
						ReadOnly  bool   `yaml:"readOnly"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name     string `yaml:"name"`
					HostPath *struct {
						Path string `yaml:"path"`
					} `yaml:"hostPath"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestDeployDaemonSet decodes the agent's DaemonSet and checks every
// privilege it asks for: the host's PID namespace but not its network,
// exactly two capabilities, read-only host mounts where the agent's flags
// point, the tokens from a Secret.
func TestDeployDaemonSet(t *testing.T) {
	b, err := os.ReadFile("deploy/kubernetes/peakline-agent-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds daemonSetDoc
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(false)
	if err := dec.Decode(&ds); err != nil {
		t.Fatalf("decode: %v", err)
	}
	pod := ds.Spec.Template.Spec
	if ds.Kind != "DaemonSet" || ds.Metadata.Name != "peakline-agent" {
		t.Fatalf("kind %q name %q, want DaemonSet peakline-agent", ds.Kind, ds.Metadata.Name)
	}
	if !pod.HostPID || pod.HostNetwork || pod.HostIPC {
		t.Errorf("hostPID=%v hostNetwork=%v hostIPC=%v, want true false false", pod.HostPID, pod.HostNetwork, pod.HostIPC)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken must be false: the agent does not talk to the Kubernetes API")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	isFalse := func(p *bool) bool { return p != nil && !*p }
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || !isFalse(sc.AllowPrivilegeEscalation) || !isFalse(sc.Privileged) {
		t.Errorf("securityContext %+v, want readOnlyRootFilesystem, no privilege escalation, not privileged", sc)
	}
	if !reflect.DeepEqual(sc.Capabilities.Drop, []string{"ALL"}) || !reflect.DeepEqual(sc.Capabilities.Add, []string{"SYS_PTRACE", "DAC_READ_SEARCH"}) {
		t.Errorf("capabilities drop %v add %v, want drop [ALL] add [SYS_PTRACE DAC_READ_SEARCH]", sc.Capabilities.Drop, sc.Capabilities.Add)
	}
	if len(c.Ports) != 0 {
		t.Errorf("the agent listens on nothing, but the container declares ports %v", c.Ports)
	}
	for _, k := range []string{"cpu", "memory"} {
		if c.Resources.Requests[k] == "" || c.Resources.Limits[k] == "" {
			t.Errorf("resources %+v: want requests and limits of cpu and memory", c.Resources)
		}
	}

	type mount struct {
		path     string
		readOnly bool
		hostPath string // "" for a Secret
	}
	volumes := map[string]string{}
	secrets := map[string]string{}
	for _, v := range pod.Volumes {
		switch {
		case v.HostPath != nil:
			volumes[v.Name] = v.HostPath.Path
		case v.Secret != nil:
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	got := map[string]mount{}
	for _, m := range c.VolumeMounts {
		got[m.Name] = mount{m.MountPath, m.ReadOnly, volumes[m.Name]}
	}
	want := map[string]mount{
		"cgroup": {"/host/sys/fs/cgroup", true, "/sys/fs/cgroup"},
		"proc":   {"/host/proc", true, "/proc"},
		"tokens": {"/run/secrets/peakline", true, ""},
		"spool":  {"/var/lib/peakline-agent", false, "/var/lib/peakline-agent"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mounts\n got %+v\nwant %+v", got, want)
	}
	if secrets["tokens"] != "peakline-agent-tokens" {
		t.Errorf("tokens volume from secret %q, want peakline-agent-tokens", secrets["tokens"])
	}
	for _, arg := range []string{"agent", "--cgroup-root=/host/sys/fs/cgroup", "--proc-root=/host/proc",
		"--token-file=/run/secrets/peakline/server-token", "--awx-token-file=/run/secrets/peakline/awx-token",
		"--spool-dir=/var/lib/peakline-agent/spool"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	// The manifest's flags must be the agent's own.
	agent, _, err := rootCommand(nil, nil).Find([]string{"agent"})
	if err != nil || agent.Name() != "agent" {
		t.Fatalf("no agent command: %v", err)
	}
	if err := agent.ParseFlags(c.Args[1:]); err != nil {
		t.Errorf("the manifest's args do not parse: %v", err)
	}
}

// TestDeploySystemdUnit reads the agent's unit file and checks the
// directives its privileges rest on.
func TestDeploySystemdUnit(t *testing.T) {
	f, err := os.Open("deploy/systemd/peakline-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string][]string{}
	sc := bufio.NewScanner(f)
	var cont strings.Builder
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cont.WriteString(rest)
			continue
		}
		cont.WriteString(line)
		k, v, ok := strings.Cut(cont.String(), "=")
		cont.Reset()
		if !ok {
			t.Fatalf("not a directive: %q", line)
		}
		got[k] = append(got[k], v)
	}
	must(t, sc.Err())
	want := map[string][]string{
		"User":                    {"peakline-agent"},
		"AmbientCapabilities":     {"CAP_SYS_PTRACE CAP_DAC_READ_SEARCH"},
		"CapabilityBoundingSet":   {"CAP_SYS_PTRACE CAP_DAC_READ_SEARCH"},
		"NoNewPrivileges":         {"yes"},
		"ProtectSystem":           {"strict"},
		"ReadOnlyPaths":           {"/sys/fs/cgroup /proc"},
		"StateDirectory":          {"peakline-agent"},
		"PrivateTmp":              {"yes"},
		"RestrictAddressFamilies": {"AF_INET AF_INET6 AF_UNIX"},
		"LoadCredential":          {"server-token:/etc/peakline/server-token", "awx-token:/etc/peakline/awx-token"},
		"ProtectControlGroups":    {"yes"},
		"ProcSubset":              {"all"},
	}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	args := strings.Fields(got["ExecStart"][0])
	if len(args) < 2 || args[1] != "agent" {
		t.Fatalf("ExecStart %q does not run peakline agent", got["ExecStart"])
	}
	for _, a := range []string{"--token-file", "--awx-token-file", "--spool-dir"} {
		if !slices.Contains(args, a) {
			t.Errorf("ExecStart lacks %s: %v", a, args)
		}
	}
}
