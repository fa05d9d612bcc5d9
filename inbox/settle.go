package inbox

import (
	"errors"
	"fmt"
	"time"
)

// The checks a store makes before it settles or starts claimed rows, so
// that every store refuses the same calls with the same words, and writes
// nothing for them.

// CheckSettle refuses a Settle by owner of settled, claiming as claim
// asks, that no store may carry out: no owner; a claim (Max above 0) whose
// lease does not end after its Now; a settlement of an unknown fate; a
// park with an unknown reason; a release, or a park unattempted
// (FateExhausted), of an attempt Start counted.
func CheckSettle(owner string, settled []Settlement, claim Claim) error {
	if owner == "" {
		return errors.New("no owner")
	}
	if claim.Max > 0 && !claim.Until.After(claim.Now) {
		return fmt.Errorf("lease until %s is not after %s", claim.Until, claim.Now)
	}
	for _, st := range settled {
		switch st.Fate {
		case FateDone, FateRetry:
		case FateRelease:
			if st.Job.Started() {
				return fmt.Errorf("release %s: attempt %d has started", st.Job.ID, st.Job.Attempt)
			}
		case FatePark:
			if !st.Reason.Valid() {
				return fmt.Errorf("park %s: unknown reason %q", st.Job.ID, st.Reason)
			}
		case FateExhausted:
			if st.Job.Started() || !st.Reason.Valid() {
				return fmt.Errorf("park %s unattempted: attempt %d started or unknown reason %q", st.Job.ID, st.Job.Attempt, st.Reason)
			}
		default:
			return fmt.Errorf("settle %s: unknown fate %d", st.Job.ID, st.Fate)
		}
	}
	return nil
}

// Startable returns the jobs of a Start from now to until whose attempts
// it is to count, in the order given: each row once (two copies of one
// claim start once), none Start counted already. It fails when jobs are
// given and until is not after now.
func Startable(jobs []Job, now, until time.Time) ([]Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if !until.After(now) {
		return nil, fmt.Errorf("lease until %s is not after %s", until, now)
	}
	var todo []Job
	seen := map[string]bool{}
	for _, j := range jobs {
		if !j.Started() && !seen[j.ID] {
			seen[j.ID] = true
			todo = append(todo, j)
		}
	}
	return todo, nil
}
