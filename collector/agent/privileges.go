package agent

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
)

// Capabilities the environment reads need (linux/capability.h): the
// file /proc/<pid>/environ is mode 0400, and the kernel's ptrace access
// check (PTRACE_MODE_READ_FSCREDS) guards it beyond that.
const (
	capDACReadSearch = 2
	capSysPtrace     = 19
)

// effectiveCaps reads the CapEff mask of a /proc/<pid>/status file.
func effectiveCaps(status []byte) (uint64, bool) {
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("CapEff:")); ok {
			caps, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
			return caps, err == nil
		}
	}
	return 0, false
}

// missingEnvironCaps names the capabilities of those an environment read
// of another user's process needs that caps lacks.
func missingEnvironCaps(caps uint64) []string {
	var missing []string
	if caps&(1<<capSysPtrace) == 0 {
		missing = append(missing, "CAP_SYS_PTRACE")
	}
	if caps&(1<<capDACReadSearch) == 0 {
		missing = append(missing, "CAP_DAC_READ_SEARCH")
	}
	return missing
}

// checkPrivileges says at the start what the process-tree mode needs that
// the agent lacks (status is its own /proc/self/status, euid its user):
// it reads the environment of processes outside containers, which only
// the processes' own user, or one holding CAP_SYS_PTRACE and
// CAP_DAC_READ_SEARCH, may. The agent still runs: on a rootless podman
// node it may run as the jobs' user, who needs neither. It reports
// whether something is missing.
func checkPrivileges(processTree bool, status []byte, euid int, log *slog.Logger) bool {
	if !processTree {
		return false
	}
	caps, ok := effectiveCaps(status)
	if !ok {
		log.Warn("--process-tree: cannot tell the agent's capabilities from /proc/self/status; environment reads may be refused")
		return true
	}
	missing := missingEnvironCaps(caps)
	if len(missing) == 0 {
		return false
	}
	log.Warn("--process-tree reads /proc/<pid>/environ of job processes, and the agent lacks "+strings.Join(missing, " and ")+
		": process trees are found only through conmon's command line (podman), or when they run as the agent's own user; run it as that user or grant the capabilities (docs/agent.md)",
		"uid", euid, "missing", strings.Join(missing, ","))
	return true
}
