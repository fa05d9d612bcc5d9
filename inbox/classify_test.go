package inbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"inbox/inbox"
)

// keyed classifies body as a delivery of a KindKeyed source whose scheme
// named key and event.
func keyed(source, key, event string, body []byte, deliveryTS int64, r inbox.Rules) inbox.Delivery {
	r.Kind = inbox.KindKeyed
	return inbox.Classify(source, inbox.Named{Key: key, Event: event}, body, deliveryTS, r)
}

func sum(body string) string {
	s := sha256.Sum256([]byte(body))
	return hex.EncodeToString(s[:])
}

func TestClassifyKeyed(t *testing.T) {
	rules := inbox.Rules{Events: []string{"push"}, MaxBody: 10}
	tests := []struct {
		name, key, event, body string
		wantKey                string
		wantStatus             inbox.Status
		wantReason             inbox.Reason
	}{
		{"stored", "d1", "push", "{}", "gh/d1", inbox.StatusNew, ""},
		{"no key", "", "push", "{}", "gh/" + inbox.BodyKey("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"), inbox.StatusParked, inbox.ReasonMissingKey},
		{"control in key", "d\n1", "push", "{}", "gh/" + inbox.BodyKey("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"), inbox.StatusParked, inbox.ReasonMissingKey},
		{"unknown event", "d1", "ping", "{}", "gh/d1", inbox.StatusParked, inbox.ReasonUnknownEvent},
		{"too large", "d1", "push", "{\"a\":\"0123456789\"}", "gh/d1", inbox.StatusParked, inbox.ReasonTooLarge},
	}
	for _, tt := range tests {
		d := keyed("gh", tt.key, tt.event, []byte(tt.body), 1, rules)
		if d.Key != tt.wantKey || d.Status != tt.wantStatus || d.Reason != tt.wantReason || d.Source != "gh" {
			t.Errorf("%s: got %s %s %s %s, want %s %s %s gh", tt.name, d.Key, d.Status, d.Reason, d.Source, tt.wantKey, tt.wantStatus, tt.wantReason)
		}
	}
	if d := keyed("gh", "d1", "anything", []byte("x"), 1, inbox.Rules{}); d.Status != inbox.StatusNew {
		t.Errorf("no event set: %s, want every event stored", d.Status)
	}
	if got := inbox.RowID(inbox.DefaultSource, "job_1"); got != "job_1" {
		t.Errorf("RowID of the default source = %q, want the bare key", got)
	}
}

// TestClassifyKeysOnce checks the keys Classify builds for every kind of
// source, as the receiver and reprocess both take them: a row id and a
// job id within the source, a body key for a body that names no key.
func TestClassifyKeysOnce(t *testing.T) {
	job := `{"event":"job.completed","job_id":"j1","status":"COMPLETED"}`
	sume := inbox.Rules{Events: []string{"job.completed"}}
	keyedRules := inbox.Rules{Kind: inbox.KindKeyed}
	byBody := inbox.Rules{Kind: inbox.KindKeyed, ByBody: true}
	tests := []struct {
		name       string
		source     string
		n          inbox.Named
		body       string
		r          inbox.Rules
		wantKey    string
		wantJob    string
		wantStatus inbox.Status
		wantReason inbox.Reason
	}{
		{"sume job", "", inbox.Named{}, job, sume, "j1", "j1", inbox.StatusNew, ""},
		{"sume job, named source", "sume", inbox.Named{}, job, sume, "j1", "j1", inbox.StatusNew, ""},
		// A source of Sume's scheme under another name keys its rows as
		// any other source does: job and row within the source.
		{"sume scheme, source acme", "acme", inbox.Named{}, job, sume, "acme/j1", "acme/j1", inbox.StatusNew, ""},
		{"sume scheme, source acme, unparseable", "acme", inbox.Named{}, `nope`, sume, "acme/sha256:" + sum(`nope`), "", inbox.StatusParked, inbox.ReasonUnparseable},
		{"sume scheme, source acme, unknown event", "acme", inbox.Named{}, `{"event":"x","job_id":"j1"}`, sume, "acme/j1", "acme/j1", inbox.StatusParked, inbox.ReasonUnknownEvent},
		{"keyed", "gh", inbox.Named{Key: "d1", Event: "push"}, `{}`, keyedRules, "gh/d1", "gh/d1", inbox.StatusNew, ""},
		// key_from = "sha256": the body's sum is the key, stored.
		{"keyed by body", "hm", inbox.Named{Event: "e"}, `{"a":1}`, byBody, "hm/sha256:" + sum(`{"a":1}`), "hm/sha256:" + sum(`{"a":1}`), inbox.StatusNew, ""},
		{"keyed by body, default source", "", inbox.Named{}, `{"a":1}`, byBody, "sha256:" + sum(`{"a":1}`), "sha256:" + sum(`{"a":1}`), inbox.StatusNew, ""},
		{"keyed by body, unknown event", "hm", inbox.Named{Event: "x"}, `{}`, inbox.Rules{Kind: inbox.KindKeyed, Events: []string{"e"}, ByBody: true}, "hm/sha256:" + sum(`{}`), "hm/sha256:" + sum(`{}`), inbox.StatusParked, inbox.ReasonUnknownEvent},
		// A sender's own key in the body-key space is still refused.
		{"sender key sha256:", "hm", inbox.Named{Key: "sha256:" + sum(`{}`)}, `{}`, keyedRules, "hm/sha256:" + sum(`{}`), "", inbox.StatusParked, inbox.ReasonMissingKey},
		{"sender key sha256: ignored when by body", "hm", inbox.Named{Key: "sha256:forged"}, `{}`, byBody, "hm/sha256:" + sum(`{}`), "hm/sha256:" + sum(`{}`), inbox.StatusNew, ""},
		{"sume kind ignores Named", "", inbox.Named{Key: "other", Event: "x"}, job, sume, "j1", "j1", inbox.StatusNew, ""},
		// Rules that key every delivery by its body: no key named is needed.
		{"rules key by body", "hm", inbox.Named{Event: "e"}, `{"a":1}`, inbox.Rules{Kind: inbox.KindKeyed, ByBody: true}, "hm/sha256:" + sum(`{"a":1}`), "hm/sha256:" + sum(`{"a":1}`), inbox.StatusNew, ""},
	}
	for _, tt := range tests {
		d := inbox.Classify(tt.source, tt.n, []byte(tt.body), 1, tt.r)
		if d.Key != tt.wantKey || d.JobID != tt.wantJob || d.Status != tt.wantStatus || d.Reason != tt.wantReason {
			t.Errorf("%s: got key %q job %q %s %s, want %q %q %s %s", tt.name, d.Key, d.JobID, d.Status, d.Reason,
				tt.wantKey, tt.wantJob, tt.wantStatus, tt.wantReason)
		}
		// Reprocess classifies a stored row again: the same keys.
		row := inbox.Event{ID: d.Key, Source: inbox.SourceOf(d), JobID: d.JobID, Event: d.Event, Body: d.Body, SHA256: d.SHA256, DeliveryTS: d.DeliveryTS}
		again := inbox.Reclassify(row, tt.r)
		if again.Key != d.Key || again.JobID != d.JobID || again.Status != d.Status || again.Reason != d.Reason {
			t.Errorf("%s: reclassified as key %q job %q %s %s, want what receipt made: %q %q %s %s", tt.name,
				again.Key, again.JobID, again.Status, again.Reason, d.Key, d.JobID, d.Status, d.Reason)
		}
	}
}

// TestReclassifyByBody: a row parked missing_key before its source keyed
// by the body (no job_id) is keyed by its own sum under rules that do.
func TestReclassifyByBody(t *testing.T) {
	d := keyed("hm", "", "e", []byte(`{"a":1}`), 1, inbox.Rules{})
	if d.Status != inbox.StatusParked || d.Reason != inbox.ReasonMissingKey || d.JobID != "" {
		t.Fatalf("setup: %+v", d)
	}
	row := inbox.Event{ID: d.Key, Source: "hm", Event: "e", Body: d.Body, SHA256: d.SHA256}
	again := inbox.Reclassify(row, inbox.Rules{Kind: inbox.KindKeyed, ByBody: true})
	if again.Status != inbox.StatusNew || again.Key != d.Key || again.JobID != d.Key {
		t.Errorf("reclassified as %s %s key %q job %q, want new where it is, its job its id", again.Status, again.Reason, again.Key, again.JobID)
	}
}
