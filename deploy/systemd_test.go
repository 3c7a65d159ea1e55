package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// directiveSince is the systemd release that introduced each directive
// the units may use (systemd's NEWS); a directive missing here fails the
// test until its release is looked up.
var directiveSince = map[string]int{
	"Description": 1, "Documentation": 1, "After": 1, "Wants": 1, "WantedBy": 1,
	"Type": 1, "User": 1, "Group": 1, "ExecStart": 1, "ExecReload": 1,
	"Restart": 1, "RestartSec": 1, "TimeoutStopSec": 188, "Environment": 1,
	"UMask": 1, "LimitNOFILE": 1, "SecureBits": 1,
	"CapabilityBoundingSet": 183, "SystemCallFilter": 187, "SystemCallErrorNumber": 209,
	"PrivateTmp": 1, "PrivateDevices": 209, "ProtectHome": 214, "ProtectSystem": 214,
	"NoNewPrivileges": 187, "SystemCallArchitectures": 209, "RestrictAddressFamilies": 211,
	"CPUQuota": 213, "TasksMax": 227, "AmbientCapabilities": 229,
	"MemoryMax": 231, "ReadOnlyPaths": 231, "RestrictRealtime": 231, "MemoryDenyWriteExecute": 231,
	"ProtectKernelTunables": 232, "ProtectKernelModules": 232, "ProtectControlGroups": 232,
	"RestrictNamespaces": 233, "LockPersonality": 235,
	"StateDirectory": 235, "StateDirectoryMode": 235,
}

// oldestSystemd is RHEL 8's systemd, the oldest of AAP's node systems.
const oldestSystemd = 239

// newerThanOldest are directives and values the units must not use, with
// the release that brought them, for the error message.
var newerThanOldest = map[string]int{
	"Type=exec": 240, "ProtectHostname": 242, "RestrictSUIDSGID": 242, "ProtectKernelLogs": 244,
	"ProtectClock": 245, "LoadCredential": 247, "SetCredential": 247, "ProcSubset": 247, "ProtectProc": 247,
}

// unit is a unit file's directives: name to values in file order.
type unit map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
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
			t.Fatalf("%s: not a directive: %q", path, line)
		}
		u[k] = append(u[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// sections are a unit file's section headers in file order.
func sections(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "[") {
			out = append(out, line)
		}
	}
	return out
}

// environDropIn is the agent's drop-in that grants the two capabilities
// of the environ discovery modes; the packages ship it unused.
const environDropIn = "systemd/peakline-agent-environ.conf"

// check239 reports the directives of u (read from name) that systemd 239
// does not know.
func check239(t *testing.T, name string, u unit) {
	t.Helper()
	for k, vs := range u {
		since, ok := directiveSince[k]
		if !ok {
			t.Errorf("%s: %s: not in directiveSince; look up the systemd release that introduced it", name, k)
		} else if since > oldestSystemd {
			t.Errorf("%s: %s needs systemd %d, newer than %d", name, k, since, oldestSystemd)
		}
		if v, bad := newerThanOldest[k]; bad {
			t.Errorf("%s: %s needs systemd %d", name, k, v)
		}
		for _, v := range vs {
			if r, bad := newerThanOldest[k+"="+v]; bad {
				t.Errorf("%s: %s=%s needs systemd %d", name, k, v, r)
			}
		}
	}
}

// TestSystemdUnitsRunOn239 checks that every directive of both units and
// of the agent's drop-in exists in systemd 239, that none of the newer
// ones the agent's unit used to need (LoadCredential, %d) is back, and
// that ExecStart names no specifier at all. Neither unit grants a
// capability; the drop-in grants exactly the agent's two.
func TestSystemdUnitsRunOn239(t *testing.T) {
	for _, name := range []string{"peakline.service", "peakline-agent.service"} {
		u := readUnit(t, filepath.Join("systemd", name))
		check239(t, name, u)
		if len(u["ExecStart"]) != 1 || strings.Contains(u["ExecStart"][0], "%") {
			t.Errorf("%s: ExecStart %q: want one command without specifiers (%%d needs systemd 251)", name, u["ExecStart"])
		}
		if !reflect.DeepEqual(u["User"], []string{"peakline"}) || !reflect.DeepEqual(u["Group"], []string{"peakline"}) {
			t.Errorf("%s: User %v Group %v, want the packages' peakline user", name, u["User"], u["Group"])
		}
		for k, want := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
			"ProtectHome": "yes", "PrivateDevices": "yes", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
			"SystemCallErrorNumber": "EPERM", "Type": "simple"} {
			if !reflect.DeepEqual(u[k], []string{want}) {
				t.Errorf("%s: %s=%v, want %s", name, k, u[k], want)
			}
		}
	}

	for _, name := range []string{"peakline.service", "peakline-agent.service"} {
		u := readUnit(t, filepath.Join("systemd", name))
		if !reflect.DeepEqual(u["CapabilityBoundingSet"], []string{""}) || u["AmbientCapabilities"] != nil {
			t.Errorf("%s: CapabilityBoundingSet %q AmbientCapabilities %q, want none at all (an empty bounding set)", name, u["CapabilityBoundingSet"], u["AmbientCapabilities"])
		}
	}
	serve := readUnit(t, "systemd/peakline.service")
	if !reflect.DeepEqual(serve["StateDirectory"], []string{"peakline"}) {
		t.Errorf("serve: StateDirectory %v, want peakline (/var/lib/peakline)", serve["StateDirectory"])
	}
	agent := readUnit(t, "systemd/peakline-agent.service")
	for k, want := range map[string]string{
		"NoNewPrivileges": "yes",
		"SecureBits":      "noroot-locked",
		"ReadOnlyPaths":   "/sys/fs/cgroup /proc",
		"StateDirectory":  "peakline-agent",
		"MemoryMax":       "256M",
	} {
		if !reflect.DeepEqual(agent[k], []string{want}) {
			t.Errorf("agent: %s=%v, want %s", k, agent[k], want)
		}
	}

	dropIn := readUnit(t, environDropIn)
	check239(t, environDropIn, dropIn)
	want := unit{
		"AmbientCapabilities":   {"CAP_SYS_PTRACE CAP_DAC_READ_SEARCH"},
		"CapabilityBoundingSet": {"CAP_SYS_PTRACE CAP_DAC_READ_SEARCH"},
	}
	if !reflect.DeepEqual(dropIn, want) {
		t.Errorf("%s: %q, want only %q", environDropIn, dropIn, want)
	}
	if got := sections(t, environDropIn); !reflect.DeepEqual(got, []string{"[Service]"}) {
		t.Errorf("%s: sections %q, want [Service] only", environDropIn, got)
	}
}

// TestSystemdUnitsSettings: each unit's ExecStart runs the binary with a
// --config file shipped in deploy/etc whose keys are flags of that
// command and whose paths are where the unit lets the service write.
func TestSystemdUnitsSettings(t *testing.T) {
	execRe := regexp.MustCompile(`^/usr/bin/peakline (serve|agent) --config /etc/peakline/(serve|agent)\.yaml$`)
	for unitName, wantCmd := range map[string]string{"peakline.service": "serve", "peakline-agent.service": "agent"} {
		u := readUnit(t, filepath.Join("systemd", unitName))
		m := execRe.FindStringSubmatch(u["ExecStart"][0])
		if m == nil || m[1] != wantCmd || m[2] != wantCmd {
			t.Fatalf("%s: ExecStart %q, want /usr/bin/peakline %s --config /etc/peakline/%s.yaml", unitName, u["ExecStart"][0], wantCmd, wantCmd)
		}
		b, err := os.ReadFile(filepath.Join("etc", wantCmd+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]any{}
		if err := yaml.Unmarshal(b, &settings); err != nil {
			t.Fatalf("etc/%s.yaml: %v", wantCmd, err)
		}
		args := []string{wantCmd}
		for k, v := range settings {
			args = append(args, "--"+k+"="+toString(v))
		}
		flagsParse(t, args)
		state := "/var/lib/" + u["StateDirectory"][0] + "/"
		for _, k := range []string{"data", "spool-dir"} {
			if v, ok := settings[k]; ok && !strings.HasPrefix(toString(v), state) {
				t.Errorf("etc/%s.yaml: %s %v lies outside the unit's StateDirectory %s, which ProtectSystem=strict leaves read-only", wantCmd, k, v, state)
			}
		}
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

// writeUnits copies both units into dir with their /usr/bin/peakline
// pointed at the built binary (verify checks that the command exists),
// and, with dropIn, the agent's environ drop-in into
// dir/peakline-agent.service.d, where systemd-analyze, which searches the
// units' own directory, finds it. It returns the units' paths.
func writeUnits(t *testing.T, dir string, dropIn bool) []string {
	t.Helper()
	var units []string
	for _, name := range []string{"peakline.service", "peakline-agent.service"} {
		b, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "ExecStart=/usr/bin/peakline ", "ExecStart="+binary+" ")
		if s == string(b) {
			t.Fatalf("%s: no ExecStart=/usr/bin/peakline to point at the built binary", name)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	if dropIn {
		b, err := os.ReadFile(environDropIn)
		if err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(dir, "peakline-agent.service.d")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "environ.conf"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return units
}

// TestSystemdAnalyzeVerify runs systemd-analyze verify on both units, the
// agent's with its environ drop-in installed. It runs wherever
// systemd-analyze is installed and is required under CI=true.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze := needTool(t, "systemd-analyze")
	dir := t.TempDir()
	units := writeUnits(t, dir, true)
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// A unit verify finds fault with fails the test: the check can fail.
	bad := filepath.Join(dir, "bad.service")
	if err := os.WriteFile(bad, []byte("[Service]\nExecStart=/nonexistent/peakline serve\nProtectNothing=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", bad).CombinedOutput(); err == nil && len(out) == 0 {
		t.Fatalf("systemd-analyze verify accepts a unit with a missing command and an unknown directive")
	}
	// And verify reads the drop-in beside the unit: a fault in it is found.
	if err := os.WriteFile(filepath.Join(dir, "peakline-agent.service.d", "bad.conf"), []byte("[Service]\nProtectNothing=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", units[1]).CombinedOutput(); !strings.Contains(string(out), "bad.conf") {
		t.Fatalf("systemd-analyze verify does not read the agent's drop-in directory:\n%s", out)
	}
}

// TestSystemdAgentCapabilities asks systemd itself what the agent's unit
// grants, with and without the environ drop-in: systemd-analyze security
// --offline (systemd 250, --json 251) loads the unit and the drop-ins
// beside it as the manager would. Without the drop-in every capability
// check passes; with it exactly the two capability checks the drop-in's
// pair touches fail, and ambient capabilities are given. This is how
// systemd merges CapabilityBoundingSet=: the unit's empty assignment
// resets the set, the drop-in's later one sets it.
func TestSystemdAgentCapabilities(t *testing.T) {
	analyze := needTool(t, "systemd-analyze")
	v, err := exec.Command(analyze, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	var release int
	if _, err := fmt.Sscanf(string(v), "systemd %d", &release); err != nil {
		t.Fatalf("systemd-analyze --version %q: %v", v, err)
	}
	if release < 251 {
		t.Skipf("systemd-analyze %d: security --offline --json needs 251", release)
	}
	// exposed runs the analysis and returns the capability checks that
	// fail, sorted.
	exposed := func(unitPath string) []string {
		t.Helper()
		out, err := exec.Command(analyze, "security", "--offline=yes", "--json=short", unitPath).Output()
		if err != nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", unitPath, err, out)
		}
		var checks []struct {
			Set  bool   `json:"set"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(out, &checks); err != nil {
			t.Fatalf("systemd-analyze security --json: %v\n%s", err, out)
		}
		var bad []string
		n := 0
		for _, c := range checks {
			if !strings.HasPrefix(c.Name, "CapabilityBoundingSet=") && !strings.HasPrefix(c.Name, "AmbientCapabilities=") {
				continue
			}
			n++
			if !c.Set {
				bad = append(bad, c.Name)
			}
		}
		if n < 20 {
			t.Fatalf("systemd-analyze security reports %d capability checks, want the 20 and more of systemd 251", n)
		}
		slices.Sort(bad)
		return bad
	}
	plain := writeUnits(t, t.TempDir(), false)[1]
	if got := exposed(plain); got != nil {
		t.Errorf("the agent's unit alone: failing capability checks %q, want none", got)
	}
	withDropIn := writeUnits(t, t.TempDir(), true)[1]
	want := []string{"AmbientCapabilities=", "CapabilityBoundingSet=~CAP_(DAC_*|FOWNER|IPC_OWNER)", "CapabilityBoundingSet=~CAP_SYS_PTRACE"}
	if got := exposed(withDropIn); !reflect.DeepEqual(got, want) {
		t.Errorf("the agent's unit with %s: failing capability checks %q, want %q", environDropIn, got, want)
	}
}
