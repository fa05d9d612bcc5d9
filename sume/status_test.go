package sume

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestJobStatus reads a job's status from a stand-in API: the path, the
// bearer key, a status URL on the API's host, 404, a redirect never
// followed, and a status URL elsewhere refused before any request.
func TestJobStatus(t *testing.T) {
	const key = "sk_status_key_0123"
	var paths []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the key went to another host: %s %s", r.Method, r.URL)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.RequestURI())
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/jobs/job_1":
			w.Write([]byte(`{"id":"job_1","status":"RUNNING"}`))
		case "/custom/job_2":
			w.Write([]byte(`{"status":"COMPLETED"}`))
		case "/v1/jobs/job_moved":
			http.Redirect(w, r, other.URL+"/v1/jobs/job_moved", http.StatusFound)
		case "/v1/jobs/job_cased":
			w.Write([]byte(`{"status":"RUNNING","Status":"COMPLETED"}`))
		case "/v1/jobs/job_twice":
			w.Write([]byte(`{"status":"RUNNING","status":"COMPLETED"}`))
		case "/v1/jobs/job_odd":
			w.Write([]byte(`{"echo":"` + r.Header.Get("Authorization") + `"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, APIKey: key}
	ctx := context.Background()
	if got, err := c.JobStatus(ctx, "job_1", ""); err != nil || got != "RUNNING" || Terminal(got) {
		t.Errorf("job_1 = %q, %v; want RUNNING, not terminal", got, err)
	}
	if got, err := c.JobStatus(ctx, "job_2", srv.URL+"/custom/job_2"); err != nil || got != "COMPLETED" || !Terminal(got) {
		t.Errorf("job_2 = %q, %v; want COMPLETED, terminal", got, err)
	}
	if _, err := c.JobStatus(ctx, "job_gone", ""); !errors.Is(err, ErrUnknownJob) {
		t.Errorf("job_gone: %v, want ErrUnknownJob", err)
	}
	if _, err := c.JobStatus(ctx, "job_moved", ""); err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("job_moved: %v, want the 302 reported, not followed", err)
	}
	// The status by its exact key, once: encoding/json alone would read
	// both answers as COMPLETED.
	for _, job := range []string{"job_cased", "job_twice"} {
		if got, err := c.JobStatus(ctx, job, ""); err == nil {
			t.Errorf("%s = %q; want an error, the status key in another case or twice", job, got)
		}
	}
	if _, err := c.JobStatus(ctx, "job_odd", ""); err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("job_odd: %v, want an error without the key", err)
	}
	n := len(paths)
	for _, u := range []string{other.URL + "/v1/jobs/job_3", "https://api.sume.com.evil.example/v1/jobs/job_3", "//x", strings.Replace(srv.URL, "http://", "http://user@", 1) + "/v1/jobs/job_3"} {
		if _, err := c.JobStatus(ctx, "job_3", u); !errors.Is(err, ErrForeignStatusURL) {
			t.Errorf("status URL %s: %v, want ErrForeignStatusURL", u, err)
		}
	}
	if len(paths) != n {
		t.Errorf("foreign status URLs made requests: %v", paths[n:])
	}
}
