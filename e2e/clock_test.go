package e2e

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"inbox/metrics/metricstest"
	"inbox/sume"
)

// TestClockDrift makes a drifted clock visible on the real binary: Sume
// deliveries signed 90 s before their receipt (as from a sender whose clock
// is behind, or with this VM's ahead) put the median of
// inbox_clock_skew_seconds between 60 and 120 s, past the minute that
// deploy/inbox-alerts.yml's InboxClockDrift fires at, and that rule and
// InboxClockBeyondTolerance watch only metrics the binary exposes.
func TestClockDrift(t *testing.T) {
	t.Parallel()
	srv := startServer(t, filepath.Join(t.TempDir(), "inbox.db"))
	client := &http.Client{Timeout: 5 * time.Second}
	deliver := func(id string, age time.Duration, secret string) int {
		t.Helper()
		body := job(id)
		ts := strconv.FormatInt(time.Now().Add(-age).Unix(), 10)
		req, _ := http.NewRequest(http.MethodPost, srv.url, strings.NewReader(body))
		req.Header.Set(sume.HeaderTimestamp, ts)
		req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), secret))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 5 {
		if code := deliver("job_drift_"+strconv.Itoa(i), 90*time.Second, e2eSecret); code != 204 {
			t.Fatalf("delivery signed 90s ago: %d, want 204", code)
		}
	}
	if code := deliver("job_fresh", 0, e2eSecret); code != 204 {
		t.Fatalf("fresh delivery: %d, want 204", code)
	}
	// Neither a forgery nor a stale delivery moves the figure.
	if code := deliver("job_forged", 0, "forged"); code != 401 {
		t.Fatalf("forged: %d, want 401", code)
	}
	if code := deliver("job_stale", 10*time.Minute, e2eSecret); code != 401 {
		t.Fatalf("stale: %d, want 401", code)
	}

	got := metricstest.Scrape(t, srv.admin+"/metrics")
	count := got[`inbox_clock_skew_seconds_count{source="sume"}`]
	median := histogramQuantile(t, got, "inbox_clock_skew_seconds", `source="sume"`, 0.5)
	t.Logf("%v verified deliveries, median skew %.1fs, mean %.1fs", count, median, got[`inbox_clock_skew_seconds_sum{source="sume"}`]/count)
	if count != 6 {
		t.Errorf("skew observed for %v deliveries, want the 6 verified ones", count)
	}
	if median <= 60 || median > 120 {
		t.Errorf("median skew %.1fs, want past the alert's 60 s (and within 120)", median)
	}
	if got[`inbox_deliveries_total{outcome="rejected",reason="stale_timestamp",source="sume"}`] != 1 {
		t.Error("the stale delivery was not counted as stale_timestamp")
	}

	rules, err := os.ReadFile("../deploy/inbox-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"InboxClockDrift", "InboxClockBeyondTolerance"} {
		_, rule, ok := strings.Cut(string(rules), "- alert: "+name+"\n")
		if !ok {
			t.Fatalf("../deploy/inbox-alerts.yml has no %s", name)
		}
		rule, _, _ = strings.Cut(rule, "- alert: ")
		for _, m := range regexp.MustCompile(`inbox_[a-z_]+`).FindAllString(rule, -1) {
			if !exposes(got, m) {
				t.Errorf("%s watches %s, which the binary does not expose", name, m)
			}
		}
	}
	if !strings.Contains(string(rules), "inbox_clock_skew_seconds_bucket[15m])))) > 60") {
		t.Error("InboxClockDrift does not fire past a minute")
	}
}

// exposes reports whether a scrape holds a sample of metric m.
func exposes(got map[string]float64, m string) bool {
	for k := range got {
		if k == m || strings.HasPrefix(k, m+"{") {
			return true
		}
	}
	return false
}

// histogramQuantile estimates the q-quantile of a scraped histogram's
// series (labels: its labels but le, as Scrape writes them) the way
// Prometheus's histogram_quantile does: linearly within the bucket it
// falls in.
func histogramQuantile(t *testing.T, got map[string]float64, name, labels string, q float64) float64 {
	t.Helper()
	type bucket struct{ le, n float64 }
	var bs []bucket
	re := regexp.MustCompile(`^` + name + `_bucket\{le="([^"]+)",` + regexp.QuoteMeta(labels) + `\}$`)
	for k, v := range got {
		if m := re.FindStringSubmatch(k); m != nil {
			le, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			bs = append(bs, bucket{le, v})
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) < 2 || bs[len(bs)-1].n == 0 {
		t.Fatalf("no buckets of %s{%s}", name, labels)
	}
	rank := q * bs[len(bs)-1].n
	for i, b := range bs {
		if b.n >= rank {
			if i == 0 || math.IsInf(b.le, 1) {
				return b.le
			}
			lo := bs[i-1]
			return lo.le + (b.le-lo.le)*(rank-lo.n)/(b.n-lo.n)
		}
	}
	return math.NaN()
}
