package inbox

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// oracleClassifyBody is classifyBody as it was before it read the body in
// one pass: encoding/json into a map of raw fields, then each field
// decoded again. FuzzClassifyEquivalent holds the two to the same answer.
func oracleClassifyBody(body []byte, r Rules) Delivery {
	d := newDelivery(body)
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil || doc == nil {
		return d.park(ReasonUnparseable)
	}
	d.Event = oracleString(doc["event"])
	d.JobStatus = oracleString(doc["status"])

	if d.Event == EventTest {
		d.Status = StatusIgnored
		return d
	}
	d.JobID = oracleString(doc["job_id"])
	if !usableJobID(d.JobID) {
		d.JobID = ""
		return d.park(ReasonMissingJobID)
	}
	d.Key = d.JobID
	if !slices.Contains(r.Events, d.Event) {
		return d.park(ReasonUnknownEvent)
	}
	var errObj map[string]json.RawMessage
	if json.Unmarshal(doc["error"], &errObj) == nil &&
		oracleString(errObj["code"]) == "payload_too_large" && oracleNull(doc["payload"]) {
		d.ResultURL = oracleString(doc["result_url"])
		if d.ResultURL == "" {
			d.ResultURL = oracleString(errObj["result_url"])
		}
		return d.park(ReasonPayloadTooLarge)
	}
	if r.MaxBody > 0 && int64(len(body)) > r.MaxBody {
		return d.park(ReasonTooLarge)
	}
	d.Status = StatusNew
	return d
}

func oracleString(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func oracleNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// equivalenceRules are the rules both classifiers run under: the events
// the bodies name, and limits either side of their sizes.
var equivalenceRules = []Rules{
	{Events: []string{"job.completed", "job.failed", "job.canceled"}, MaxBody: 1 << 20},
	{Events: []string{"job.completed", "", "\ufffd"}, MaxBody: 40},
	{},
}

// equivalenceSeeds are bodies at the edges of what JSON is and of how the
// fields are read.
func equivalenceSeeds() []string {
	deep := func(n int, open, close string) string {
		return `{"job_id":"j","event":"job.completed","x":` + strings.Repeat(open, n) + strings.Repeat(close, n) + `}`
	}
	return []string{
		``, ` `, `null`, ` null `, `[]`, `{}`, `{} `, "\t{}\r\n", `{}{}`, `{},`, `{`, `}`, `"x"`, `1`, `true`,
		"\xef\xbb\xbf{}", `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{'a':1}`, `{"a":1 "b":2}`,
		`{"event":"job.completed","job_id":"job_1","status":"COMPLETED","payload":{"artifacts":[1,2.5e3,-0.1E-2,true,false,null,"s"]}}`,
		`{"event":"job.failed","job_id":"job_2","status":"ERROR","error":{"code":"render_failed"}}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"error":{"code":"payload_too_large","result_url":"https://x/r"}}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"result_url":"https://x/top","error":{"code":"payload_too_large"}}`,
		`{"event":"job.completed","job_id":"job_3","error":{"code":"payload_too_large"}}`,
		`{"event":"job.completed","job_id":"job_3","payload":{},"error":{"code":"payload_too_large"}}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"error":null}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"error":"payload_too_large"}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"error":{"code":"payload_too_large"},"error":{}}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"error":{"code":"payload_too_large","code":7}}`,
		`{"event":"job.completed","job_id":"job_3","payload" : null ,"error":{"code":"payload_too_large"},"payload":0}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"error":{"result_url":"u","code":"payload_too_large","result_url":1}}`,
		`{"event":"job.completed","job_id":"job_3","payload":null,"result_url":"a","result_url":[],"error":{"code":"payload_too_large","result_url":"b"}}`,
		`{"event":"webhook.test","request_id":"req_1"}`, `{"event":"webhook.test","job_id":"j"}`,
		`{"event":"job.exploded","job_id":"job_4"}`, `{"event":"","job_id":"job_4"}`,
		`{"event":"job.completed","job_id":7}`, `{"event":"job.completed","job_id":""}`, `{"event":"job.completed","job_id":null}`,
		`{"event":"job.completed","job_id":"a\u0000b"}`, `{"event":"job.completed","job_id":"\ud800"}`,
		`{"event":"job.completed","job_id":"\ud83d\ude00"}`, `{"event":"job.completed","job_id":"\ud83d\u0041"}`,
		`{"event":"job.completed","job_id":"\uDBFF\uDFFF\u00e9\/\b\f\n\r\t\"\\"}`, `{"event":"job.completed","job_id":"\u12"}`,
		`{"event":"job.completed","job_id":"\x"}`, `{"event":"job.completed","job_id":"sha256:abc"}`,
		`{"event":"job.completed","job_id":"a","job_id":"b"}`, `{"event":"job.completed","job_id":"a","job_id":1}`,
		`{"Event":"job.completed","JOB_ID":"job_5"}`, `{"ev\u0065nt":"job.completed","job\u005fid":"job_6"}`,
		`{"event\u0000":"job.completed","job_id":"job_7"}`, `{"job_id\n":"x"}`,
		"{\"event\":\"job.completed\",\"job_id\":\"\xff\"}", "{\"event\":\"job.\xffcompleted\",\"job_id\":\"j\"}",
		"{\"event\":\"job.completed\",\"job_id\":\"\xed\xa0\x80\"}", "{\"event\":\"job.completed\",\"job_id\":\"a\tb\"}",
		"{\"job_\xffid\":\"j\"}", "{\"event\":\"job.completed\",\"job_id\":\"\u00e9\u4e2d\"}",
		`{"event":"job.completed","job_id":"` + strings.Repeat("a", 200) + `"}`,
		`{"event":"job.completed","job_id":"` + strings.Repeat("a", 201) + `"}`,
		`{"n":-}`, `{"n":01}`, `{"n":1.}`, `{"n":.1}`, `{"n":1e}`, `{"n":1e+}`, `{"n":-0}`, `{"n":1E-7}`, `{"n":+1}`,
		`{"n":tru}`, `{"n":nul}`, `{"n":True}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":{"b":}}`,
		deep(maxDepth-1, "[", "]"), deep(maxDepth, "[", "]"), deep(maxDepth-1, `{"a":`, "}"),
		`{"error":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`,
		`{"error":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
	}
}

// FuzzClassifyEquivalent runs the one-pass classification and the
// encoding/json one it replaced on the same bodies: they agree on every
// field of the delivery. Run it for minutes when the reader changes:
// go test -fuzz FuzzClassifyEquivalent -fuzztime 3m ./inbox
func FuzzClassifyEquivalent(f *testing.F) {
	for _, s := range equivalenceSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		kept := bytes.Clone(body)
		for _, r := range equivalenceRules {
			got, want := classifyBody(body, r), oracleClassifyBody(kept, r)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("body %q, rules %+v:\n got %+v\nwant %+v", body, r, got, want)
			}
		}
		if !bytes.Equal(body, kept) {
			t.Fatal("the body was changed")
		}
	})
}

// TestClassifyAllocations checks what one pass saves: a 1 KiB delivery is
// classified with a few allocations (its hash, its key and the strings it
// keeps), where decoding into a map took dozens.
func TestClassifyAllocations(t *testing.T) {
	body := []byte(`{"event":"job.completed","job_id":"job_123","status":"COMPLETED","payload":{"pad":"` + strings.Repeat("x", 900) + `","n":[1,2,3]}}`)
	r := equivalenceRules[0]
	got := testing.AllocsPerRun(100, func() { classifyBody(body, r) })
	old := testing.AllocsPerRun(100, func() { oracleClassifyBody(body, r) })
	t.Logf("allocations per classification: %.0f, encoding/json into a map: %.0f", got, old)
	if got > 6 {
		t.Errorf("%.0f allocations per classification, want at most 6", got)
	}
}

// BenchmarkClassify classifies a 1 KiB Sume delivery in one pass, and as
// encoding/json into a map did (the oracle).
// Run: go test -run '^$' -bench Classify -benchmem ./inbox
func BenchmarkClassify(b *testing.B) {
	body := []byte(`{"event":"job.completed","job_id":"job_123","status":"COMPLETED","payload":{"pad":"` + strings.Repeat("x", 900) + `"}}`)
	r := equivalenceRules[0]
	b.Run("one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			classifyBody(body, r)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			oracleClassifyBody(body, r)
		}
	})
}
