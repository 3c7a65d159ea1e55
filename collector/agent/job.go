package agent

import (
	"context"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// stopFlushTimeout bounds how long a job still waits for its events when
// the agent itself stops.
const stopFlushTimeout = 2 * time.Second

// runJob is one job's life on the node: open its cgroup or process tree,
// sample until it has no process left, follow its AWX events until they
// are complete (at most DrainTimeout), flush, forget. Nothing a job does
// (a vanished cgroup, an AWX error, a panic) reaches the other jobs.
// wasRunning says the job started before the agent did.
//
// The session sends nothing until AWX said what the id is and the
// server's collection policy is known: it is asked as soon as AWX names
// the job's template. When AWX lists no unified job of the id, when the
// job's type is not one of JobTypes, or when the policy says no, the
// session is stopped, its samples dropped, and runJob returns declined.
// When AWX has not answered by the time the job holds MaxHeldSamples,
// or by the end of the drain, the server's system setting alone decides
// (the template's is still asked once AWX names it; what went out before
// stays on the server, which is logged).
func (a *agent) runJob(ctx context.Context, t target, wasRunning bool) (declined bool) {
	log := a.log.With("job", t.jobID)
	defer func() {
		if r := recover(); r != nil {
			log.Error("job handling failed; the agent goes on with the other jobs", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	o, err := a.w.open(t)
	if err != nil {
		log.Warn("cannot open the job to sample it; skipping it", "cgroup", t.cgroupDir, "err", err)
		return false
	}
	defer o.close()
	if wasRunning {
		log.Info("job was running before the agent started: its samples from before now are missing", "measured", o.measured)
	}
	followCtx, stopFollowing := context.WithCancel(context.Background())
	defer stopFollowing()
	s, err := a.w.start(followCtx, t, o)
	if err != nil {
		log.Warn("cannot start sampling the job; skipping it", "err", err)
		return false
	}
	log.Info("sampling job", "measured", o.measured, "cgroup", t.cgroupDir, "via", t.via)

	var info ansible.JobInfo
	final, warnedHeld, asked, released := false, false, false, false
	// drop discards the job's samples, saying why.
	drop := func(msg string, args ...any) {
		dropped, sent := s.discard()
		args = append(args, "dropped_samples", dropped)
		if sent > 0 {
			log.Info(msg+"; the samples sent before stay on the server", append(args, "sent_samples", sent)...)
			return
		}
		log.Info(msg, args...)
	}
	// decide asks the policy for template ("" when AWX named none) and
	// drops the job when it says no. Asked even while the agent stops
	// (FetchPolicy gives up after 3s): the job's held samples go out or
	// not by it.
	decide := func(template string) bool {
		collect, reason := a.policies.decide(context.WithoutCancel(ctx), template, log)
		if !collect {
			drop("not collecting: "+reason, "template", template)
		}
		return collect
	}
	// update returns false once the job is dropped: the policy declined
	// it, AWX knows no such job, or its type is not measured.
	update := func() bool {
		switch typ, unknown := s.awxType(); {
		case unknown:
			drop("not a job: AWX lists no unified job of this id (or the token's user may not see it); nothing of it is stored")
			return false
		case typ != "" && !slices.Contains(a.cfg.JobTypes, typ):
			drop("not measuring: AWX says this is a "+typ+", a type --job-types leaves out", "type", typ)
			return false
		}
		if n := s.held(); !warnedHeld && n >= a.cfg.MaxHeldSamples {
			warnedHeld = true
			log.Warn("the job holds the most samples allowed while their tasks are unknown (AWX lags or does not answer); older ones go out with no task",
				"held", n, "max_held_samples", a.cfg.MaxHeldSamples)
			if !released {
				// AWX has not named the template yet: the server's
				// system setting alone decides until it does.
				if !asked && !decide("") {
					return false
				}
				released = true
				s.release()
			}
		}
		got, fin, ok := s.info()
		if !ok {
			return true
		}
		if !asked {
			asked = true
			if !decide(got.TemplateID) {
				return false
			}
			if !released {
				released = true
				s.release()
			}
		}
		got.Measured = o.measured
		if got != info {
			s.setInfo(got)
			info = got
		}
		final = fin
		return true
	}
	if !a.waitEmpty(ctx, o, update, log) {
		return true
	}
	s.stopSampling()

	// The AWX API lags the job by seconds: the last tasks' events, and the
	// final status, come after the container is gone.
	drain := a.cfg.DrainTimeout
	if ctx.Err() != nil {
		drain = stopFlushTimeout
	}
	deadline := time.NewTimer(drain)
	defer deadline.Stop()
	tick := time.NewTicker(a.cfg.AWXPollInterval)
	defer tick.Stop()
	stopping := ctx.Done()
	complete := false
	for waiting := true; waiting; {
		if !update() {
			return true
		}
		if complete = final && s.eventsComplete(); complete {
			break
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			if ctx.Err() == nil {
				log.Warn("the job's events are not complete; sending its samples with the tasks known", "waited", drain, "status", info.Status)
			}
			waiting = false
		case <-stopping:
			stopping = nil
			if drain != stopFlushTimeout {
				drain = stopFlushTimeout
				deadline.Reset(drain)
			}
		}
	}
	stopFollowing()
	if !asked && !released && !decide("") {
		// AWX never described the job: the system setting decides.
		return true
	}
	s.close()
	if ctx.Err() != nil && !complete {
		// Routine on a restart: not the job's end, and nothing to warn of.
		log.Info("agent stopping; the job's samples are sent with the tasks known, a restart picks it up again", "status", info.Status)
		return false
	}
	log.Info("job done", "status", info.Status, "template", info.TemplateID)
	return false
}

// waitEmpty returns true when the job has no process left (or its cgroup
// is gone), or ctx ends, calling update every poll; false as soon as
// update does.
func (a *agent) waitEmpty(ctx context.Context, o *opened, update func() bool, log *slog.Logger) bool {
	t := time.NewTicker(a.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-t.C:
			if !update() {
				return false
			}
			alive, err := o.alive()
			if err != nil {
				log.Debug("job's processes are gone", "err", err)
				return true
			}
			if !alive {
				return true
			}
		}
	}
}
