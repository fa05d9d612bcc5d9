package inbox

// The landing rules: what a delivery does to the row that already holds
// its key. A store reads that row in its own way and asks here, so the
// rules live in one place for every store.

// Result is what Put did with one delivery.
type Result struct {
	Outcome Outcome
	ID      string // the row the delivery landed on
	Reason  Reason // set when Outcome is OutcomeParked
	// Response is the answer body saved on that row: the delivery's own on
	// a new row, the first accepted delivery's on a repeat; nil for none.
	Response []byte
}

// Landing is what a delivery does to the row that already holds its key.
type Landing int

// The landings of a delivery on an existing row.
const (
	// LandRevive: the row is parked (or dismissed) as received and the
	// delivery storable, so the delivery takes the row over (contract row
	// 17).
	LandRevive Landing = iota
	// LandRepeat: the same bytes, or the same job event: counted on the row
	// (contract row 15). A row the dispatcher parked holds a storable job
	// event, so it counts repeats like a new or done row: only a person
	// revives it.
	LandRepeat
	// LandBeside: something else; the delivery is parked beside the row,
	// keyed by its bytes (contract row 16); see Beside.
	LandBeside
)

// Land returns what d does to row, the row that holds d.Key. It reads the
// row's Status, Reason, SHA256, Event, JobStatus and Source only.
//
// A dismissed row is landed on as the parked row it was (it keeps its
// reason): a repeat is counted on it and it stays dismissed, so a test
// event sent again raises no alert; a storable delivery of the job whose
// row was parked on receipt revives it as it would the parked row (the
// dismissal was of the body the delivery replaces, and the job is work
// now), clearing the dismissal; anything else lands beside it, parked.
func Land(row Event, d Delivery) Landing {
	holdsJob := !row.Status.SetAside() || row.Reason.ByHandler()
	switch {
	case row.Source != SourceOf(d):
		// A Sume job_id that reads "<source>/<key>": never merged into
		// another source's row.
		return LandBeside
	case !holdsJob && d.Status == StatusNew:
		return LandRevive
	case row.SHA256 == d.SHA256,
		holdsJob && d.Status == StatusNew &&
			row.Event == d.Event && row.JobStatus == d.JobStatus:
		return LandRepeat
	}
	return LandBeside
}

// Beside returns d as it is kept when it lands beside the row that holds
// its key: keyed by its bytes within its source, and parked conflict unless
// it is parked already.
func Beside(d Delivery) Delivery {
	d.Key = RowID(d.Source, BodyKey(d.SHA256))
	if d.Status != StatusParked {
		d = d.park(ReasonConflict)
	}
	return d
}

// Fresh is the result of a delivery that made a row of its own.
func Fresh(d Delivery) Result {
	switch d.Status {
	case StatusParked:
		return Result{Outcome: OutcomeParked, ID: d.Key, Reason: d.Reason, Response: d.Response}
	case StatusIgnored:
		return Result{Outcome: OutcomeIgnored, ID: d.Key, Response: d.Response}
	default:
		return Result{Outcome: OutcomeStored, ID: d.Key, Response: d.Response}
	}
}

// NeedsExpectation reports whether d lands only if an expectation of its
// job is recorded: a new job of a source with expected_only. The store
// looks for the expectation (of SourceOf(d) and d.JobID, in any state) in
// the transaction d lands in, and lands Unexpected(d) when there is none.
func (d Delivery) NeedsExpectation() bool {
	return d.ExpectedOnly && d.Status == StatusNew && d.JobID != ""
}

// Unexpected is d, a job nobody expected at a source that takes only
// expected ones, as it is kept: parked unknown_job, so that nothing hands
// it on; reprocess brings it back.
func Unexpected(d Delivery) Delivery {
	d = d.park(ReasonUnknownJob)
	d.ExpectedOnly = false
	return d
}

// SourceOf returns the source d came through: DefaultSource when d.Source
// is empty.
func SourceOf(d Delivery) string { return d.source() }
