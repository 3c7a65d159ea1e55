package live

import (
	"bufio"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// callbackPlugin is Peakline's Ansible callback plugin: a notification
// callback (the user's stdout callback is untouched) that writes the job
// events of an ansible-playbook run as ansible-runner does, into the
// directory in EnvJobEventsDir.
//
//go:embed ansiblecb/peakline_events.py
var callbackPlugin []byte

// callbackName is the plugin's name in Ansible's callbacks_enabled list.
const callbackName = "peakline_events"

// EnvJobEventsDir tells the callback plugin which job_events directory to
// write; collect sets it for ansible-playbook commands.
const EnvJobEventsDir = "PEAKLINE_JOB_EVENTS_DIR"

// isPlaybookCommand reports whether argv runs ansible-playbook directly
// (also `python3 -m ansible.cli.playbook`).
func isPlaybookCommand(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	base := filepath.Base(argv[0])
	if strings.HasPrefix(base, "ansible-playbook") {
		return true
	}
	if strings.HasPrefix(base, "python") {
		for i := 1; i+1 < len(argv); i++ {
			if argv[i] == "-m" {
				return argv[i+1] == "ansible.cli.playbook"
			}
		}
	}
	return false
}

// callbackSetup is the temporary directory that holds the callback plugin
// and the job events it writes: plugins/peakline_events.py and
// artifacts/<ident>/job_events, the layout of an ansible-runner job.
type callbackSetup struct {
	root      string
	eventsDir string
	// env are the variables that enable the plugin, NAME=value.
	env []string
}

// setupCallback writes the plugin into a new temporary directory and
// works out the environment that enables it for a command run with environ
// in workDir. remove deletes the directory.
func setupCallback(ident string, environ []string, workDir string) (*callbackSetup, error) {
	root, err := os.MkdirTemp("", "peakline-collect-")
	if err != nil {
		return nil, fmt.Errorf("make the callback plugin directory: %w", err)
	}
	s := &callbackSetup{root: root, eventsDir: filepath.Join(root, "artifacts", safeIdent(ident), "job_events")}
	pluginDir := filepath.Join(root, "plugins")
	for _, d := range []string{pluginDir, s.eventsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			s.remove()
			return nil, fmt.Errorf("make the callback plugin directory: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(pluginDir, callbackName+".py"), callbackPlugin, 0o600); err != nil {
		s.remove()
		return nil, fmt.Errorf("write the callback plugin: %w", err)
	}
	env := envMap(environ)
	s.env = append(callbackEnv(env, pluginDir, readAnsibleCfg(env, workDir, systemAnsibleCfg)), EnvJobEventsDir+"="+s.eventsDir)
	return s, nil
}

func (s *callbackSetup) remove() error { return os.RemoveAll(s.root) }

// safeIdent returns id as a directory name: path separators and leading
// dots replaced; "job" for an empty id.
func safeIdent(id string) string {
	id = strings.NewReplacer("/", "_", "\\", "_", "\x00", "_").Replace(id)
	id = strings.TrimLeft(id, ".")
	if id == "" {
		return "job"
	}
	return id
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v // the last one wins, as in exec.Cmd
		}
	}
	return m
}

// callbackEnv returns the variables that add pluginDir to Ansible's
// callback plugin path and the plugin to its enabled callbacks, keeping
// what the user's environment or ansible.cfg sets: an environment variable
// replaces the ansible.cfg key of the same setting, so the value Ansible
// would have used is looked up and extended, not replaced.
//
// ANSIBLE_CALLBACK_WHITELIST (cores before 2.11; deprecated in 2.11 to
// 2.14, which warn on every run where it is set, and gone since 2.15) is
// set only when the user's environment sets it already.
func callbackEnv(env map[string]string, pluginDir string, cfg ansibleCfg) []string {
	var paths []string
	if v, ok := env["ANSIBLE_CALLBACK_PLUGINS"]; ok {
		paths = splitNonEmpty(v, ":")
	} else if v, ok := cfg.get("callback_plugins"); ok {
		for _, p := range splitNonEmpty(v, ":") {
			paths = append(paths, cfg.resolve(p, env))
		}
	} else {
		home := env["ANSIBLE_HOME"]
		if home == "" {
			if h, ok := cfg.get("home"); ok {
				home = cfg.resolve(h, env)
			}
		}
		if home == "" {
			home = filepath.Join(env["HOME"], ".ansible")
		}
		paths = []string{filepath.Join(home, "plugins", "callback"), "/usr/share/ansible/plugins/callback"}
	}
	out := []string{"ANSIBLE_CALLBACK_PLUGINS=" + strings.Join(append([]string{pluginDir}, paths...), ":")}

	var enabled []string
	whitelist, hasWhitelist := env["ANSIBLE_CALLBACK_WHITELIST"]
	if v, ok := env["ANSIBLE_CALLBACKS_ENABLED"]; ok {
		enabled = splitList(v)
	} else if hasWhitelist {
		enabled = splitList(whitelist)
	} else if v, ok := cfg.get("callbacks_enabled"); ok {
		enabled = splitList(v)
	} else if v, ok := cfg.get("callback_whitelist"); ok {
		enabled = splitList(v)
	}
	list := callbackName
	if len(enabled) > 0 {
		list = strings.Join(enabled, ",") + "," + callbackName
	}
	out = append(out, "ANSIBLE_CALLBACKS_ENABLED="+list)
	if hasWhitelist {
		out = append(out, "ANSIBLE_CALLBACK_WHITELIST="+list)
	}
	return out
}

func splitNonEmpty(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// splitList splits an Ansible list setting: comma separated, trimmed.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ansibleCfg is the [defaults] section of the ansible.cfg Ansible reads.
type ansibleCfg struct {
	path     string // "" when there is none
	defaults map[string]string
}

func (c ansibleCfg) get(key string) (string, bool) {
	v, ok := c.defaults[key]
	return v, ok
}

// resolve expands ~ and $VARS in a path of the file and makes it absolute
// against the file's directory, as Ansible does for path settings.
func (c ansibleCfg) resolve(p string, env map[string]string) string {
	p = os.Expand(p, func(k string) string { return env[k] })
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = env["HOME"] + p[1:]
	}
	if !filepath.IsAbs(p) && c.path != "" {
		p = filepath.Join(filepath.Dir(c.path), p)
	}
	return filepath.Clean(p)
}

// systemAnsibleCfg is the config file Ansible reads when no other is found.
const systemAnsibleCfg = "/etc/ansible/ansible.cfg"

// readAnsibleCfg finds and reads the config file Ansible uses, first found
// of: $ANSIBLE_CONFIG (a file, or a directory holding ansible.cfg),
// workDir/ansible.cfg unless workDir is world-writable, ~/.ansible.cfg,
// systemPath. An unreadable or missing file gives no keys.
func readAnsibleCfg(env map[string]string, workDir, systemPath string) ansibleCfg {
	var candidates []string
	if p, ok := env["ANSIBLE_CONFIG"]; ok {
		if p == "~" || strings.HasPrefix(p, "~/") {
			p = env["HOME"] + p[1:]
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(workDir, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, "ansible.cfg")
		}
		candidates = append(candidates, p)
	}
	if fi, err := os.Stat(workDir); err == nil && fi.Mode().Perm()&0o002 == 0 {
		candidates = append(candidates, filepath.Join(workDir, "ansible.cfg"))
	}
	if home := env["HOME"]; home != "" {
		candidates = append(candidates, filepath.Join(home, ".ansible.cfg"))
	}
	candidates = append(candidates, systemPath)
	for _, p := range candidates {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		defer f.Close()
		return ansibleCfg{path: p, defaults: parseINIDefaults(f)}
	}
	return ansibleCfg{}
}

// parseINIDefaults reads the [defaults] section of an INI file as Python's
// configparser does for Ansible: keys lower-cased, "=" or ":" separators,
// whole-line "#" and ";" comments, inline "; " comments, indented
// continuation lines.
func parseINIDefaults(f *os.File) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	inDefaults := false
	last := ""
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if i := strings.Index(line, " ;"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if raw[0] == ' ' || raw[0] == '\t' {
			if inDefaults && last != "" {
				out[last] = strings.TrimSpace(out[last] + "\n" + line)
			}
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			inDefaults = strings.TrimSpace(line[1:len(line)-1]) == "defaults"
			last = ""
			continue
		}
		if !inDefaults {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			continue
		}
		last = strings.ToLower(strings.TrimSpace(line[:i]))
		out[last] = strings.TrimSpace(line[i+1:])
	}
	return out
}
