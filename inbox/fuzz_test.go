package inbox_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"inbox/inbox"
)

// FuzzClassify checks the classifier on any body: it never panics, keeps
// the bytes exactly, is deterministic, and agrees with a plain,
// case-sensitive reading of the JSON on what is an object, what its job_id
// and event are, and so which row and status the body gets.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		``, `null`, `[]`, `{}`, ` {"job_id":"job_1"}`, `{"job_id":"job_1"`, `not json`,
		`{"event":"job.completed","job_id":"job_1","status":"COMPLETED","payload":{"artifacts":[]}}`,
		`{"event":"job.failed","job_id":"job_2","status":"ERROR","error":{"code":"render_failed"}}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"error":{"code":"payload_too_large","result_url":"https://x/r"}}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"result_url":"https://x/top","error":{"code":"payload_too_large"}}`,
		`{"event":"webhook.test","request_id":"req_1"}`,
		`{"event":"job.exploded","job_id":"job_4"}`,
		`{"event":"job.completed","job_id":7}`, `{"event":"job.completed","job_id":""}`,
		`{"event":"job.completed","job_id":"a\u0000b"}`, `{"event":"job.completed","job_id":"\ud800"}`,
		`{"event":"job.completed","job_id":"a","job_id":"b"}`,
		`{"Event":"job.completed","JOB_ID":"job_5"}`,
		"{\"event\":\"job.completed\",\"job_id\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	rules := inbox.Rules{Events: []string{"job.completed", "job.failed", "job.canceled"}, MaxBody: 256}
	f.Fuzz(func(t *testing.T, body []byte) {
		kept := bytes.Clone(body)
		d := inbox.Classify("", inbox.Named{}, body, 1_800_000_000, rules)
		if !bytes.Equal(body, kept) || !bytes.Equal(d.Body, kept) {
			t.Fatal("the body was changed")
		}
		sum := sha256.Sum256(kept)
		if d.SHA256 != hex.EncodeToString(sum[:]) || d.DeliveryTS != 1_800_000_000 {
			t.Fatalf("sha256 %s, delivery_ts %d", d.SHA256, d.DeliveryTS)
		}
		if again := inbox.Classify("", inbox.Named{}, kept, 1_800_000_000, rules); again.Key != d.Key || again.Status != d.Status || again.Reason != d.Reason {
			t.Fatal("not deterministic")
		}

		// A plain reading: the same fields, matched by their exact names.
		var doc map[string]json.RawMessage
		isObject := json.Unmarshal(body, &doc) == nil && doc != nil
		str := func(k string) string {
			var s string
			if raw, ok := doc[k]; !ok || json.Unmarshal(raw, &s) != nil {
				return ""
			}
			return s
		}
		event, jobID := str("event"), str("job_id")
		usable := jobID != "" && len(jobID) <= 200 && utf8.ValidString(jobID) && !slices.ContainsFunc([]rune(jobID), func(r rune) bool {
			return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == utf8.RuneError
		})

		switch {
		case !isObject:
			if d.Status != inbox.StatusParked || d.Reason != inbox.ReasonUnparseable {
				t.Fatalf("not an object: %s %s", d.Status, d.Reason)
			}
		case event == inbox.EventTest:
			if d.Status != inbox.StatusIgnored || d.JobID != "" {
				t.Fatalf("test ping: %s, job %q", d.Status, d.JobID)
			}
		case !usable:
			if d.Status != inbox.StatusParked || d.Reason != inbox.ReasonMissingJobID || d.JobID != "" {
				t.Fatalf("no usable job_id (%q): %s %s, job %q", jobID, d.Status, d.Reason, d.JobID)
			}
		default:
			if d.JobID != jobID || d.Event != event {
				t.Fatalf("job %q, event %q; the body says %q, %q", d.JobID, d.Event, jobID, event)
			}
			if !slices.Contains(rules.Events, event) && d.Reason != inbox.ReasonUnknownEvent {
				t.Fatalf("event %q: reason %s, want unknown_event", event, d.Reason)
			}
		}
		switch d.Status {
		case inbox.StatusNew:
			if d.Reason != "" || len(body) > int(rules.MaxBody) || !slices.Contains(rules.Events, d.Event) {
				t.Fatalf("new: reason %q, %d bytes, event %q", d.Reason, len(body), d.Event)
			}
		case inbox.StatusParked:
			if !d.Reason.Valid() || d.Reason == inbox.ReasonConflict {
				t.Fatalf("parked for %q", d.Reason)
			}
		case inbox.StatusIgnored:
		default:
			t.Fatalf("status %q", d.Status)
		}
		// Every retry of a body lands on one row: the job's, or its bytes'.
		if want := inbox.BodyKey(d.SHA256); d.JobID != "" {
			want = d.JobID
			if d.Key != want {
				t.Fatalf("key %q, want %q", d.Key, want)
			}
		} else if d.Key != want {
			t.Fatalf("key %q, want %q", d.Key, want)
		}
	})
}
