package inbox

import "time"

// Alert is what inbox alert last reported of one finding: a row of the
// store's alerts table, kept while the finding is open and deleted once
// its resolve has been reported.
type Alert struct {
	// Scope is the check that found it, with the settings that decide
	// what it finds and where it reports: a run reads and resolves the
	// findings of its own scope only, so two cron lines with different
	// checks never resolve each other's.
	Scope string
	// Finding names what was found within the scope ("unknown_event
	// parked longer than 24h", "quiet vibe"), the same from run to run.
	Finding string
	// OpenedAt is when it was first reported.
	OpenedAt time.Time
	// Count is its size when last reported: rows, requests, refusals; 1
	// for a finding that has none.
	Count int64
	// ReportedAt is when it was last reported (opened, grown, repeated).
	ReportedAt time.Time
	// Rev counts the writes of the row: a swap holds only while the row
	// still has the Rev it was read with.
	Rev int64
}

// AlertSwap is one conditional write of an alerts row. With Old nil it
// inserts New unless a row of New's scope and finding exists; with New
// nil it deletes Old; with both it replaces Old by New (the same scope
// and finding). Old holds only while the stored row has Old's Rev, so of
// two runs that read the same row and swap it, one holds: the other
// learns that its change was made, and reported, by the first.
type AlertSwap struct{ Old, New *Alert }
