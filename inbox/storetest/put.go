package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
)

func sha(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

func runPut(t *testing.T, o opener) {
	t.Run("stored", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		body := jobBody("job_1")
		res := e.put(job("job_1"))
		if res.Outcome != inbox.OutcomeStored || res.ID != "job_1" || res.Reason != "" || res.Response != nil {
			t.Fatalf("result = %+v, want stored on job_1", res)
		}
		r := e.get("job_1")
		want := inbox.Event{ID: "job_1", Source: inbox.DefaultSource, JobID: "job_1", Status: inbox.StatusNew,
			Event: "job.completed", JobStatus: "COMPLETED", Body: []byte(body), Size: int64(len(body)),
			SHA256: sha(body), DeliveryTS: deliveryTS, ReceivedAt: t0, Deliveries: 1, LastSeenAt: t0, UpdatedAt: t0}
		if fmt.Sprintf("%+v", r) != fmt.Sprintf("%+v", want) {
			t.Errorf("row =\n%+v\nwant\n%+v", r, want)
		}
	})

	t.Run("raw bytes kept exactly", func(t *testing.T) {
		t.Parallel()
		// Key order, spaces, duplicate keys, escapes, a NUL and bytes that
		// are not UTF-8: a store that parsed the JSON would change them.
		e := o.fresh(t)
		for _, body := range []string{
			"{ \"status\":\"COMPLETED\",  \"job_id\":\"job_b\", \"event\":\"job.completed\", \"x\":1, \"x\":2, \"u\":\"\\u00e9\" }\n",
			"\xff\xfe not json \x00 at all",
			"",
		} {
			d := classify(body)
			res := e.put(d)
			r := e.get(res.ID)
			if !bytes.Equal(r.Body, []byte(body)) || r.Size != int64(len(body)) || r.SHA256 != sha(body) {
				t.Errorf("%q came back as %q (size %d, sha %s)", body, r.Body, r.Size, r.SHA256)
			}
		}
	})

	t.Run("any bytes in the fields read out of a delivery", func(t *testing.T) {
		t.Parallel()
		// A NUL, or bytes that are not UTF-8, in the event, the status or
		// a header's event name: stored, the body kept exactly, and a repeat
		// in other bytes still counted on the row.
		e := o.fresh(t)
		nul := `{"event":"job.completed","job_id":"job_nul","status":"COMP\u0000LETED"}`
		if res := e.put(classify(nul)); res.Outcome != inbox.OutcomeStored {
			t.Fatalf("NUL in the status: %+v, want stored", res)
		}
		if res := e.put(classify(`{"job_id":"job_nul", "event":"job.completed","status":"COMP\u0000LETED"}`)); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("its repeat in other bytes: %+v, want duplicate", res)
		}
		odd := `{"event":"job.\u0000x","job_id":"job_odd"}`
		if res := e.put(classify(odd)); res.Outcome != inbox.OutcomeParked || res.Reason != inbox.ReasonUnknownEvent {
			t.Errorf("NUL in the event: %+v, want parked unknown_event", res)
		}
		header := keyed("gh", "d9", "pu\xffsh\x00", []byte("{\"a\":\"\xff\"}"), deliveryTS, inbox.Rules{})
		if res := e.put(header); res.Outcome != inbox.OutcomeStored {
			t.Fatalf("bad bytes in a header's event: %+v, want stored", res)
		}
		again := keyed("gh", "d9", "pu\xffsh\x00", []byte(`{"a":2}`), deliveryTS, inbox.Rules{})
		if res := e.put(again); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("its repeat: %+v, want duplicate", res)
		}
		for id, body := range map[string]string{"job_nul": nul, "job_odd": odd, "gh/d9": "{\"a\":\"\xff\"}"} {
			if r := e.get(id); string(r.Body) != body || r.Deliveries != map[bool]int64{true: 2, false: 1}[id != "job_odd"] {
				t.Errorf("%s = %+v, body %q, want %q", id, r, r.Body, body)
			}
		}
	})

	t.Run("repeat counted", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.clock.Add(time.Minute)
		for range 2 {
			if res := e.put(job("job_1")); res.Outcome != inbox.OutcomeDuplicate || res.ID != "job_1" {
				t.Fatalf("repeat = %+v, want duplicate on job_1", res)
			}
		}
		r := e.get("job_1")
		if r.Deliveries != 3 || !r.LastSeenAt.Equal(t0.Add(time.Minute)) || !r.ReceivedAt.Equal(t0) || !r.UpdatedAt.Equal(t0) {
			t.Errorf("row = %+v, want 3 deliveries, last seen a minute after it was received", r)
		}
		// The same job event in other bytes (a re-serialized body) is the same job.
		other := classify(`{"job_id":"job_1","status":"COMPLETED","event":"job.completed"}`)
		if res := e.put(other); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("same event in other bytes = %+v, want duplicate", res)
		}
		if r := e.get("job_1"); r.Deliveries != 4 || r.SHA256 != sha(jobBody("job_1")) {
			t.Errorf("row = %+v, want 4 deliveries and the first body", r)
		}
	})

	t.Run("parked with each reason", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		small := inbox.Rules{Events: rules.Events, MaxBody: 80}
		push := inbox.Rules{Events: []string{"push"}}
		tooLarge := `{"event":"job.completed","job_id":"job_big","status":"COMPLETED","payload":{"pad":"` + strings.Repeat("x", 100) + `"}}`
		ptl := `{"event":"job.completed","job_id":"job_ptl","status":"COMPLETED","payload":null,"error":{"code":"payload_too_large","result_url":"https://api.example/r/1"}}`
		for _, tt := range []struct {
			name   string
			d      inbox.Delivery
			key    string
			reason inbox.Reason
		}{
			{"not json", classify(`not json`), inbox.BodyKey(sha(`not json`)), inbox.ReasonUnparseable},
			{"empty", classify(``), inbox.BodyKey(sha(``)), inbox.ReasonUnparseable},
			{"an array", classify(`[1]`), inbox.BodyKey(sha(`[1]`)), inbox.ReasonUnparseable},
			{"no job_id", classify(`{"event":"job.completed"}`), inbox.BodyKey(sha(`{"event":"job.completed"}`)), inbox.ReasonMissingJobID},
			{"unknown event", classify(`{"event":"job.exploded","job_id":"job_x"}`), "job_x", inbox.ReasonUnknownEvent},
			{"payload too large", classify(ptl), "job_ptl", inbox.ReasonPayloadTooLarge},
			{"too large", inbox.Classify("", inbox.Named{}, []byte(tooLarge), deliveryTS, small), "job_big", inbox.ReasonTooLarge},
			{"missing key", keyed("gh", "", "push", []byte(`{"ref":"main"}`), deliveryTS, push),
				"gh/" + inbox.BodyKey(sha(`{"ref":"main"}`)), inbox.ReasonMissingKey},
		} {
			res := e.put(tt.d)
			if res.Outcome != inbox.OutcomeParked || res.Reason != tt.reason || res.ID != tt.key {
				t.Errorf("%s: result = %+v, want parked %s on %s", tt.name, res, tt.reason, tt.key)
				continue
			}
			r := e.get(tt.key)
			if r.Status != inbox.StatusParked || r.Reason != tt.reason || r.Deliveries != 1 {
				t.Errorf("%s: row = %+v, want parked %s", tt.name, r, tt.reason)
			}
			// A retry of the same bytes lands on the same row.
			if res := e.put(tt.d); res.Outcome != inbox.OutcomeDuplicate || res.ID != tt.key {
				t.Errorf("%s: retry = %+v, want duplicate on %s", tt.name, res, tt.key)
			}
		}
		if r := e.get("job_ptl"); r.ResultURL != "https://api.example/r/1" {
			t.Errorf("payload_too_large row kept result URL %q", r.ResultURL)
		}
		if r := e.get("job_x"); r.Event != "job.exploded" || r.JobID != "job_x" {
			t.Errorf("unknown_event row = %+v, want its event and job kept", r)
		}
	})

	t.Run("ignored", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		ping := `{"event":"webhook.test","request_id":"req_1"}`
		res := e.put(classify(ping))
		if res.Outcome != inbox.OutcomeIgnored || res.ID != inbox.BodyKey(sha(ping)) {
			t.Fatalf("test ping = %+v, want ignored under its sha256", res)
		}
		if r := e.get(res.ID); r.Status != inbox.StatusIgnored || r.Reason != "" {
			t.Errorf("row = %+v, want ignored with no reason", r)
		}
		if got := e.claim("a", t0, time.Minute, 10); len(got) != 0 {
			t.Errorf("claimed a test ping: %v", ids(got))
		}
	})

	t.Run("conflict parked beside", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		failed := `{"event":"job.failed","job_id":"job_1","status":"ERROR"}`
		res := e.put(classify(failed))
		if res.Outcome != inbox.OutcomeParked || res.Reason != inbox.ReasonConflict || res.ID != inbox.BodyKey(sha(failed)) {
			t.Fatalf("other event = %+v, want parked conflict under its sha256", res)
		}
		if r := e.get(res.ID); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonConflict ||
			r.JobID != "job_1" || r.Event != "job.failed" || string(r.Body) != failed {
			t.Errorf("beside row = %+v", r)
		}
		if res := e.put(classify(failed)); res.Outcome != inbox.OutcomeDuplicate || res.ID != inbox.BodyKey(sha(failed)) {
			t.Errorf("the conflict again = %+v, want duplicate on its row", res)
		}
		if r := e.get(inbox.BodyKey(sha(failed))); r.Deliveries != 2 {
			t.Errorf("beside row has %d deliveries, want 2", r.Deliveries)
		}
		if r := e.get("job_1"); r.Deliveries != 1 || r.Event != "job.completed" || r.Status != inbox.StatusNew {
			t.Errorf("job row changed: %+v", r)
		}
		// Another status of the same event is another event too.
		otherStatus := `{"event":"job.completed","job_id":"job_1","status":"ERROR"}`
		if res := e.put(classify(otherStatus)); res.Reason != inbox.ReasonConflict {
			t.Errorf("other status = %+v, want parked conflict", res)
		}
		// A parked delivery of the job's id that is not its bytes is beside it too,
		// keeping its own reason.
		odd := `{"event":"job.exploded","job_id":"job_1"}`
		if res := e.put(classify(odd)); res.Reason != inbox.ReasonUnknownEvent || res.ID != inbox.BodyKey(sha(odd)) {
			t.Errorf("unknown event of a stored job = %+v, want parked unknown_event beside it", res)
		}
	})

	t.Run("revived", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		exploded := `{"event":"job.exploded","job_id":"job_1"}`
		e.put(classify(exploded))
		e.clock.Add(time.Second)
		// Another parked delivery of the job leaves the row parked, beside it.
		if res := e.put(classify(`{"event":"job.imploded","job_id":"job_1"}`)); res.Outcome != inbox.OutcomeParked || res.ID == "job_1" {
			t.Errorf("another parked delivery = %+v, want parked beside", res)
		}
		e.clock.Add(time.Second)
		res := e.put(job("job_1"))
		if res.Outcome != inbox.OutcomeRevived || res.ID != "job_1" {
			t.Fatalf("storable delivery onto a parked row = %+v, want revived", res)
		}
		r := e.get("job_1")
		if r.Status != inbox.StatusNew || r.Reason != "" || r.Event != "job.completed" || string(r.Body) != jobBody("job_1") ||
			r.Deliveries != 2 || !r.UpdatedAt.Equal(t0.Add(2*time.Second)) || !r.ReceivedAt.Equal(t0) {
			t.Errorf("revived row = %+v, want new with the storable body, 2 deliveries", r)
		}
		if got := ids(e.claim("a", t0.Add(2*time.Second), time.Minute, 10)); len(got) != 1 || got[0] != "job_1#1" {
			t.Errorf("claim after the revival = %v, want job_1 at attempt 1", got)
		}
		if res := e.put(job("job_1")); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("a repeat after the revival = %+v, want duplicate", res)
		}
	})

	t.Run("sources keep their rows and saved responses", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		vibe := keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"attempt":1}`), 1, inbox.Rules{})
		vibe.Response = []byte(`{"accepted":true}`)
		if res := e.put(vibe); res.Outcome != inbox.OutcomeStored || res.ID != "vibe/run_1" || string(res.Response) != `{"accepted":true}` {
			t.Fatalf("first vibe delivery: %+v", res)
		}
		again := keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"attempt":2}`), 2, inbox.Rules{})
		again.Response = []byte(`{"other":true}`)
		if res := e.put(again); res.Outcome != inbox.OutcomeDuplicate || string(res.Response) != `{"accepted":true}` {
			t.Errorf("repeat: %+v, want a duplicate answered with the saved response", res)
		}
		if res := e.put(keyed("gh", "run_1", "push", []byte(`{}`), 1, inbox.Rules{})); res.ID != "gh/run_1" || res.Outcome != inbox.OutcomeStored || res.Response != nil {
			t.Errorf("same key, other source: %+v", res)
		}
		// A Sume job_id "vibe/run_1" collides with the vibe row's id: parked
		// beside it, never counted on it.
		sume := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.completed","job_id":"vibe/run_1"}`), 1, inbox.Rules{Events: []string{"job.completed"}})
		if res := e.put(sume); res.Outcome != inbox.OutcomeParked || res.Reason != inbox.ReasonConflict {
			t.Errorf("sume job_id naming a vibe row: %+v, want parked conflict", res)
		}
		r := e.get("vibe/run_1")
		if r.Source != "vibe" || r.Deliveries != 2 || string(r.Response) != `{"accepted":true}` || string(r.Body) != `{"attempt":1}` {
			t.Errorf("vibe row: source %s deliveries %d response %s body %s", r.Source, r.Deliveries, r.Response, r.Body)
		}
		list, err := e.s.List(context.Background(), inbox.Filter{Source: "gh"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != "gh/run_1" {
			t.Errorf("list --source gh: %+v", list)
		}
		st := e.stats()
		if st.BySource["vibe"][inbox.StatusNew] != 1 || st.BySource["sume"][inbox.StatusParked] != 1 || st.BySource["gh"][inbox.StatusNew] != 1 {
			t.Errorf("stats by source: %v", st.BySource)
		}
	})

	t.Run("saved response kept through a revival", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		only := inbox.Rules{Events: []string{"scheduled_job.run"}}
		first := keyed("vibe", "run_1", "other", []byte(`{"a":1}`), 1, only)
		first.Response = []byte(`{"accepted":1}`)
		if res := e.put(first); res.Outcome != inbox.OutcomeParked || string(res.Response) != `{"accepted":1}` {
			t.Fatalf("parked vibe delivery = %+v", res)
		}
		second := keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"a":2}`), 2, only)
		second.Response = []byte(`{"accepted":2}`)
		if res := e.put(second); res.Outcome != inbox.OutcomeRevived || string(res.Response) != `{"accepted":1}` {
			t.Errorf("revival = %+v, want the first saved response", res)
		}
		if r := e.get("vibe/run_1"); string(r.Response) != `{"accepted":1}` || string(r.Body) != `{"a":2}` {
			t.Errorf("row response %s body %s", r.Response, r.Body)
		}
		// A revival of a row saved with no response saves the delivery's.
		none := keyed("vibe", "run_2", "other", []byte(`{"b":1}`), 1, only)
		e.put(none)
		withOne := keyed("vibe", "run_2", "scheduled_job.run", []byte(`{"b":2}`), 2, only)
		withOne.Response = []byte(`{"accepted":3}`)
		if res := e.put(withOne); res.Outcome != inbox.OutcomeRevived || string(res.Response) != `{"accepted":3}` {
			t.Errorf("revival of a row with no response = %+v", res)
		}
		if r := e.get("vibe/run_2"); string(r.Response) != `{"accepted":3}` {
			t.Errorf("row response %s", r.Response)
		}
	})

	t.Run("group commit", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		const n = 400
		var wg sync.WaitGroup
		results := make([]inbox.Result, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				// Every id is sent twice: i and i+n/2 share one.
				results[i], errs[i] = e.s.Put(context.Background(), job(fmt.Sprintf("job_%d", i%(n/2))))
			})
		}
		wg.Wait()
		outcomes := map[inbox.Outcome]int{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("put %d: %v", i, errs[i])
			}
			outcomes[results[i].Outcome]++
		}
		if outcomes[inbox.OutcomeStored] != n/2 || outcomes[inbox.OutcomeDuplicate] != n/2 {
			t.Errorf("outcomes = %v, want %d stored and %d duplicate", outcomes, n/2, n/2)
		}
		rows, err := e.s.List(context.Background(), inbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n/2 {
			t.Fatalf("got %d rows, want %d", len(rows), n/2)
		}
		for _, r := range rows {
			if r.Deliveries != 2 {
				t.Fatalf("row %s has %d deliveries, want 2", r.ID, r.Deliveries)
			}
		}
	})

	t.Run("concurrent deliveries of one job", func(t *testing.T) {
		t.Parallel()
		// Repeats and other events of one job at once, as a provider's
		// retries and a replay arrive together: one job row, one row beside
		// it per other body, every delivery counted once.
		e := o.fresh(t)
		const each = 30
		failed := `{"event":"job.failed","job_id":"job_1","status":"ERROR"}`
		exploded := `{"event":"job.exploded","job_id":"job_1"}`
		var wg sync.WaitGroup
		errs := make(chan error, 3*each)
		for range each {
			for _, b := range []string{jobBody("job_1"), failed, exploded} {
				wg.Go(func() {
					if _, err := e.s.Put(context.Background(), classify(b)); err != nil {
						errs <- err
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		rows, err := e.s.List(context.Background(), inbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, r := range rows {
			total += r.Deliveries
		}
		if total != 3*each || len(rows) < 2 || len(rows) > 3 {
			t.Errorf("%d rows holding %d deliveries, want 2 or 3 rows holding %d", len(rows), total, 3*each)
		}
		// The first storable body to arrive holds the job's key (taking it
		// over from a parked one); the other storable body is parked beside
		// it, every one of its deliveries counted there.
		r := e.get("job_1")
		other := failed
		if r.Event == "job.failed" {
			other = jobBody("job_1")
		}
		if r.Status != inbox.StatusNew || (r.Event != "job.completed" && r.Event != "job.failed") {
			t.Errorf("job row = %+v, want new, holding a storable body", r)
		}
		if r := e.get(inbox.BodyKey(sha(other))); r.Reason != inbox.ReasonConflict || r.Deliveries != each {
			t.Errorf("conflict row = %+v, want %d deliveries", r, each)
		}
	})

	t.Run("after close", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		if err := e.s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.Put(context.Background(), job("job_1")); !errors.Is(err, inbox.ErrClosed) {
			t.Errorf("Put after Close: %v, want ErrClosed", err)
		}
	})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		// Ping commits beside the deliveries, leaves no row to see, and
		// fails once the store is closed.
		e := o.fresh(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Go(func() {
				if i%2 == 0 {
					errs[i] = e.s.Ping(ctx)
					return
				}
				_, errs[i] = e.s.Put(ctx, job(fmt.Sprintf("job_%d", i)))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("ping or put %d: %v", i, err)
			}
		}
		if n, err := e.s.Count(ctx, inbox.Filter{}); err != nil || n != 10 {
			t.Errorf("rows after pings: %d %v, want the 10 deliveries", n, err)
		}
		if err := e.s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Ping(ctx); err == nil {
			t.Error("ping after close: no error")
		}
	})
}
