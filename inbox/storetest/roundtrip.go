package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// runRoundTrip checks that every field of Event a Delivery carries, found
// by reflection (see carried), survives each way a store writes and reads
// a row: put (alone and several at once), Get, List and Each, a revive by
// a later delivery, and reprocess. Each field is set to a value of its
// own, so a column a store's insert, select, scan or update leaves out or
// swaps with another fails here with no assertion written for it.
func runRoundTrip(t *testing.T, o opener) {
	t.Run("put, get and list", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		alone := roundTripDelivery("alone", "rt", "job_alone")
		e.put(alone)
		together := []inbox.Delivery{
			roundTripDelivery("first", "rt", "job_first"),
			roundTripDelivery("second", "other", "job_second"),
			roundTripDelivery("third", inbox.DefaultSource, "job_third"),
		}
		e.putTogether(together...)
		listed, err := e.s.List(context.Background(), inbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		var each []inbox.Event
		if err := e.s.Each(context.Background(), inbox.Filter{}, func(r inbox.Event) error {
			each = append(each, r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, d := range append(together, alone) {
			sameCarried(t, "put then get "+d.Key, e.get(d.Key), d)
			// List and Each return rows without their bodies.
			sameCarried(t, "put then list "+d.Key, find(t, listed, d.Key), d, "Body")
			sameCarried(t, "put then each "+d.Key, find(t, each, d.Key), d, "Body")
		}
	})
	t.Run("text not UTF-8", func(t *testing.T) {
		t.Parallel()
		// Every carried text field that receipt does not check (a scheme
		// names the event; the body gives the rest) holds a NUL and a
		// byte that is not UTF-8: the put must succeed, on one row and
		// on several, and each field read back as given or as a store's
		// text column keeps it (each bad byte and NUL as U+FFFD), never
		// refused: a delivery refused for its bytes is refused on every
		// retry.
		e := o.fresh(t)
		alone := hostileText(roundTripDelivery("alone", "rt", "job_hostile"))
		e.put(alone)
		together := []inbox.Delivery{
			hostileText(roundTripDelivery("first", "rt", "job_hostile_first")),
			hostileText(roundTripDelivery("second", "other", "job_hostile_second")),
		}
		e.putTogether(together...)
		for _, d := range append(together, alone) {
			got := e.get(d.Key)
			g, w := reflect.ValueOf(got), reflect.ValueOf(d)
			for _, name := range hostileFields() {
				have, given := g.FieldByName(name).String(), w.FieldByName(name).String()
				if have != given && have != asValidText(given) {
					t.Errorf("%s: %s is %q, want %q or %q", d.Key, name, have, given, asValidText(given))
				}
			}
		}
	})
	t.Run("revive", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		for _, first := range []inbox.Delivery{
			roundTripDelivery("parked", "rt", "job_revive"),
			// A row saved with no answer takes the reviving delivery's.
			withField(roundTripDelivery("quiet", "rt", "job_quiet"), "Response", []byte(nil)),
		} {
			e.put(first)
			// The same job's row, so the pinned fields stay; a new row
			// has no result URL. Every other field is the later
			// delivery's, but the answer saved with the row, which every
			// repeat is given again.
			later := vary(first, "revive", "Source", "Key", "JobID", "Status", "Reason")
			later.Status, later.Reason, later.ResultURL = inbox.StatusNew, "", ""
			res := e.put(later)
			if res.Outcome != inbox.OutcomeRevived {
				t.Fatalf("the later delivery of %s: %s, want revived", first.Key, res.Outcome)
			}
			want := later
			if first.Response != nil {
				want.Response = first.Response
			}
			sameCarried(t, "revive "+first.Key, e.get(first.Key), want)
		}
	})
	t.Run("dismiss", func(t *testing.T) {
		t.Parallel()
		// Every dismissal field of Event (found by reflection, see
		// dismissFields) holds what the dismissal gave, text that is not
		// UTF-8 as a text column keeps it, through get, list and each; the
		// carried fields stay as put. A revive clears them all.
		e := o.fresh(t)
		d := roundTripDelivery("dismiss", "rt", "job_dismiss")
		e.put(d)
		at := t0.Add(time.Hour)
		e.clock.Set(at)
		dis := inbox.Dismissal{By: "dismiss-by\x00\xff", Note: "dismiss-note\x00\xff"}
		rep, err := e.s.Dismiss(context.Background(), inbox.DismissSelection{IDs: []string{d.Key}}, inbox.DismissOptions{Dismissal: dis})
		if err != nil || rep.Rows != 1 {
			t.Fatalf("dismiss: %+v, %v", rep, err)
		}
		want := map[string]any{"DismissedAt": at, "DismissedBy": dis.By, "DismissNote": dis.Note}
		check := func(what string, got inbox.Event, skip ...string) {
			t.Helper()
			for _, name := range dismissFields() {
				g := reflect.ValueOf(got).FieldByName(name).Interface()
				switch w := want[name].(type) {
				case string:
					if g != w && g != asValidText(w) {
						t.Errorf("%s: %s is %q, want %q", what, name, g, w)
					}
				case time.Time:
					if !g.(time.Time).Equal(w) {
						t.Errorf("%s: %s is %v, want %v", what, name, g, w)
					}
				default:
					t.Errorf("%s: Event.%s is a dismissal field this test gives no value", what, name)
				}
			}
			if got.Status != inbox.StatusDismissed {
				t.Errorf("%s: status %s, want dismissed", what, got.Status)
			}
			sameCarried(t, what, got, d, append(skip, "Status")...)
		}
		check("dismiss then get", e.get(d.Key))
		listed, err := e.s.List(context.Background(), inbox.Filter{Status: inbox.StatusDismissed})
		if err != nil {
			t.Fatal(err)
		}
		check("dismiss then list", find(t, listed, d.Key), "Body")
		var each []inbox.Event
		if err := e.s.Each(context.Background(), inbox.Filter{}, func(r inbox.Event) error {
			each = append(each, r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		check("dismiss then each", find(t, each, d.Key), "Body")

		later := vary(d, "revive", "Source", "Key", "JobID", "Status", "Reason")
		later.Status, later.Reason, later.ResultURL = inbox.StatusNew, "", ""
		if res := e.put(later); res.Outcome != inbox.OutcomeRevived {
			t.Fatalf("the later delivery: %s, want revived", res.Outcome)
		}
		got := reflect.ValueOf(e.get(d.Key))
		for _, name := range dismissFields() {
			if f := got.FieldByName(name); !f.IsZero() {
				t.Errorf("revived: %s is %v, want none", name, f.Interface())
			}
		}
	})
	t.Run("reprocess", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		// A body the first rules park unknown_event and the later ones
		// store; the row's other fields as a store could hold them, each
		// of its own. Reprocess writes what the body classifies as now,
		// and keeps what classification reads (source, body, sum,
		// timestamp) and the answer saved.
		body := `{"event":"job.roundtrip","job_id":"job_rp","status":"ROUNDTRIP"}`
		d := inbox.Classify(inbox.DefaultSource, inbox.Named{}, []byte(body), deliveryTS, rules)
		d = vary(d, "reprocess", "Source", "Key", "JobID", "Body", "SHA256", "DeliveryTS", "Status", "Reason")
		if d.Status != inbox.StatusParked || d.Reason != inbox.ReasonUnknownEvent {
			t.Fatalf("the body classifies as %s %s, want parked unknown_event", d.Status, d.Reason)
		}
		e.put(d)
		before := e.get(d.Key)
		sameCarried(t, "put before reprocess", before, d)
		sr := sume("job.roundtrip")
		if rep := e.reprocess(inbox.Selection{IDs: []string{d.Key}}, sr, false); rep.Moved != 1 {
			t.Fatalf("reprocess: %+v, want the row moved", rep)
		}
		want := inbox.Reclassify(before, sr[inbox.DefaultSource])
		want.Response = before.Response
		sameCarried(t, "reprocess", e.get(d.Key), want)
	})
}

// roundTripDelivery is a parked delivery of source's job whose carried
// fields each hold a value of their own, made of tag.
func roundTripDelivery(tag, source, job string) inbox.Delivery {
	d := vary(inbox.Delivery{}, tag, "Status", "Reason")
	d.Source = source
	d.Key = inbox.RowID(source, job)
	d.JobID = d.Key
	// Parked payload_too_large, the one kind of row with a result URL.
	d.Status, d.Reason = inbox.StatusParked, inbox.ReasonPayloadTooLarge
	return d
}

// checkedAtReceipt are the carried text fields whose values receipt
// decides or checks (the configured source, the row's key and job, the
// body's sum, the status and reason), which hold no byte a store could
// not keep as text.
var checkedAtReceipt = []string{"Source", "Key", "JobID", "SHA256", "Status", "Reason"}

// hostileFields returns the carried text fields not checkedAtReceipt: a
// field added to both Event and Delivery is in it.
func hostileFields() []string {
	var names []string
	dt := reflect.TypeFor[inbox.Delivery]()
	for _, name := range carried() {
		if f, _ := dt.FieldByName(name); f.Type.Kind() == reflect.String && !slices.Contains(checkedAtReceipt, name) {
			names = append(names, name)
		}
	}
	return names
}

// hostileText returns d with each of hostileFields holding a NUL and a
// byte that is not UTF-8.
func hostileText(d inbox.Delivery) inbox.Delivery {
	v := reflect.ValueOf(&d).Elem()
	for _, name := range hostileFields() {
		f := v.FieldByName(name)
		f.SetString(f.String() + "\x00\xff")
	}
	return d
}

// asValidText is s with each byte that is not UTF-8, and each NUL, as
// U+FFFD: what a text column that holds only UTF-8 keeps of it.
func asValidText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// dismissFields returns the names of Event's fields that record a
// dismissal: those named Dismiss*. A field added to them is in it.
func dismissFields() []string {
	var names []string
	for f := range reflect.TypeFor[inbox.Event]().Fields() {
		if strings.HasPrefix(f.Name, "Dismiss") {
			names = append(names, f.Name)
		}
	}
	return names
}

// carried returns the names of Event's exported fields that a Delivery
// carries too: a field of the same name and type. A field added to both
// is in it, so every check of this file covers it.
func carried() []string {
	dt := reflect.TypeFor[inbox.Delivery]()
	et := reflect.TypeFor[inbox.Event]()
	var names []string
	for i := range et.NumField() {
		f := et.Field(i)
		if df, ok := dt.FieldByName(f.Name); ok && f.IsExported() && df.Type == f.Type {
			names = append(names, f.Name)
		}
	}
	return names
}

// vary returns d with each carried field not in pinned, and Key unless
// pinned, set to a value of its own: text "<tag>-<field>", bytes the same,
// a number made of both. SHA256 is the sum of the body it is given with.
// It panics on a field of a kind it cannot vary, so a new kind of field is
// taught here rather than left out.
func vary(d inbox.Delivery, tag string, pinned ...string) inbox.Delivery {
	v := reflect.ValueOf(&d).Elem()
	for _, name := range append(carried(), "Key") {
		if slices.Contains(pinned, name) {
			continue
		}
		text := tag + "-" + strings.ToLower(name)
		f := v.FieldByName(name)
		switch {
		case f.Kind() == reflect.String:
			f.SetString(text)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
			f.SetBytes([]byte(text))
		case f.CanInt():
			h := fnv.New32a()
			h.Write([]byte(text))
			f.SetInt(int64(h.Sum32()) + 1)
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		default:
			panic(fmt.Sprintf("storetest: cannot vary Delivery.%s of type %s", name, f.Type()))
		}
	}
	if !slices.Contains(pinned, "SHA256") {
		sum := sha256.Sum256(d.Body)
		d.SHA256 = hex.EncodeToString(sum[:])
	}
	return d
}

// withField returns d with its field name set to value.
func withField(d inbox.Delivery, name string, value any) inbox.Delivery {
	reflect.ValueOf(&d).Elem().FieldByName(name).Set(reflect.ValueOf(value))
	return d
}

// sameCarried fails t for each carried field of got that is not want's
// (skip aside), and when got's id or size is not want's key and its
// body's length.
func sameCarried(t *testing.T, what string, got inbox.Event, want inbox.Delivery, skip ...string) {
	t.Helper()
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for _, name := range carried() {
		if slices.Contains(skip, name) {
			continue
		}
		gf, wf := g.FieldByName(name), w.FieldByName(name)
		same := reflect.DeepEqual(gf.Interface(), wf.Interface())
		if gb, ok := gf.Interface().([]byte); ok {
			same = bytes.Equal(gb, wf.Interface().([]byte)) && (gb == nil) == (wf.IsNil())
		}
		if !same {
			t.Errorf("%s: %s is %s, want %s", what, name, shown(gf), shown(wf))
		}
	}
	if got.ID != want.Key {
		t.Errorf("%s: id is %q, want %q", what, got.ID, want.Key)
	}
	if got.Size != int64(len(want.Body)) {
		t.Errorf("%s: size is %d, want %d", what, got.Size, len(want.Body))
	}
}

// shown is v as a failure message gives it: text and bytes quoted.
func shown(v reflect.Value) string {
	switch b := v.Interface().(type) {
	case []byte:
		if b == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", b)
	}
	if v.Kind() == reflect.String {
		return fmt.Sprintf("%q", v.String())
	}
	return fmt.Sprint(v.Interface())
}

// find returns the row id of rows; it fails t when there is none.
func find(t *testing.T, rows []inbox.Event, id string) inbox.Event {
	t.Helper()
	i := slices.IndexFunc(rows, func(r inbox.Event) bool { return r.ID == id })
	if i < 0 {
		t.Fatalf("no row %s among %d listed", id, len(rows))
	}
	return rows[i]
}
