package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode"
)

// EventTest is the provider's test ping. It names no job; it is kept as an
// ignored row so an operator can see that the endpoint works.
const EventTest = "webhook.test"

// maxJobIDLen bounds a job_id; a longer one is not usable as a key that
// operators type and see in tables.
const maxJobIDLen = 200

// Kind is how a source's deliveries are keyed, which its scheme decides.
type Kind int

// The kinds of source.
const (
	// KindBody: the body names its job (Sume's scheme): Classify reads the
	// job_id, the event and the status from the JSON.
	KindBody Kind = iota
	// KindKeyed: the scheme names each delivery's key and event (every
	// scheme but Sume's), given to Classify as Named.
	KindKeyed
)

// Rules are the settings classification depends on.
type Rules struct {
	// Kind is how the source's deliveries are keyed; the zero value reads
	// bodies as Sume's.
	Kind Kind
	// Events are the event names stored as jobs; any other is parked
	// unknown_event. For KindKeyed, empty stores every event.
	Events []string
	// MaxBody is the normal body limit in bytes; a larger verified body is
	// parked too_large. Zero means no limit.
	MaxBody int64
	// ByBody, for KindKeyed, keys every delivery by its body's sha256 (a
	// generic HMAC source with key_from = "sha256"): a Named key is
	// ignored, and the key is BodyKey of the body's sum. It is the one
	// record of that choice; reprocess keys a stored row by it as the
	// source does now.
	ByBody bool
	// ExpectedOnly stores a job only if an expectation of it is recorded
	// (inbox expect): the store parks any other unknown_job as it lands
	// (Delivery.NeedsExpectation). Reprocess does not ask.
	ExpectedOnly bool
}

// Named is what a KindKeyed source's scheme named of a verified delivery.
type Named struct {
	Key   string // the provider's idempotency key; "" when it names none
	Event string // the event name; "" when it names none
}

// Delivery is a verified body with what classification made of it: the row
// it belongs on and the status it asks for.
type Delivery struct {
	// Source is the configured source the delivery came through; "" is
	// DefaultSource.
	Source     string
	Key        string // the row's id: RowID of the job_id, or of "sha256:<hex>" when there is none
	JobID      string
	Status     Status // StatusNew, StatusParked or StatusIgnored
	Reason     Reason // set when Status is StatusParked
	Event      string
	JobStatus  string
	ResultURL  string
	Body       []byte
	SHA256     string
	DeliveryTS int64 // the signed delivery timestamp, Unix seconds
	// Response is the answer body the source saves with a new row and
	// gives again to every repeat (Vibe's); nil for none.
	Response []byte
	// ExpectedOnly is the source's Rules.ExpectedOnly, set by Classify on
	// a new job only.
	ExpectedOnly bool
}

// source returns the delivery's source, DefaultSource for "".
func (d Delivery) source() string {
	if d.Source == "" {
		return DefaultSource
	}
	return d.Source
}

// DefaultSource is the source whose rows keep their bare keys as ids: Sume,
// the first and default one.
const DefaultSource = "sume"

// RowID is the row id of key within source: the key itself for the default
// source, "<source>/<key>" for any other, so the rows of two sources never
// share an id (source names hold no "/").
func RowID(source, key string) string {
	if source == "" || source == DefaultSource {
		return key
	}
	return source + "/" + key
}

// KeyOf returns the key of the row id within source, RowID's inverse: the
// id itself for the default source, the part after "<source>/" for any
// other (the whole id when it lacks that prefix).
func KeyOf(source, id string) string {
	if source == "" || source == DefaultSource {
		return id
	}
	return strings.TrimPrefix(id, source+"/")
}

// Classify is the one place a row key is built. It decides what a
// verified body of source ("" is DefaultSource) is, by the source's kind:
//
// KindBody (Sume's) follows the receiver contract in order: unparseable,
// test ping, missing job_id, unknown event, payload too large, too large,
// storable; n is not read.
//
// KindKeyed takes the key and the event n names: a usable key and an
// event in r.Events (any event when r.Events is empty) make a new row; no
// usable key parks missing_key, an event outside the set parks
// unknown_event, a body above r.MaxBody parks too_large.
//
// Either way the delivery's Key and JobID are the row ids within source
// (RowID) of the job or key; a body with none is keyed by its sha256. It
// never fails: whatever the bytes are, they get a row and a status.
func Classify(source string, n Named, body []byte, deliveryTS int64, r Rules) Delivery {
	if source == "" {
		source = DefaultSource
	}
	var d Delivery
	if r.Kind == KindKeyed {
		d = classifyKeyed(n, body, r)
	} else {
		d = classifyBody(body, r)
	}
	d.Source, d.DeliveryTS = source, deliveryTS
	d.Key = RowID(source, d.Key)
	if d.JobID != "" {
		d.JobID = RowID(source, d.JobID)
	}
	d.ExpectedOnly = r.ExpectedOnly && d.Status == StatusNew && d.JobID != ""
	return d
}

// classifyKeyed classifies a body by the key and event its scheme named;
// Key and JobID are within the source.
func classifyKeyed(n Named, body []byte, r Rules) Delivery {
	d := newDelivery(body)
	d.Event = n.Event
	key := n.Key
	if r.ByBody {
		// The source's own choice of key, not one the sender wrote: a
		// sender-chosen key is never taken in the body-keyed space.
		key = d.Key
	} else if !usableJobID(key) {
		return d.park(ReasonMissingKey)
	}
	// The job is the key, so the key's own row has job_id = id and enters
	// no partial index, as a Sume job row, while a row parked beside it
	// names it (events_beside_job, purge, reprocess).
	d.JobID, d.Key = key, key
	switch {
	case len(r.Events) > 0 && !slices.Contains(r.Events, n.Event):
		return d.park(ReasonUnknownEvent)
	case r.MaxBody > 0 && int64(len(body)) > r.MaxBody:
		return d.park(ReasonTooLarge)
	}
	d.Status = StatusNew
	return d
}

// newDelivery is body keyed by its sha256, before classification.
func newDelivery(body []byte) Delivery {
	sum := sha256.Sum256(body)
	d := Delivery{Body: body, SHA256: hex.EncodeToString(sum[:])}
	d.Key = BodyKey(d.SHA256)
	return d
}

// BodyKey is the row id for a body that cannot be keyed by a job_id.
func BodyKey(sum string) string { return bodyKeyPrefix + sum }

// bodyKeyPrefix starts the id of every row keyed by its body's hash.
const bodyKeyPrefix = "sha256:"

// classifyBody reads a Sume body; Key and JobID are within the source.
func classifyBody(body []byte, r Rules) Delivery {
	d := newDelivery(body)

	// Fields by their exact names, as the provider writes them and as the
	// application will read them: "JOB_ID" or "Job_Id" is not job_id. Only
	// an object is read (a bare null is not); a repeated key keeps its last
	// value, as most JSON readers do. One pass reads the fields and checks
	// the rest of the body is JSON.
	f, ok := readSume(body)
	if !ok {
		return d.park(ReasonUnparseable)
	}
	d.Event = f.event
	d.JobStatus = f.status

	if d.Event == EventTest {
		d.Status = StatusIgnored
		return d
	}
	d.JobID = f.jobID
	if !usableJobID(d.JobID) {
		d.JobID = ""
		return d.park(ReasonMissingJobID)
	}
	d.Key = d.JobID
	if !slices.Contains(r.Events, d.Event) {
		return d.park(ReasonUnknownEvent)
	}
	if f.errCode == "payload_too_large" && f.payloadNull {
		d.ResultURL = f.resultURL
		if d.ResultURL == "" {
			d.ResultURL = f.errResultURL
		}
		return d.park(ReasonPayloadTooLarge)
	}
	if r.MaxBody > 0 && int64(len(body)) > r.MaxBody {
		return d.park(ReasonTooLarge)
	}
	d.Status = StatusNew
	return d
}

func (d Delivery) park(reason Reason) Delivery {
	d.Status = StatusParked
	d.Reason = reason
	return d
}

func usableJobID(id string) bool {
	// "sha256:" is where rows keyed by their body's hash live; a job taking
	// such an id could land on, and revive, a row that is not its own.
	if id == "" || len(id) > maxJobIDLen || strings.HasPrefix(id, bodyKeyPrefix) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}
