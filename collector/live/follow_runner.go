package live

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/peakline/peakline/collector/ansible"
)

// commandForks returns the forks an ansible command runs with: for
// `ansible-runner run DIR`, its --forks, else DIR/env/cmdline's; for
// ansible-playbook and ansible, their -f/--forks; else ANSIBLE_FORKS of
// env, else ansible's default 5. 0 for a command that is none of these
// (a wrapper script says nothing of its forks).
func commandForks(argv, env []string) int {
	if ra, ok := parseRunnerCommand(argv); ok {
		return cmp.Or(ra.forks, ansible.CmdlineForks(ra.privateDataDir), ansible.ForksFromEnv(env), ansible.DefaultForks)
	}
	if len(argv) > 0 {
		switch filepath.Base(argv[0]) {
		case "ansible-playbook", "ansible":
			return cmp.Or(ansible.ForksFromArgs(argv[1:]), ansible.ForksFromEnv(env), ansible.DefaultForks)
		}
	}
	return 0
}

// runnerValueFlags are the ansible-runner options that take a value, so
// that the private data dir is not mistaken for one.
var runnerValueFlags = map[string]bool{
	"--process-isolation-executable": true, "--process-isolation-path": true,
	"--directory-isolation-base-path": true, "--logfile": true,
	"-p": true, "--playbook": true, "-m": true, "--module": true, "-r": true, "--role": true,
	"-b": true, "--binary": true, "-i": true, "--ident": true, "--rotate-artifacts": true,
	"--artifact-dir": true, "--project-dir": true, "--inventory": true, "--limit": true,
	"--cmdline": true, "--hosts": true, "--forks": true, "--roles-path": true,
	"--role-vars": true, "-a": true, "--args": true, "--container-image": true,
	"--container-volume-mount": true, "--container-option": true, "--settings": true,
}

// runnerListFlags take any number of values (argparse nargs='*').
var runnerListFlags = map[string]bool{
	"--process-isolation-hide-paths": true, "--process-isolation-show-paths": true,
	"--process-isolation-ro-paths": true,
}

// runnerArgs is what an `ansible-runner run DIR …` command line says about
// where its job events go.
type runnerArgs struct {
	privateDataDir string
	ident          string // --ident; "" when runner makes one up
	artifactDir    string // --artifact-dir; "" for DIR/artifacts
	forks          int    // --forks; 0 when not given
}

// parseRunnerCommand recognises `ansible-runner run DIR …` (also
// `python3 -m ansible_runner run DIR …`); ok is false for anything else.
func parseRunnerCommand(argv []string) (ra runnerArgs, ok bool) {
	if len(argv) == 0 {
		return ra, false
	}
	args := argv[1:]
	switch base := filepath.Base(argv[0]); {
	case base == "ansible-runner":
	case strings.HasPrefix(base, "python"):
		i := 0
		for i < len(args)-1 && !(args[i] == "-m" && (args[i+1] == "ansible_runner" || args[i+1] == "ansible_runner.__main__")) {
			i++
		}
		if i >= len(args)-1 {
			return ra, false
		}
		args = args[i+2:]
	default:
		return ra, false
	}
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case runnerValueFlags[name]:
			if !hasValue && i+1 < len(args) {
				i++
				value = args[i]
			}
			switch name {
			case "-i", "--ident":
				ra.ident = value
			case "--artifact-dir":
				ra.artifactDir = value
			case "--forks":
				ra.forks = ansible.ForksFromArgs([]string{"--forks=" + value})
			}
		case runnerListFlags[name]:
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
		}
	}
	// positional: the subcommand, then the private data dir.
	if len(positional) < 2 || positional[0] != "run" {
		return ra, false
	}
	ra.privateDataDir = positional[1]
	return ra, true
}

// artifactsBase is the directory that holds artifacts/<ident> dirs.
func (ra runnerArgs) artifactsBase() string {
	if ra.artifactDir != "" {
		return ra.artifactDir
	}
	return filepath.Join(ra.privateDataDir, "artifacts")
}

// runnerLocator finds a runner job's job_events directory. With --ident it
// is known at once; without, runner names the ident dir itself (a uuid4),
// so the locator remembers which dirs were there before the job started
// and takes the one that appears.
type runnerLocator struct {
	base   string
	before map[string]bool

	mu    sync.Mutex
	ident string
}

// newRunnerLocator must be called before the command starts.
func newRunnerLocator(ra runnerArgs) *runnerLocator {
	l := &runnerLocator{base: ra.artifactsBase(), ident: ra.ident, before: map[string]bool{}}
	if l.ident == "" {
		entries, _ := os.ReadDir(l.base)
		for _, e := range entries {
			l.before[e.Name()] = true
		}
	}
	return l
}

// locate returns base/<ident>/job_events, or "" while no ident is known.
func (l *runnerLocator) locate() string {
	if id := l.findIdent(); id != "" {
		return filepath.Join(l.base, id, "job_events")
	}
	return ""
}

// identNow returns the ident, or "" while it is not known.
func (l *runnerLocator) identNow() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ident
}

func (l *runnerLocator) findIdent() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ident != "" {
		return l.ident
	}
	entries, err := os.ReadDir(l.base)
	if err != nil {
		return ""
	}
	var newest string
	var newestMod int64
	for _, e := range entries {
		if !e.IsDir() || l.before[e.Name()] {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if m := info.ModTime().UnixNano(); newest == "" || m > newestMod {
			newest, newestMod = e.Name(), m
		}
	}
	l.ident = newest
	return newest
}
