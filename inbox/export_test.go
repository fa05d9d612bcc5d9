package inbox

import (
	"context"
	"time"
)

// The planning steps of Reprocess, for the tests of package inbox_test.
type (
	JobRows      = jobRows
	JobPlan      = jobPlan
	Reclassified = reclassified
)

var (
	Batches      = batches
	PlanJob      = planJob
	SortSelected = sortSelected
)

// UniqueIDs returns sel.IDs, each once, in the order first given.
func (sel Selection) UniqueIDs() []string { return sel.uniqueIDs() }

// CheckSelected is checkSelected.
func (sr SourceRules) CheckSelected(id string, status Status, source string) error {
	return sr.checkSelected(id, status, source)
}

// Apply is apply.
func (p jobPlan) Apply(ctx context.Context, tx ReprocessTx, current *Event, rep *ReprocessReport) error {
	return p.apply(ctx, tx, current, rep)
}

// NewPurgeReport is newPurgeReport.
func NewPurgeReport(sel PurgeSelection) PurgeReport { return newPurgeReport(sel) }

// CountDeleted is countDeleted.
func (r *PurgeReport) CountDeleted(step PurgeStep, n int64) { r.countDeleted(step, n) }

// Steps is steps.
func (sel PurgeSelection) Steps() []PurgeStep { return sel.steps() }

// CheckPollResults is checkPollResults.
func CheckPollResults(results []PollResult) error { return checkPollResults(results) }

// Normalized is normalized.
func (r Refusal) Normalized() Refusal { return r.normalized() }

// Startable is startable.
func Startable(jobs []Job, now, until time.Time) ([]Job, error) { return startable(jobs, now, until) }

// MarkStarted is markStarted.
func MarkStarted(j Job) Job { return markStarted(j) }

// AsOf is asOf.
func (e Expectation) AsOf(now time.Time) Expectation { return e.asOf(now) }

// The counting steps, for the tests of package inbox_test.
var (
	NewStats = newStats
)

// Count is count.
func (st *Stats) Count(g Group) { st.count(g) }
