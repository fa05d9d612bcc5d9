package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/strictjson"
)

// Bounds of an expectation's window, and its default.
const (
	DefaultWithin = 2 * time.Hour
	MinWithin     = time.Second
	MaxWithin     = 30 * 24 * time.Hour
	// MaxExpectJobs bounds the jobs of one expect call.
	MaxExpectJobs = 1000
	// maxExpectBody bounds the body of POST /expect.
	maxExpectBody = 64 << 10
)

// ParseWithin reads an expectation's window: a Go duration (90m, 2h) or
// whole days (2d), from MinWithin to MaxWithin; "" is DefaultWithin.
func ParseWithin(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultWithin, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, nerr := strconv.Atoi(days)
		d, err = time.Duration(n)*24*time.Hour, nerr
	}
	if err != nil || d < MinWithin || d > MaxWithin {
		return 0, fmt.Errorf("within %q: want a duration from 1s to 30d, such as 90m, 2h or 2d", s)
	}
	return d, nil
}

// Expecter is what ExpectHandler needs of the store.
type Expecter interface {
	Expect(ctx context.Context, jobs []string, statusURL string, due time.Time) ([]inbox.Expectation, error)
}

// ExpectRequest is the body of POST /expect: job_id or job_ids (or both),
// within (a duration, 2h when empty) and, for one job only, status_url.
type ExpectRequest struct {
	JobID     string   `json:"job_id,omitempty"`
	JobIDs    []string `json:"job_ids,omitempty"`
	Within    string   `json:"within,omitempty"`
	StatusURL string   `json:"status_url,omitempty"`
}

// Jobs returns the request's job ids, checked: at least one, at most
// MaxExpectJobs, each valid, a status URL with one job only and accepted
// by checkURL (nil: any).
func (q ExpectRequest) Jobs(checkURL func(string) error) ([]string, error) {
	jobs := q.JobIDs
	if q.JobID != "" {
		jobs = append([]string{q.JobID}, jobs...)
	}
	switch {
	case len(jobs) == 0:
		return nil, errors.New("no job id: give job_id or job_ids")
	case len(jobs) > MaxExpectJobs:
		return nil, fmt.Errorf("%d job ids: at most %d at once", len(jobs), MaxExpectJobs)
	case q.StatusURL != "" && len(jobs) > 1:
		return nil, errors.New("a status URL names one job: expect the jobs one by one")
	}
	for _, id := range jobs {
		if err := inbox.CheckJobID(id); err != nil {
			return nil, err
		}
	}
	if q.StatusURL != "" && checkURL != nil {
		if err := checkURL(q.StatusURL); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// ExpectHandler answers POST /expect for applications that do not run the
// binary: 200 with {"expected": [...]} once the expectations are committed,
// 400 with {"error": "..."} for a body it cannot take (one that is not one
// JSON object of those keys, exactly as written and each once, included), 413 above 64 KiB,
// 503 with Retry-After when the store cannot take the write. now is the
// clock, time.Now when nil.
func ExpectHandler(store Expecter, checkURL func(string) error, now func() time.Time, log zerolog.Logger) http.Handler {
	if now == nil {
		now = time.Now
	}
	fail := func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxExpectBody))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				fail(w, http.StatusRequestEntityTooLarge, "body above 64 KiB")
				return
			}
			fail(w, http.StatusBadRequest, "unreadable body")
			return
		}
		var q ExpectRequest
		// Keys as written: a second job_id in another case must not
		// silently replace the first.
		if err := strictjson.Decode(body, &q, false); err != nil {
			fail(w, http.StatusBadRequest, err.Error()+`: want one JSON object: {"job_id": "...", "within": "2h", "status_url": "..."} or {"job_ids": [...]}`)
			return
		}
		within, err := ParseWithin(q.Within)
		if err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		jobs, err := q.Jobs(checkURL)
		if err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		got, err := store.Expect(r.Context(), jobs, q.StatusURL, now().Add(within))
		if err != nil {
			log.Error().Err(err).Int("jobs", len(jobs)).Msg("expect")
			fail(w, http.StatusServiceUnavailable, "the store cannot take it now: try again")
			return
		}
		log.Info().Strs("jobs", jobs[:min(len(jobs), 10)]).Int("count", len(jobs)).Dur("within", within).Msg("expected")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"expected": got})
	})
}
