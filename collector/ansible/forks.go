package ansible

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultForks is ansible's forks when neither the command line nor the
// environment (ANSIBLE_FORKS) sets them.
const DefaultForks = 5

// maxCmdlineBytes bounds the env/cmdline file read: one line of options.
const maxCmdlineBytes = 64 << 10

// ForksFromArgs returns the forks an ansible or ansible-playbook (or
// ansible-runner) command line sets with -f N, -fN, --forks N or
// --forks=N (the last one wins, as argparse takes it); 0 when none does
// or the value is no positive number.
func ForksFromArgs(args []string) int {
	forks := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		var v string
		switch {
		case a == "--":
			return forks
		case a == "-f" || a == "--forks":
			if i+1 >= len(args) {
				return forks
			}
			i++
			v = args[i]
		case strings.HasPrefix(a, "--forks="):
			v = strings.TrimPrefix(a, "--forks=")
		case strings.HasPrefix(a, "-f") && !strings.HasPrefix(a, "--"):
			v = a[2:]
		default:
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			forks = n
		}
	}
	return forks
}

// ForksFromEnv returns the forks ANSIBLE_FORKS sets in env (KEY=VALUE
// entries, the last one winning), 0 when it does not.
func ForksFromEnv(env []string) int {
	forks := 0
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "ANSIBLE_FORKS="); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil && n > 0 {
				forks = n
			} else {
				forks = 0
			}
		}
	}
	return forks
}

// CmdlineForks returns the forks a private data dir's env/cmdline (the
// extra ansible options ansible-runner passes on, AWX writes none there
// but users do) sets, 0 when it has none or cannot be read.
func CmdlineForks(pdd string) int {
	g, err := newFileGate("", 0)
	if err != nil {
		return 0
	}
	data, err := g.readSmall(filepath.Join(pdd, "env", "cmdline"), maxCmdlineBytes)
	if err != nil || data == nil {
		return 0
	}
	return ForksFromArgs(strings.Fields(string(data)))
}

// maxCommandBytes bounds artifacts/<ident>/command: the command line and
// the job's environment.
const maxCommandBytes = 4 << 20

// runnerForks returns the forks of a runner job: -f/--forks of the
// ansible-playbook command ansible-runner ran (artifacts/<ident>/command,
// whose "command" lists it; its env's ANSIBLE_FORKS), else of
// env/cmdline, else ansible's default 5.
func runnerForks(gate fileGate, pdd, identDir string) int {
	if identDir != "" {
		if data, err := gate.readSmall(filepath.Join(identDir, "command"), maxCommandBytes); err == nil && data != nil {
			var c struct {
				Command []string          `json:"command"`
				Env     map[string]string `json:"env"`
			}
			if json.Unmarshal(data, &c) == nil {
				if n := ForksFromArgs(c.Command); n > 0 {
					return n
				}
				if n := ForksFromEnv([]string{"ANSIBLE_FORKS=" + c.Env["ANSIBLE_FORKS"]}); n > 0 {
					return n
				}
			}
		}
	}
	if n := CmdlineForks(pdd); n > 0 {
		return n
	}
	return DefaultForks
}

// SizingFromEvents fills what a job's events say of its sizing: the
// hosts of its playbook_on_stats, and an OOM kill for each failed task
// result killed by SIGKILL (see JobEvent.Killed), the last naming the
// task (its start's counter).
func SizingFromEvents(info *JobInfo, events []JobEvent) {
	for _, ev := range events {
		info.Hosts = max(info.Hosts, ev.Hosts)
		if !ev.Killed {
			continue
		}
		info.OOMKills++
		for _, st := range events {
			if st.TaskStart && st.TaskUUID == ev.TaskUUID && st.Counter <= ev.Counter {
				info.OOMCounter = max(info.OOMCounter, st.Counter)
			}
		}
	}
}
