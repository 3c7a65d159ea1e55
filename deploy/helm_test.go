package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/peakline"

// helmBinary finds helm: $HELM, the repository's bin/helm (make tools),
// or PATH; it skips the test where there is none, and fails it under
// CI=true.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if p, err := filepath.Abs("../bin/helm"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return needTool(t, "helm")
}

// rendered is one rendering of the chart, decoded into the API types.
// Every object is decoded strictly: a field the type lacks fails the test.
type rendered struct {
	namespaces      []corev1.Namespace
	serviceAccounts []corev1.ServiceAccount
	services        []corev1.Service
	secrets         []corev1.Secret
	daemonSets      []appsv1.DaemonSet
	statefulSets    []appsv1.StatefulSet
	clusterRoles    []rbacv1.ClusterRole
	roleBindings    []rbacv1.RoleBinding
	sccs            []securityContextConstraints
}

// securityContextConstraints is OpenShift's security.openshift.io/v1 SCC,
// the fields the chart sets (github.com/openshift/api on the module proxy
// is a 2018 release without Go modules).
type securityContextConstraints struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Priority                        *int32   `json:"priority"`
	AllowPrivilegedContainer        bool     `json:"allowPrivilegedContainer"`
	AllowPrivilegeEscalation        *bool    `json:"allowPrivilegeEscalation"`
	DefaultAllowPrivilegeEscalation *bool    `json:"defaultAllowPrivilegeEscalation"`
	AllowHostPID                    bool     `json:"allowHostPID"`
	AllowHostNetwork                bool     `json:"allowHostNetwork"`
	AllowHostIPC                    bool     `json:"allowHostIPC"`
	AllowHostPorts                  bool     `json:"allowHostPorts"`
	AllowHostDirVolumePlugin        bool     `json:"allowHostDirVolumePlugin"`
	ReadOnlyRootFilesystem          bool     `json:"readOnlyRootFilesystem"`
	RequiredDropCapabilities        []string `json:"requiredDropCapabilities"`
	AllowedCapabilities             []string `json:"allowedCapabilities"`
	DefaultAddCapabilities          []string `json:"defaultAddCapabilities"`
	RunAsUser                       struct {
		Type string `json:"type"`
	} `json:"runAsUser"`
	SELinuxContext struct {
		Type           string                 `json:"type"`
		SELinuxOptions *corev1.SELinuxOptions `json:"seLinuxOptions"`
	} `json:"seLinuxContext"`
	FSGroup struct {
		Type string `json:"type"`
	} `json:"fsGroup"`
	SupplementalGroups struct {
		Type string `json:"type"`
	} `json:"supplementalGroups"`
	SeccompProfiles []string `json:"seccompProfiles"`
	Volumes         []string `json:"volumes"`
	Users           []string `json:"users"`
	Groups          []string `json:"groups"`
}

// helmTemplate renders the chart as release "pl" in namespace "awx-perf"
// with args (--set ...) and decodes every object.
func helmTemplate(t *testing.T, args ...string) rendered {
	t.Helper()
	return decodeManifests(t, helmOut(t, append([]string{"template", "pl", chartDir, "--namespace", "awx-perf", "--kube-version", "1.30.0"}, args...)...))
}

func helmOut(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func decodeManifests(t *testing.T, out []byte) rendered {
	t.Helper()
	var r rendered
	for i, doc := range strings.Split(string(out), "\n---\n") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		if string(j) == "null" {
			continue
		}
		var meta struct{ APIVersion, Kind string }
		if err := json.Unmarshal(j, &meta); err != nil {
			t.Fatal(err)
		}
		strict := func(v any) {
			dec := json.NewDecoder(bytes.NewReader(j))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%s %s: %v\n%s", meta.APIVersion, meta.Kind, err, doc)
			}
		}
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			r.namespaces = append(r.namespaces, decoded[corev1.Namespace](strict))
		case "v1 ServiceAccount":
			r.serviceAccounts = append(r.serviceAccounts, decoded[corev1.ServiceAccount](strict))
		case "v1 Service":
			r.services = append(r.services, decoded[corev1.Service](strict))
		case "v1 Secret":
			r.secrets = append(r.secrets, decoded[corev1.Secret](strict))
		case "apps/v1 DaemonSet":
			r.daemonSets = append(r.daemonSets, decoded[appsv1.DaemonSet](strict))
		case "apps/v1 StatefulSet":
			r.statefulSets = append(r.statefulSets, decoded[appsv1.StatefulSet](strict))
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			r.clusterRoles = append(r.clusterRoles, decoded[rbacv1.ClusterRole](strict))
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			r.roleBindings = append(r.roleBindings, decoded[rbacv1.RoleBinding](strict))
		case "security.openshift.io/v1 SecurityContextConstraints":
			r.sccs = append(r.sccs, decoded[securityContextConstraints](strict))
		default:
			t.Fatalf("document %d: unexpected %s %s", i, meta.APIVersion, meta.Kind)
		}
	}
	return r
}

func decoded[T any](strict func(any)) T {
	var v T
	strict(&v)
	return v
}

func ptrIs[T comparable](p *T, want T) bool { return p != nil && *p == want }

// TestHelmLint runs helm lint --strict on the chart.
func TestHelmLint(t *testing.T) {
	helmOut(t, "lint", "--strict", "--kube-version", "1.30.0", chartDir)
}

// TestHelmServe checks serve's objects: one replica with its store on a
// claim of the configured size, a non-root pod the Pod Security
// "restricted" level admits, probes on /healthz at the port the Service
// targets, the auth file from the Secret, and args the binary takes.
func TestHelmServe(t *testing.T) {
	r := helmTemplate(t, "--set", "serve.persistence.size=7Gi", "--set", "serve.auth.existingSecret=my-auth", "--set", "image.tag=1.2.3")
	if len(r.statefulSets) != 1 || len(r.services) != 1 {
		t.Fatalf("%d StatefulSets, %d Services, want 1 and 1", len(r.statefulSets), len(r.services))
	}
	sts, svc := r.statefulSets[0], r.services[0]
	if sts.Namespace != "awx-perf" || svc.Namespace != "awx-perf" {
		t.Errorf("serve in namespaces %q %q, want the release's awx-perf", sts.Namespace, svc.Namespace)
	}
	if !ptrIs(sts.Spec.Replicas, 1) || sts.Spec.ServiceName != svc.Name {
		t.Errorf("replicas %v serviceName %q, want 1 and %q", sts.Spec.Replicas, sts.Spec.ServiceName, svc.Name)
	}
	pod := sts.Spec.Template.Spec
	if !reflect.DeepEqual(sts.Spec.Selector.MatchLabels, svc.Spec.Selector) {
		t.Errorf("StatefulSet selector %v, Service selector %v: want equal", sts.Spec.Selector.MatchLabels, svc.Spec.Selector)
	}
	for k, v := range svc.Spec.Selector {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("pod labels %v lack the Service's selector %s=%s", sts.Spec.Template.Labels, k, v)
		}
	}
	checkRestricted(t, "serve", pod)
	psc := pod.SecurityContext
	if !ptrIs(psc.RunAsUser, 65532) || !ptrIs(psc.RunAsGroup, 65532) || !ptrIs(psc.FSGroup, 65532) {
		t.Errorf("serve pod runs as %v:%v fsGroup %v, want the image's peakline user 65532", psc.RunAsUser, psc.RunAsGroup, psc.FSGroup)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("serve: automountServiceAccountToken must be false: serve does not talk to the Kubernetes API")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/peakline/peakline:1.2.3" {
		t.Errorf("image %q, want ghcr.io/peakline/peakline:1.2.3", c.Image)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Fatalf("ports %+v, want http 8080", c.Ports)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("Service ports %+v, want 8080 to the pod's http", svc.Spec.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET /healthz on port http", name, p)
		}
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if c.Resources.Requests.Name(res, resource.DecimalSI).IsZero() || c.Resources.Limits.Name(res, resource.DecimalSI).IsZero() {
			t.Errorf("resources %+v: want requests and limits of %s", c.Resources, res)
		}
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volumeClaimTemplates, want 1", len(sts.Spec.VolumeClaimTemplates))
	}
	pvc := sts.Spec.VolumeClaimTemplates[0]
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; pvc.Name != "data" || got.Cmp(resource.MustParse("7Gi")) != 0 ||
		!reflect.DeepEqual(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("claim %s of %s %v, want data of 7Gi ReadWriteOnce", pvc.Name, got.String(), pvc.Spec.AccessModes)
	}
	mounts := mountsByName(c.VolumeMounts)
	if m := mounts["data"]; m.MountPath != "/data" || m.ReadOnly {
		t.Errorf("data mounted %+v, want /data read-write", m)
	}
	vols := volumesByName(pod.Volumes)
	if v := vols["auth"]; v.Secret == nil || v.Secret.SecretName != "my-auth" || mounts["auth"].MountPath != "/etc/peakline/auth" || !mounts["auth"].ReadOnly {
		t.Errorf("auth volume %+v mounted %+v, want Secret my-auth read-only at /etc/peakline/auth", v, mounts["auth"])
	}
	for _, want := range []string{"serve", "--data=/data", "--listen=0.0.0.0:8080", "--auth-file=/etc/peakline/auth/auth.yaml"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	if !slices.Contains(c.Args, "--allowed-hosts=pl-peakline,pl-peakline.awx-perf,pl-peakline.awx-perf.svc,pl-peakline.awx-perf.svc.cluster.local,localhost") {
		t.Errorf("args %v: want the Service's names in --allowed-hosts", c.Args)
	}
	flagsParse(t, c.Args)
}

// TestHelmAgent checks the agent's objects: its own namespace labelled
// privileged (and shown to need it), the host's PID namespace but not its
// network, exactly two capabilities, read-only host mounts where its flags
// point, the tokens from a Secret, tolerations and node selector as given.
func TestHelmAgent(t *testing.T) {
	r := helmTemplate(t,
		"--set-json", `agent.tolerations=[{"key":"awx.example.com/execution","operator":"Exists","effect":"NoSchedule"}]`,
		"--set-json", `agent.nodeSelector={"awx.example.com/execution":"true"}`,
		"--set", "agent.awxURL=https://awx.corp.example")
	if len(r.daemonSets) != 1 || len(r.serviceAccounts) != 1 || len(r.namespaces) != 1 {
		t.Fatalf("%d DaemonSets, %d ServiceAccounts, %d Namespaces, want 1 each", len(r.daemonSets), len(r.serviceAccounts), len(r.namespaces))
	}
	if len(r.sccs) != 0 || len(r.clusterRoles) != 0 || len(r.secrets) != 0 {
		t.Errorf("without openshift.enabled and tokens: %d SCCs, %d ClusterRoles, %d Secrets, want none", len(r.sccs), len(r.clusterRoles), len(r.secrets))
	}
	ds, sa, ns := r.daemonSets[0], r.serviceAccounts[0], r.namespaces[0]
	if ds.Namespace != ns.Name || sa.Namespace != ns.Name || ns.Name != "peakline-agent" {
		t.Errorf("agent in %q, ServiceAccount in %q, namespace %q: want all peakline-agent", ds.Namespace, sa.Namespace, ns.Name)
	}
	for k, want := range map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
		"pod-security.kubernetes.io/warn":    "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
	} {
		if ns.Labels[k] != want {
			t.Errorf("namespace label %s=%q, want %q", k, ns.Labels[k], want)
		}
	}
	pod := ds.Spec.Template.Spec
	// The reason for "privileged": baseline refuses this pod.
	if v := baselineViolations(pod); !reflect.DeepEqual(v, []string{"hostPID", "hostPath volume cgroup", "hostPath volume proc", "hostPath volume spool", "capability DAC_READ_SEARCH", "capability SYS_PTRACE"}) {
		t.Errorf("baseline violations %q: the namespace label's reason changed", v)
	}
	if pod.ServiceAccountName != sa.Name || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken ||
		pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("serviceAccountName %q (want %q); automount must be false on both: the agent does not talk to the Kubernetes API", pod.ServiceAccountName, sa.Name)
	}
	if !pod.HostPID || pod.HostNetwork || pod.HostIPC {
		t.Errorf("hostPID=%v hostNetwork=%v hostIPC=%v, want true false false", pod.HostPID, pod.HostNetwork, pod.HostIPC)
	}
	want := []corev1.Toleration{{Key: "awx.example.com/execution", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if !reflect.DeepEqual(pod.Tolerations, want) || !reflect.DeepEqual(pod.NodeSelector, map[string]string{"awx.example.com/execution": "true"}) {
		t.Errorf("tolerations %+v nodeSelector %v, want the given ones", pod.Tolerations, pod.NodeSelector)
	}
	psc := pod.SecurityContext
	if !ptrIs(psc.RunAsUser, 0) || !ptrIs(psc.RunAsNonRoot, false) || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || psc.SELinuxOptions != nil {
		t.Errorf("agent pod securityContext %+v, want uid 0, RuntimeDefault seccomp, no SELinux type off OpenShift", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || !ptrIs(sc.ReadOnlyRootFilesystem, true) || !ptrIs(sc.AllowPrivilegeEscalation, false) || !ptrIs(sc.Privileged, false) {
		t.Fatalf("securityContext %+v, want readOnlyRootFilesystem, no privilege escalation, not privileged", sc)
	}
	if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!reflect.DeepEqual(sc.Capabilities.Add, []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH"}) {
		t.Errorf("capabilities %+v, want drop [ALL] add [SYS_PTRACE DAC_READ_SEARCH]", sc.Capabilities)
	}
	if len(c.Ports) != 0 {
		t.Errorf("the agent listens on nothing, but the container declares ports %v", c.Ports)
	}
	type mount struct {
		path     string
		readOnly bool
		hostPath string // "" for a Secret
	}
	vols := volumesByName(pod.Volumes)
	got := map[string]mount{}
	for _, m := range c.VolumeMounts {
		hp := ""
		if v := vols[m.Name]; v.HostPath != nil {
			hp = v.HostPath.Path
		}
		got[m.Name] = mount{m.MountPath, m.ReadOnly, hp}
	}
	wantMounts := map[string]mount{
		"cgroup": {"/host/sys/fs/cgroup", true, "/sys/fs/cgroup"},
		"proc":   {"/host/proc", true, "/proc"},
		"tokens": {"/run/secrets/peakline", true, ""},
		"spool":  {"/var/lib/peakline-agent", false, "/var/lib/peakline-agent"},
	}
	if !reflect.DeepEqual(got, wantMounts) {
		t.Errorf("mounts\n got %+v\nwant %+v", got, wantMounts)
	}
	if v := vols["tokens"]; v.Secret == nil || v.Secret.SecretName != "peakline-agent-tokens" || !ptrIs(v.Secret.DefaultMode, 0o400) {
		t.Errorf("tokens volume %+v, want Secret peakline-agent-tokens mode 0400", v)
	}
	for _, arg := range []string{"agent", "--server=http://pl-peakline.awx-perf.svc:8080", "--awx-url=https://awx.corp.example",
		"--cgroup-root=/host/sys/fs/cgroup", "--proc-root=/host/proc",
		"--token-file=/run/secrets/peakline/server-token", "--awx-token-file=/run/secrets/peakline/awx-token",
		"--spool-dir=/var/lib/peakline-agent/spool"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	flagsParse(t, c.Args)

	// Tokens given as values: the chart makes the Secret the pod reads.
	r = helmTemplate(t, "--set", "agent.tokens.serverToken=ingest-0123456789", "--set", "agent.tokens.awxToken=awx-0123456789")
	if len(r.secrets) != 1 || r.secrets[0].Name != "peakline-agent-tokens" || r.secrets[0].Namespace != "peakline-agent" ||
		r.secrets[0].StringData["server-token"] != "ingest-0123456789" || r.secrets[0].StringData["awx-token"] != "awx-0123456789" {
		t.Errorf("secrets %+v, want peakline-agent-tokens in peakline-agent with both tokens", r.secrets)
	}
}

// TestHelmOpenShift: with openshift.enabled the agent's pod asks for
// SELinux type spc_t, an SCC allows exactly what the pod asks for, and a
// ClusterRole to use it is bound to the agent's ServiceAccount alone;
// serve leaves its user ids to OpenShift.
func TestHelmOpenShift(t *testing.T) {
	r := helmTemplate(t, "--set", "openshift.enabled=true")
	if len(r.sccs) != 1 || len(r.clusterRoles) != 1 || len(r.roleBindings) != 1 || len(r.daemonSets) != 1 || len(r.serviceAccounts) != 1 {
		t.Fatalf("%d SCCs %d ClusterRoles %d RoleBindings %d DaemonSets %d ServiceAccounts, want 1 each", len(r.sccs), len(r.clusterRoles), len(r.roleBindings), len(r.daemonSets), len(r.serviceAccounts))
	}
	scc, role, rb, ds, sa := r.sccs[0], r.clusterRoles[0], r.roleBindings[0], r.daemonSets[0], r.serviceAccounts[0]
	pod := ds.Spec.Template.Spec
	if o := pod.SecurityContext.SELinuxOptions; o == nil || o.Type != "spc_t" {
		t.Errorf("agent pod seLinuxOptions %+v, want type spc_t", o)
	}
	if scc.AllowPrivilegedContainer || !ptrIs(scc.AllowPrivilegeEscalation, false) || !ptrIs(scc.DefaultAllowPrivilegeEscalation, false) ||
		!scc.AllowHostPID || scc.AllowHostNetwork || scc.AllowHostIPC || scc.AllowHostPorts || !scc.AllowHostDirVolumePlugin || !scc.ReadOnlyRootFilesystem {
		t.Errorf("SCC %+v: want hostPID and hostPath only, not privileged, no escalation, read-only root", scc)
	}
	if !reflect.DeepEqual(scc.RequiredDropCapabilities, []string{"ALL"}) || !reflect.DeepEqual(scc.AllowedCapabilities, []string{"SYS_PTRACE", "DAC_READ_SEARCH"}) || scc.DefaultAddCapabilities != nil {
		t.Errorf("SCC capabilities drop %v allowed %v default %v", scc.RequiredDropCapabilities, scc.AllowedCapabilities, scc.DefaultAddCapabilities)
	}
	if scc.SELinuxContext.Type != "MustRunAs" || scc.SELinuxContext.SELinuxOptions == nil || scc.SELinuxContext.SELinuxOptions.Type != "spc_t" {
		t.Errorf("SCC seLinuxContext %+v, want MustRunAs spc_t", scc.SELinuxContext)
	}
	if scc.RunAsUser.Type != "RunAsAny" || !reflect.DeepEqual(scc.SeccompProfiles, []string{"runtime/default"}) || len(scc.Users) != 0 || len(scc.Groups) != 0 {
		t.Errorf("SCC runAsUser %q seccomp %v users %v groups %v, want RunAsAny, runtime/default, granted through RBAC only", scc.RunAsUser.Type, scc.SeccompProfiles, scc.Users, scc.Groups)
	}
	// The SCC admits the pod: each volume type, capability and host
	// namespace the pod uses is allowed.
	for _, v := range pod.Volumes {
		typ := map[bool]string{true: "hostPath", false: "secret"}[v.HostPath != nil]
		if (v.HostPath == nil && v.Secret == nil) || !slices.Contains(scc.Volumes, typ) {
			t.Errorf("volume %s (%s) is not among the SCC's %v", v.Name, typ, scc.Volumes)
		}
	}
	if len(scc.Volumes) != 2 {
		t.Errorf("SCC volumes %v, want exactly hostPath and secret", scc.Volumes)
	}
	for _, c := range pod.Containers[0].SecurityContext.Capabilities.Add {
		if !slices.Contains(scc.AllowedCapabilities, string(c)) {
			t.Errorf("capability %s is not allowed by the SCC", c)
		}
	}
	if len(role.Rules) != 1 || !reflect.DeepEqual(role.Rules[0], rbacv1.PolicyRule{
		APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"},
		ResourceNames: []string{scc.Metadata.Name}, Verbs: []string{"use"},
	}) {
		t.Errorf("ClusterRole rules %+v, want use of SCC %s only", role.Rules, scc.Metadata.Name)
	}
	if rb.Namespace != ds.Namespace || rb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}) ||
		!reflect.DeepEqual(rb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}) {
		t.Errorf("RoleBinding %+v: want %s bound to ServiceAccount %s/%s in the agent's namespace", rb, role.Name, sa.Namespace, sa.Name)
	}
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("agent pod runs as ServiceAccount %q, want %q", pod.ServiceAccountName, sa.Name)
	}
	sts := r.statefulSets[0].Spec.Template.Spec
	checkRestricted(t, "serve on OpenShift", sts)
	if psc := sts.SecurityContext; psc.RunAsUser != nil || psc.RunAsGroup != nil || psc.FSGroup != nil {
		t.Errorf("serve on OpenShift sets ids %v:%v fsGroup %v; restricted-v2 assigns the project's", psc.RunAsUser, psc.RunAsGroup, psc.FSGroup)
	}
}

// TestManifestsMatchChart: deploy/kubernetes is the chart rendered with
// its defaults (make manifests), so kubectl apply installs what helm does.
func TestManifestsMatchChart(t *testing.T) {
	for file, args := range map[string][]string{
		"kubernetes/peakline.yaml":           nil,
		"kubernetes/peakline-openshift.yaml": {"--set", "openshift.enabled=true"},
	} {
		want := helmOut(t, append([]string{"template", "peakline", chartDir, "--namespace", "peakline", "--kube-version", "1.30.0"}, args...)...)
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the chart's rendering: run make manifests", file)
		}
		decodeManifests(t, got)
	}
}

// checkRestricted fails the test for each rule of the Pod Security
// "restricted" level (v1.30) the pod breaks.
func checkRestricted(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	if v := baselineViolations(pod); len(v) > 0 {
		t.Errorf("%s breaks baseline: %v", what, v)
	}
	psc := pod.SecurityContext
	if psc == nil || !ptrIs(psc.RunAsNonRoot, true) || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s pod securityContext %+v: want runAsNonRoot and the RuntimeDefault seccomp profile", what, psc)
	}
	allowed := func(v corev1.Volume) bool {
		s := v.VolumeSource
		return s.ConfigMap != nil || s.CSI != nil || s.DownwardAPI != nil || s.EmptyDir != nil || s.Ephemeral != nil ||
			s.PersistentVolumeClaim != nil || s.Projected != nil || s.Secret != nil
	}
	for _, v := range pod.Volumes {
		if !allowed(v) {
			t.Errorf("%s: volume %s has a type restricted forbids", what, v.Name)
		}
	}
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil || !ptrIs(sc.AllowPrivilegeEscalation, false) || !ptrIs(sc.ReadOnlyRootFilesystem, true) || !ptrIs(sc.RunAsNonRoot, true) {
			t.Errorf("%s container %s securityContext %+v: want allowPrivilegeEscalation false, readOnlyRootFilesystem, runAsNonRoot", what, c.Name, sc)
			continue
		}
		if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s container %s capabilities %+v: want drop [ALL] and none added", what, c.Name, sc.Capabilities)
		}
	}
}

// baselineViolations lists what in pod the Pod Security "baseline" level
// (v1.30) forbids, in a fixed order.
func baselineViolations(pod corev1.PodSpec) []string {
	var v []string
	if pod.HostPID {
		v = append(v, "hostPID")
	}
	if pod.HostIPC {
		v = append(v, "hostIPC")
	}
	if pod.HostNetwork {
		v = append(v, "hostNetwork")
	}
	for _, vol := range pod.Volumes {
		if vol.HostPath != nil {
			v = append(v, "hostPath volume "+vol.Name)
		}
	}
	baselineCaps := []corev1.Capability{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
		"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
	var caps []string
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		if sc := c.SecurityContext; sc != nil {
			if ptrIs(sc.Privileged, true) {
				v = append(v, "privileged "+c.Name)
			}
			if sc.Capabilities != nil {
				for _, a := range sc.Capabilities.Add {
					if !slices.Contains(baselineCaps, a) {
						caps = append(caps, "capability "+string(a))
					}
				}
			}
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				v = append(v, "hostPort "+c.Name)
			}
		}
	}
	slices.Sort(caps)
	return append(v, caps...)
}

func mountsByName(ms []corev1.VolumeMount) map[string]corev1.VolumeMount {
	out := map[string]corev1.VolumeMount{}
	for _, m := range ms {
		out[m.Name] = m
	}
	return out
}

func volumesByName(vs []corev1.Volume) map[string]corev1.Volume {
	out := map[string]corev1.Volume{}
	for _, v := range vs {
		out[v.Name] = v
	}
	return out
}
