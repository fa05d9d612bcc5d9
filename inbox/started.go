package inbox

// The attempt bookkeeping of a claimed Job: Start marks the jobs it
// counted, and a store's claim guard matches the attempt count a claim
// holds.

// markStarted returns j as Start returns a job whose attempt it counted.
func markStarted(j Job) Job {
	j.started = true
	return j
}

// Started reports whether Start counted j's attempt.
func (j Job) Started() bool { return j.started }

// HeldAttempts is the attempt count of j's row while j's claim holds:
// Attempt once Start counted it, one less before.
func (j Job) HeldAttempts() int { return j.held() }
