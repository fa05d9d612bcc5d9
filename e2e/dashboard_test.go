package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"inbox/metrics/metricstest"
)

// targetLabels are the labels Prometheus adds to every scraped series;
// up is the series it makes of each scrape.
var targetLabels = []string{"job", "instance"}

// promRefs is what a PromQL expression names: the metrics it selects, the
// label names its {...} matchers use (by metric; "" for a selector by
// __name__ alone), and the labels of its by, without, on, ignoring and
// group_left/right clauses.
type promRefs struct {
	metrics  []string
	matchers map[string][]string
	grouping []string
}

// promKeywords are the words of PromQL that are no metric.
var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "atan2": true,
	// aggregations, which may take their by (...) before their operand
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}

// promGrouping are the keywords followed by a list of label names.
var promGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// parsePromQL reads expr just enough to name what it refers to: it skips
// strings, ranges and numbers, takes an identifier followed by "(" for a
// function (or a grouping clause, whose labels it reads) and any other
// identifier that is no keyword for a metric. Grafana's $variables are
// skipped. It fails on what it cannot read: an unclosed string, bracket
// or brace, or a matcher that is not label op "value".
func parsePromQL(expr string) (promRefs, error) {
	r := promRefs{matchers: map[string][]string{}}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
		return i
	}
	ident := func(i int) (string, int) {
		j := i
		for j < len(expr) && isIdent(expr[j]) {
			j++
		}
		return expr[i:j], j
	}
	str := func(i int) (string, int, error) {
		q := expr[i]
		var b strings.Builder
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`' && j+1 < len(expr):
				j++
				b.WriteByte(expr[j])
			case expr[j] == q:
				return b.String(), j + 1, nil
			default:
				b.WriteByte(expr[j])
			}
		}
		return "", 0, fmt.Errorf("unclosed string at %d", i)
	}
	last := "" // the metric just read, for a {...} right after it
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case strings.ContainsRune(" \t\r\n", rune(c)):
			i++
			continue
		case c == '"' || c == '\'' || c == '`':
			_, j, err := str(i)
			if err != nil {
				return r, err
			}
			i = j
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return r, fmt.Errorf("unclosed [ at %d", i)
			}
			i += j + 1
		case c == '{':
			metric := last
			i++
			for {
				i = skipSpace(i)
				if i < len(expr) && expr[i] == '}' {
					i++
					break
				}
				if i >= len(expr) || !isIdentStart(expr[i]) {
					return r, fmt.Errorf("want a label name at %d", i)
				}
				var name string
				name, i = ident(i)
				i = skipSpace(i)
				op := ""
				for _, o := range []string{"=~", "!~", "!=", "="} {
					if strings.HasPrefix(expr[i:], o) {
						op = o
						break
					}
				}
				if op == "" {
					return r, fmt.Errorf("want a matcher operator after %s", name)
				}
				i = skipSpace(i + len(op))
				if i >= len(expr) || !strings.ContainsRune("\"'`", rune(expr[i])) {
					return r, fmt.Errorf("want a string after %s%s", name, op)
				}
				val, j, err := str(i)
				if err != nil {
					return r, err
				}
				i = skipSpace(j)
				if name == "__name__" {
					for m := range strings.SplitSeq(val, "|") {
						r.metrics = append(r.metrics, m)
					}
				} else {
					r.matchers[metric] = append(r.matchers[metric], name)
				}
				if i < len(expr) && expr[i] == ',' {
					i++
				}
			}
			last = ""
			continue
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				j := strings.IndexByte(expr[i:], '}')
				if j < 0 {
					return r, fmt.Errorf("unclosed ${ at %d", i)
				}
				i += j + 1
			} else {
				_, i = ident(i)
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			var word string
			word, i = ident(i)
			next := skipSpace(i)
			switch {
			case promGrouping[strings.ToLower(word)] && next < len(expr) && expr[next] == '(':
				end := strings.IndexByte(expr[next:], ')')
				if end < 0 {
					return r, fmt.Errorf("unclosed %s ( at %d", word, next)
				}
				for l := range strings.SplitSeq(expr[next+1:next+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						r.grouping = append(r.grouping, l)
					}
				}
				i = next + end + 1
			case promKeywords[strings.ToLower(word)]:
			case next < len(expr) && expr[next] == '(':
				// a function or an aggregation
			default:
				r.metrics = append(r.metrics, word)
				last = word
				continue
			}
		default:
			i++ // an operator, a comma or a parenthesis
		}
		last = ""
	}
	return r, nil
}

// exported is what a /metrics scrape shows: each metric name (a
// histogram's _bucket, _sum and _count) with its label names.
type exported map[string]map[string]bool

// scrapeLabels reads the keys metricstest.Scrape returns into exported.
func (e exported) add(samples map[string]float64) {
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for k := range samples {
		name, labels, _ := strings.Cut(k, "{")
		if e[name] == nil {
			e[name] = map[string]bool{}
		}
		for _, m := range labelName.FindAllStringSubmatch(labels, -1) {
			e[name][m[1]] = true
		}
	}
}

// check refuses expr when it names a metric the binary does not export, a
// label in a matcher that metric does not have, or a grouping label none
// of its metrics has. Prometheus's target labels and up are everywhere.
func (e exported) check(expr string) error {
	r, err := parsePromQL(expr)
	if err != nil {
		return fmt.Errorf("%q: %w", expr, err)
	}
	if len(r.metrics) == 0 {
		return fmt.Errorf("%q names no metric", expr)
	}
	has := func(metric, label string) bool {
		if slices.Contains(targetLabels, label) {
			return true
		}
		return e[metric][label]
	}
	for _, m := range r.metrics {
		if _, ok := e[m]; !ok && m != "up" {
			return fmt.Errorf("%q: no metric %s is exported", expr, m)
		}
	}
	for m, labels := range r.matchers {
		for _, l := range labels {
			ok := has(m, l)
			if m == "" { // {__name__=~"a|b", l=...}: one of them has it
				ok = slices.ContainsFunc(r.metrics, func(m string) bool { return has(m, l) })
			}
			if !ok {
				return fmt.Errorf("%q: metric %s has no label %s", expr, m, l)
			}
		}
	}
	for _, l := range r.grouping {
		if !slices.ContainsFunc(r.metrics, func(m string) bool { return has(m, l) }) {
			return fmt.Errorf("%q: no metric of it has the label %s it groups by", expr, l)
		}
	}
	return nil
}

// labelValues is Grafana's variable query label_values(selector, label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// checkQuery is check for a Grafana variable query, label_values or a
// plain expression.
func (e exported) checkQuery(q string) error {
	m := labelValues.FindStringSubmatch(q)
	if m == nil {
		return e.check(q)
	}
	if err := e.check(m[1]); err != nil {
		return err
	}
	return e.check(fmt.Sprintf("group by (%s) (%s)", m[2], m[1]))
}

// TestPromQLParser is the checker's own test: what it reads of good
// expressions, and that it refuses a metric or a label that is not there.
func TestPromQLParser(t *testing.T) {
	t.Parallel()
	r, err := parsePromQL(`abs(histogram_quantile(0.5, sum by (source, le) (rate(inbox_clock_skew_seconds_bucket{job="inbox",source=~"a|b"}[$__rate_interval])))) > 60
	and on (source) sum(increase(inbox_deliveries_total{reason!="x{y}"}[15m] offset 5m)) without (outcome) == 0`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"inbox_clock_skew_seconds_bucket", "inbox_deliveries_total"}; !slices.Equal(r.metrics, want) {
		t.Errorf("metrics %v, want %v", r.metrics, want)
	}
	if got := r.matchers["inbox_clock_skew_seconds_bucket"]; !slices.Equal(got, []string{"job", "source"}) {
		t.Errorf("matchers %v", r.matchers)
	}
	if got := r.matchers["inbox_deliveries_total"]; !slices.Equal(got, []string{"reason"}) {
		t.Errorf("matchers %v", r.matchers)
	}
	if want := []string{"source", "le", "source", "outcome"}; !slices.Equal(r.grouping, want) {
		t.Errorf("grouping %v, want %v", r.grouping, want)
	}
	e := exported{
		"inbox_deliveries_total":          {"source": true, "outcome": true, "reason": true},
		"inbox_clock_skew_seconds_bucket": {"source": true, "le": true},
		"inbox_clock_skew_seconds_count":  {"source": true},
		"inbox_rows":                      {"status": true},
	}
	for _, good := range []string{
		`sum by (source, outcome) (rate(inbox_deliveries_total{instance=~"$instance"}[$__rate_interval]))`,
		`histogram_quantile(0.99, sum by (le) (rate(inbox_clock_skew_seconds_bucket[5m])))`,
		`up{job="inbox"} == 0`,
		`label_values({__name__=~"inbox_rows|inbox_deliveries_total"}, instance)`,
		`label_values(inbox_rows, status)`,
	} {
		if err := e.checkQuery(good); err != nil {
			t.Errorf("refused a good expression: %v", err)
		}
	}
	for _, bad := range []string{
		`rate(inbox_deliveries[5m])`,                          // no such metric
		`inbox_rows{state="new"}`,                             // no such label
		`sum by (code) (rate(inbox_deliveries_total[5m]))`,    // nor to group by
		`inbox_clock_skew_seconds_count{le="1"}`,              // le is the buckets'
		`inbox_clock_skew_seconds_sum`,                        // not exported here
		`sum(inbox_rows) by (reason)`,                         // grouping after
		`inbox_rows and on (reason) inbox_deliveries_total{}`, // a label of neither... reason is the second's
		`label_values(inbox_rows, source)`,                    // variable on a missing label
		`{__name__=~"inbox_rows|inbox_gone"}`,                 // a missing name in __name__
		`inbox_rows{status="new"`,                             // unclosed
		`inbox_rows{status}`,                                  // no matcher
		`sum(rate(5m))`,                                       // no metric at all
	} {
		err := e.checkQuery(bad)
		if bad == `inbox_rows and on (reason) inbox_deliveries_total{}` {
			if err != nil {
				t.Errorf("refused %q: one of its metrics has reason: %v", bad, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// binaryMetrics runs serve with a destination (and a delivery, signed and
// forged, so the per-status series exist) and inbox dispatch with a
// JetStream one (for its connection gauge), and returns what their
// /metrics show together.
func binaryMetrics(t *testing.T) exported {
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	// With a replica: its series are exported only then.
	srv := startServer(t, db, "--exec", "cat >/dev/null", "--replica", "file://"+filepath.Join(dir, "replica"))
	if code := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`, e2eSecret); code != http.StatusNoContent {
		t.Fatalf("delivery: %d", code)
	}
	send(t, http.DefaultClient, srv.url, `{}`, "forged")
	b := newBroker(t)
	b.start()
	b.stream()
	d := startInbox(t, nil, "dispatch", "--db", db, "--admin-addr", "127.0.0.1:0", "--nats-url", b.url(), "--nats-subject", natsSubject)
	e := exported{}
	e.add(metricstest.Scrape(t, srv.admin+"/metrics"))
	e.add(metricstest.Scrape(t, d.admin+"/metrics"))
	return e
}

// deployFile reads a file of deploy/.
func deployFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDashboardAndRulesName checks deploy/grafana-dashboard.json and
// deploy/inbox-alerts.yml against the real binary: every expression of a
// panel, a variable or a rule names only metrics it exports, with labels
// they have; and the dashboard imports as is (a Prometheus data source
// input and variable, every panel on it, no link out).
func TestDashboardAndRulesName(t *testing.T) {
	t.Parallel()
	e := binaryMetrics(t)

	raw := deployFile(t, "grafana-dashboard.json")
	var dash struct {
		Inputs []struct {
			Name, Type string
			PluginID   string `json:"pluginId"`
		} `json:"__inputs"`
		Templating struct {
			List []struct {
				Name, Type string
				Query      any
			}
		}
		Panels []map[string]any
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if len(dash.Inputs) != 1 || dash.Inputs[0].PluginID != "prometheus" || dash.Inputs[0].Type != "datasource" {
		t.Errorf("dashboard inputs %+v, want one Prometheus data source", dash.Inputs)
	}
	if strings.Contains(string(raw), "http://") || strings.Contains(string(raw), "https://") {
		t.Error("the dashboard links out")
	}
	var exprs []string
	for _, v := range dash.Templating.List {
		switch q := v.Query.(type) {
		case string:
			if v.Type == "query" {
				exprs = append(exprs, q)
			}
		case map[string]any:
			exprs = append(exprs, q["query"].(string))
		}
	}
	if !slices.ContainsFunc(dash.Templating.List, func(v struct {
		Name, Type string
		Query      any
	}) bool {
		return v.Type == "datasource" && v.Name == "datasource" && v.Query == "prometheus"
	}) {
		t.Error("the dashboard has no Prometheus datasource variable")
	}
	ids := map[float64]bool{}
	for _, p := range dash.Panels {
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel id %v twice", id)
		}
		ids[id] = true
		if p["type"] == "row" {
			continue
		}
		if ds, _ := p["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
			t.Errorf("panel %q: datasource %v, want the variable", p["title"], p["datasource"])
		}
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no query", p["title"])
		}
		for _, tg := range targets {
			exprs = append(exprs, tg.(map[string]any)["expr"].(string))
		}
	}
	rules := ruleExprs(string(deployFile(t, "inbox-alerts.yml")))
	if len(rules) < 15 || len(exprs) < 25 {
		t.Errorf("read %d rules and %d dashboard queries: the readers missed some", len(rules), len(exprs))
	}
	for _, x := range append(exprs, rules...) {
		if err := e.checkQuery(x); err != nil {
			t.Error(err)
		}
	}
	// The panels the operator asked for are there.
	all := strings.Join(exprs, "\n")
	for _, m := range []string{"inbox_deliveries_total", "inbox_parked_rows", "inbox_queue_depth", "inbox_queue_oldest_age_seconds",
		"inbox_dispatch_deliveries_total", "inbox_commit_duration_seconds_bucket", "inbox_clock_skew_seconds_bucket",
		"inbox_refusals_held", "inbox_missed"} {
		if !strings.Contains(all, m) {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// ruleExprs returns the expr of every rule of a Prometheus rules file,
// inline or a block (expr: |).
func ruleExprs(file string) []string {
	var out []string
	lines := strings.Split(file, "\n")
	for i := 0; i < len(lines); i++ {
		indent, rest, ok := strings.Cut(lines[i], "expr:")
		if !ok || strings.TrimSpace(indent) != "" {
			continue
		}
		rest = strings.TrimSpace(rest)
		if rest != "|" && rest != ">" && rest != "|-" && rest != ">-" {
			out = append(out, strings.Trim(rest, `'`))
			continue
		}
		var block []string
		for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > len(indent)) {
			i++
			block = append(block, strings.TrimSpace(lines[i]))
		}
		out = append(out, strings.Join(block, "\n"))
	}
	return out
}
