package inbox

// The landing rules as pure functions, for a store that is not this
// package's SQLite store (postgres/): it reads the row that holds a key in
// its own way and asks here what a delivery does to it, so the rules stay
// in one place (merge.go).

// Landing is what a delivery does to the row that already holds its key.
type Landing int

// The landings of a delivery on an existing row.
const (
	// LandRevive: the row is parked as received and the delivery storable,
	// so the delivery takes the row over (contract row 17).
	LandRevive Landing = Landing(landRevive)
	// LandRepeat: counted on the row (contract row 15).
	LandRepeat Landing = Landing(landRepeat)
	// LandBeside: the delivery is parked beside the row, keyed by its bytes
	// (contract row 16); see Beside.
	LandBeside Landing = Landing(landBeside)
)

// Land returns what d does to row, the row that holds d.Key. It reads the
// row's Status, Reason, SHA256, Event, JobStatus and Source only.
func Land(row Event, d Delivery) Landing {
	return Landing(landOn(current{status: row.Status, reason: row.Reason, sha: row.SHA256,
		event: row.Event, jobStatus: row.JobStatus, source: row.Source}, d))
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
func Fresh(d Delivery) Result { return fresh(d) }

// SourceOf returns the source d came through: DefaultSource when d.Source
// is empty.
func SourceOf(d Delivery) string { return d.source() }

// Reclassify classifies the stored row e, body included, again under r, as
// Reprocess does: a DefaultSource body is read again; another source's row
// keeps the key and the event recorded at receipt.
func Reclassify(e Event, r Rules) Delivery { return reclassify(e, r) }
