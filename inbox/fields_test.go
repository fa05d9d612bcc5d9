package inbox_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// TestEventFieldsCoverEvent checks EventFields against Event itself: every
// field Event's JSON gives is shown by exactly one Field, in the order of
// Event's fields, so a field added to Event and not to EventFields (which
// show, the console's row page and list take their fields from) fails here.
func TestEventFieldsCoverEvent(t *testing.T) {
	var tags []string
	et := reflect.TypeFor[inbox.Event]()
	for i := range et.NumField() {
		sf := et.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			t.Errorf("Event.%s has no json name", sf.Name)
		}
		tags = append(tags, name)
	}
	var shown, names []string
	for _, f := range inbox.EventFields() {
		if f.Name == "" || f.Text == nil || len(f.JSON) == 0 {
			t.Errorf("field %+v: want a name, JSON keys and a Text", f)
			continue
		}
		if slices.Contains(names, f.Name) {
			t.Errorf("field %s is listed twice", f.Name)
		}
		names = append(names, f.Name)
		shown = append(shown, f.JSON...)
		f.Text(inbox.Event{}) // a zero row has text for each field
	}
	if !slices.Equal(shown, tags) {
		t.Errorf("EventFields show %v, Event's JSON has %v", shown, tags)
	}
}

// TestEventFieldsText checks the text of the fields whose writing is not
// the value's own: times, the delivery's timestamp, the lease.
func TestEventFieldsText(t *testing.T) {
	at := time.Date(2027, 1, 15, 8, 0, 0, 0, time.FixedZone("x", 3600))
	e := inbox.Event{DeliveryTS: 1800000000, ReceivedAt: at, LeaseOwner: "host:1:a", LeaseUntil: at}
	want := map[string]string{
		"delivery_ts":  "1800000000 (2027-01-15T08:00:00Z)",
		"received_at":  "2027-01-15T07:00:00Z",
		"lease":        "host:1:a until 2027-01-15T07:00:00Z",
		"done_at":      "",
		"next_attempt": "",
		"size":         "0",
	}
	for _, f := range inbox.EventFields() {
		if w, ok := want[f.Name]; ok && f.Text(e) != w {
			t.Errorf("%s = %q, want %q", f.Name, f.Text(e), w)
		}
	}
}
