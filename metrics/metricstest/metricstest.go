// Package metricstest scrapes a /metrics endpoint for tests.
package metricstest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape gets url, parses the Prometheus text format and returns every
// sample by name and labels, labels sorted: `inbox_rows{status="new"}`.
// A histogram gives name_count, name_sum and name_bucket{...,le="..."}.
func Scrape(tb testing.TB, url string) map[string]float64 {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("scrape: status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		tb.Errorf("scrape: Content-Type %q, want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("scrape: parse: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[key(name, m.GetLabel())] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key(name, m.GetLabel())] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				out[key(name+"_count", m.GetLabel())] = float64(h.GetSampleCount())
				out[key(name+"_sum", m.GetLabel())] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					le := &dto.LabelPair{Name: ptr("le"), Value: ptr(fmt.Sprint(b.GetUpperBound()))}
					out[key(name+"_bucket", append(slices.Clone(m.GetLabel()), le))] = float64(b.GetCumulativeCount())
				}
			case m.GetUntyped() != nil:
				out[key(name, m.GetLabel())] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func key(name string, labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return name
	}
	pairs := make([]string, 0, len(labels))
	for _, l := range labels {
		pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

func ptr(s string) *string { return &s }

// Sum adds the samples whose key starts with prefix.
func Sum(samples map[string]float64, prefix string) float64 {
	total := 0.0
	for k, v := range samples {
		if strings.HasPrefix(k, prefix) {
			total += v
		}
	}
	return total
}

// Expect fails tb for each sample in want that got lacks or holds with
// another value.
func Expect(tb testing.TB, got, want map[string]float64) {
	tb.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			tb.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
