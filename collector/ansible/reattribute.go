package ansible

// Reattribute returns job j with its samples attributed anew to the task
// starts of events, by the rule Read applies to a tree's own job events
// (see Read): a job whose samples were stored without events (counter 0)
// or with the wrong ones gets the tasks AWX's events name. The new job has
// j's ID, Source and Info, the tasks and last event of events, and every
// sample of j: the same times and values, regrouped per resource and task.
// Two samples of one resource in one millisecond that end up in one task
// keep the larger value (as Read keeps them), so the caller that needs
// every sample kept compares the counts. Neither j nor events is modified;
// the result shares no slice with them.
func Reattribute(j *Job, events []JobEvent) *Job {
	var samples []sample
	for _, s := range j.Series {
		r := uint8(resourceIndex(s.Resource))
		if int(r) >= len(resources) {
			continue // a resource Read never makes
		}
		for i, t := range s.Ts {
			samples = append(samples, sample{ms: t, value: s.Vs[i], resource: r, uuid: s.UUID, name: s.Task})
		}
	}
	out := buildJob(j.ID, j.Source, events, samples)
	out.Info = j.Info
	return out
}
