package server

import (
	"slices"
	"strings"
)

// The states a job is shown in: every status a sender reports (AWX's,
// ansible-runner's, collect's) maps onto one of them.
const (
	stateRunning    = "running"
	stateSuccessful = "successful"
	stateFailed     = "failed"
	stateCanceled   = "canceled"
	stateUnknown    = "unknown"
)

// jobStates lists the states in the order they are offered to filters.
var jobStates = []string{stateRunning, stateSuccessful, stateFailed, stateCanceled, stateUnknown}

// jobState maps a reported status onto a state: AWX's new, pending,
// waiting and running and ansible-runner's starting are running; AWX's
// error and ansible-runner's timeout are failed (the job did not do what
// it was for); canceled is canceled; "" and anything else are unknown.
func jobState(status string) string {
	switch strings.ToLower(status) {
	case "running", "starting", "new", "pending", "waiting":
		return stateRunning
	case "successful":
		return stateSuccessful
	case "failed", "error", "timeout":
		return stateFailed
	case "canceled", "cancelled":
		return stateCanceled
	}
	return stateUnknown
}

// stateEnded reports whether a job in state has ended: its status says
// so. A job of unknown state may or may not have.
func stateEnded(state string) bool {
	return state == stateSuccessful || state == stateFailed || state == stateCanceled
}

// parseStates reads the status filter of GET /api/v1/jobs, the values
// of its status parameter: states separated by commas. It returns nil
// when there is no such parameter.
func parseStates(values []string) (map[string]bool, error) {
	if len(values) == 0 {
		return nil, nil
	}
	if len(values) > 1 {
		return nil, badRequest("status: give it once, with one or more of %s separated by commas, got %d status parameters", strings.Join(jobStates, ", "), len(values))
	}
	v := values[0]
	set := map[string]bool{}
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(jobStates, s) {
			return nil, badRequest("status: must be one or more of %s separated by commas, got %q", strings.Join(jobStates, ", "), v)
		}
		set[s] = true
	}
	return set, nil
}
