package strictjson

import (
	"strings"
	"testing"
)

type request struct {
	JobID  string   `json:"job_id,omitempty"`
	JobIDs []string `json:"job_ids,omitempty"`
	Skip   string   `json:"-"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		body    string
		unknown bool
		want    string // the error's text holds it; "" for none
		jobID   string
	}{
		{body: `{"job_id":"x"}`, jobID: "x"},
		{body: ` {"job_id":"x","job_ids":["y"]} `, jobID: "x"},
		{body: `{"job_id":"x","JOB_ID":"y"}`, want: `key "JOB_ID": keys are case-sensitive`},
		{body: `{"Job_Id":"y"}`, unknown: true, want: `key "Job_Id": keys are case-sensitive`},
		{body: `{"job_id":"x","job_id":"y"}`, want: `key "job_id" given twice`},
		{body: `{"job":"x"}`, want: `unknown key "job"`},
		{body: `{"Skip":"x"}`, want: `unknown key "Skip"`},
		{body: `{"job":"x","job_id":"z"}`, unknown: true, jobID: "z"},
		{body: `{"job_id":1}`, want: `key "job_id": a JSON number where a string goes`},
		{body: `["job_id"]`, want: "not a JSON object"},
		{body: `{"job_id":"x"} {}`, want: "data after"},
		{body: `{"job_id":"x"`, want: "not a JSON object"},
	} {
		var got request
		err := Decode([]byte(tc.body), &got, tc.unknown)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.body, err, tc.want)
		case tc.want == "" && got.JobID != tc.jobID:
			t.Errorf("%s: job_id %q, want %q", tc.body, got.JobID, tc.jobID)
		}
	}
}
