package receiver

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestEveryDeliveryFieldIsStored sends real requests through the handler,
// Sume jobs, a parked Sume event and a Vibe run, and reads their rows
// back: each field of inbox.Delivery that the stored row has under its
// name must hold a value on some row. A field added to both and left unset
// by the handler, which the store suite's own deliveries would fill, fails
// here.
func TestEveryDeliveryFieldIsStored(t *testing.T) {
	t.Parallel()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	e := newEnv(t, store)
	// A body too large for the payload carries its result_url instead.
	large := `{"event":"job.completed","job_id":"job_3","status":"COMPLETED","payload":null,"result_url":"https://cdn.example/r.json","error":{"code":"payload_too_large"}}`
	for _, body := range []string{completed, `{"event":"job.exploded","job_id":"job_2"}`, large} {
		r := signedRequest(body, testNow, testSecret)
		r.Header.Set("User-Agent", "Sume-Webhooks/1.0") // as a provider's request has it
		if w := e.do(t, r); w.Code != 204 {
			t.Fatalf("%s: %d", body, w.Code)
		}
	}
	vibe := sourceHandler(t, store, Config{Source: "vibe", Scheme: scheme.Vibe{}, HardCap: scheme.VibeMaxBody, Accepted: 202,
		Keys: []scheme.Secret{{Key: []byte(vibeSecret)}}})
	r := httptest.NewRequest("POST", "/webhooks/vibe", strings.NewReader(vibeBody))
	r.Header.Set("User-Agent", "Vibe/1.0")
	r.Header.Set(scheme.HeaderVibeCaller, "schedule")
	r.Header.Set(scheme.HeaderVibeSignature, scheme.SignVibe(vibeSecret, testNow.Unix(), []byte(vibeBody)))
	if w := serve(vibe, r); w.Code != 202 {
		t.Fatalf("vibe: %d", w.Code)
	}

	var rows []reflect.Value
	for _, id := range []string{"job_1", "job_2", "job_3", "vibe/run_vector"} {
		rows = append(rows, reflect.ValueOf(e.get(t, id)))
	}
	// The delivery's key is the row's id; the others share their names.
	named := map[string]string{"Key": "ID"}
	event := reflect.TypeFor[inbox.Event]()
	delivery := reflect.TypeFor[inbox.Delivery]()
	for i := range delivery.NumField() {
		name := delivery.Field(i).Name
		if n, ok := named[name]; ok {
			name = n
		}
		if _, ok := event.FieldByName(name); !ok {
			continue // what classifying uses, not stored (ExpectedOnly)
		}
		set := false
		for _, row := range rows {
			set = set || !row.FieldByName(name).IsZero()
		}
		if !set {
			t.Errorf("no row stored through the handler has its %s set: does the handler fill Delivery.%s?", name, delivery.Field(i).Name)
		}
	}
}
