package agent

import (
	"context"
	"log/slog"
	"runtime/debug"
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
// The session sends nothing until the server's collection policy is
// known: it is asked as soon as AWX names the job's template. When it
// says no, the session is stopped, its samples dropped, and runJob
// returns declined. When AWX has not named the template by the time the
// job holds MaxHeldSamples, the samples go out (the policy is still asked
// later; what went out then stays on the server, which is logged); a job
// AWX never describes is collected.
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
	log.Info("sampling job", "measured", o.measured, "cgroup", t.cgroupDir)

	var info ansible.JobInfo
	final, warnedHeld, asked, released := false, false, false, false
	// update returns false once the policy declined the job.
	update := func() bool {
		if n := s.held(); !warnedHeld && n >= a.cfg.MaxHeldSamples {
			warnedHeld = true
			log.Warn("the job holds the most samples allowed while their tasks are unknown (AWX lags or does not answer); older ones go out with no task",
				"held", n, "max_held_samples", a.cfg.MaxHeldSamples)
			if !released {
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
			// Asked even while the agent stops (FetchPolicy gives up
			// after 3s): the job's held samples go out or not by it.
			if collect, reason := a.policies.decide(context.WithoutCancel(ctx), got.TemplateID, log); !collect {
				dropped, sent := s.discard()
				args := []any{"template", got.TemplateID, "dropped_samples", dropped}
				if sent > 0 {
					log.Info("not collecting: "+reason+"; the samples sent before AWX named the template stay on the server",
						append(args, "sent_samples", sent)...)
				} else {
					log.Info("not collecting: "+reason, args...)
				}
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
