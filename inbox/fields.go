package inbox

import (
	"strconv"
	"time"
)

// Field is one of an Event's fields as the operator reads it: a line of
// inbox show and of the console's row page, and, when it has a Column, a
// column of inbox list's table. Every output that shows a row's fields
// takes them from EventFields, so they cannot differ.
type Field struct {
	// Name labels the field in show and on the row page.
	Name string
	// JSON are the keys Event's JSON gives the field under, in order: a
	// field shown on one line may join two (lease is lease_owner until
	// lease_until). A test checks these against Event's json tags, so a
	// field added to Event and not here fails it.
	JSON []string
	// Column is the field's heading in inbox list's table; "" when the
	// table leaves it out.
	Column string
	// Text is the field's value as text: "" when it has none, which each
	// output shows its own way ("-"). Stored text (an event name) is
	// returned as it is; the output escapes it.
	Text func(Event) string
}

// EventFields returns an Event's fields in the order show and the row
// page give them. The slice is the caller's to change.
func EventFields() []Field {
	return []Field{
		{Name: "id", JSON: []string{"id"}, Column: "ID", Text: func(e Event) string { return e.ID }},
		{Name: "source", JSON: []string{"source"}, Column: "SOURCE", Text: func(e Event) string { return e.Source }},
		{Name: "job_id", JSON: []string{"job_id"}, Text: func(e Event) string { return e.JobID }},
		{Name: "status", JSON: []string{"status"}, Column: "STATUS", Text: func(e Event) string { return string(e.Status) }},
		{Name: "reason", JSON: []string{"reason"}, Column: "REASON", Text: func(e Event) string { return string(e.Reason) }},
		{Name: "event", JSON: []string{"event"}, Column: "EVENT", Text: func(e Event) string { return e.Event }},
		{Name: "job_status", JSON: []string{"job_status"}, Column: "JOB STATUS", Text: func(e Event) string { return e.JobStatus }},
		{Name: "result_url", JSON: []string{"result_url"}, Text: func(e Event) string { return e.ResultURL }},
		{Name: "size", JSON: []string{"size"}, Column: "SIZE", Text: func(e Event) string { return strconv.FormatInt(e.Size, 10) }},
		{Name: "sha256", JSON: []string{"sha256"}, Text: func(e Event) string { return e.SHA256 }},
		{Name: "delivery_ts", JSON: []string{"delivery_ts"}, Text: deliveryTS},
		{Name: "received_at", JSON: []string{"received_at"}, Column: "RECEIVED", Text: func(e Event) string { return FormatTime(e.ReceivedAt) }},
		{Name: "deliveries", JSON: []string{"deliveries"}, Column: "DELIVERIES", Text: func(e Event) string { return strconv.FormatInt(e.Deliveries, 10) }},
		{Name: "last_seen_at", JSON: []string{"last_seen_at"}, Text: func(e Event) string { return FormatTime(e.LastSeenAt) }},
		{Name: "updated_at", JSON: []string{"updated_at"}, Text: func(e Event) string { return FormatTime(e.UpdatedAt) }},
		{Name: "attempts", JSON: []string{"attempts"}, Text: func(e Event) string { return strconv.FormatInt(e.Attempts, 10) }},
		{Name: "next_attempt", JSON: []string{"next_attempt_at"}, Text: func(e Event) string { return FormatTime(e.NextAttemptAt) }},
		{Name: "lease", JSON: []string{"lease_owner", "lease_until"}, Text: lease},
		{Name: "last_error", JSON: []string{"last_error"}, Text: func(e Event) string { return e.LastError }},
		{Name: "done_at", JSON: []string{"done_at"}, Text: func(e Event) string { return FormatTime(e.DoneAt) }},
		{Name: "dismissed", JSON: []string{"dismissed_at", "dismissed_by"}, Text: dismissed},
		{Name: "dismiss_note", JSON: []string{"dismiss_note"}, Text: func(e Event) string { return e.DismissNote }},
	}
}

// TimeFormat is how the operator's outputs write a time: UTC, to the
// second.
const TimeFormat = "2006-01-02T15:04:05Z"

// FormatTime is t in TimeFormat; "" when t is zero.
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// deliveryTS is the delivery's own timestamp, and the time it stands for.
func deliveryTS(e Event) string {
	return strconv.FormatInt(e.DeliveryTS, 10) + " (" + time.Unix(e.DeliveryTS, 0).UTC().Format(TimeFormat) + ")"
}

// lease is who holds the row and until when; "" when nobody does.
func lease(e Event) string {
	if e.LeaseOwner == "" {
		return ""
	}
	return e.LeaseOwner + " until " + e.LeaseUntil.UTC().Format(TimeFormat)
}

// dismissed is when the row was dismissed and by whom; "" when it was
// not.
func dismissed(e Event) string {
	if e.DismissedAt.IsZero() {
		return ""
	}
	return FormatTime(e.DismissedAt) + " by " + e.DismissedBy
}
