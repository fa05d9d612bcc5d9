// Package console is serve's read-only web console, on the admin address
// only: what the inbox holds (rows per status and source, parked rows per
// reason, the last day per hour, the queue, the secrets' last uses, missed
// and overdue jobs), the rows as inbox list selects them, and one row as
// inbox show prints it. Its pages are rendered on the server by
// html/template from embedded files; they load nothing from elsewhere and
// run no script, and the Content-Security-Policy says so to the browser.
// It answers GET and HEAD only and changes nothing.
package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/scheme"
)

// Store is what the console reads of the inbox's store.
type Store interface {
	Stats(ctx context.Context) (inbox.Stats, error)
	CountByStatus(ctx context.Context) (map[inbox.Status]int64, error)
	Queue(ctx context.Context, now time.Time) (inbox.Queue, error)
	ParkedByReason(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error)
	ParkedPerHour(ctx context.Context, f inbox.Filter, end time.Time, hours int) ([]inbox.HourCount, error)
	Count(ctx context.Context, f inbox.Filter) (int64, error)
	List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error)
	Get(ctx context.Context, id string) (inbox.Event, error)
	Missed(ctx context.Context, before time.Time) ([]inbox.Refusal, error)
	Expected(ctx context.Context, now time.Time, overdue bool) ([]inbox.Expectation, error)
	Reconciliation(ctx context.Context, now time.Time) (inbox.Reconciliation, error)
	SecretUses(ctx context.Context) ([]inbox.SecretUse, error)
	Unverified(ctx context.Context) ([]inbox.Unverified, error)
	Destinations(ctx context.Context, now time.Time) ([]inbox.DestinationStats, error)
	Deliveries(ctx context.Context, id string) ([]inbox.Pairing, error)
}

// Source is one source serve receives, as the console names it. Its keys
// are read once, for their fingerprints, and not kept.
type Source struct {
	Name, Path, Scheme string
	Keys               []scheme.Secret
}

// Config is what the console shows besides the store.
type Config struct {
	Sources []Source
	// DB names the store as the log does (a PostgreSQL URL without its
	// password).
	DB string
	// Destination is the kind of destination this process hands new rows
	// to (forward, exec, nats, redis, bullmq, amqp); "" when it hands none on.
	Destination string
	// SecretUses, when set, returns when each secret last verified a
	// delivery as this process knows it now (serve's own record, which it
	// saves to the store once a minute): the overview shows the later of
	// it and the store's, which holds the uses before this process began
	// and those of other replicas.
	SecretUses func() []inbox.SecretUse
	// Replica, when set, says how the replica of the SQLite file stands
	// now (serve --replica).
	Replica func() Replica
	// Timeout bounds the reads of one page; DefaultTimeout when zero.
	Timeout time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Replica is what the overview shows of the replica: its URL without
// password or secret, whether deliveries wait for it, how far it may
// trail the file, when a sync last reached it, and the last sync's error
// while it cannot be reached.
type Replica struct {
	URL         string
	Sync        bool
	Lag         time.Duration
	LastSuccess time.Time
	Errors      int64
	Error       string
}

// DefaultTimeout bounds the store reads of one page.
const DefaultTimeout = 5 * time.Second

// Security headers of every answer: nothing but this origin's stylesheet
// and images is loaded, no script runs, no page frames it, no referrer
// leaves, nothing is cached (the pages hold rows).
const csp = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed templates/*.html static/*
var files embed.FS

type secret struct {
	position    int
	fingerprint string
	expires     time.Time
}

type source struct {
	name, path, scheme string
	secrets            []secret
}

// Console serves the pages.
type Console struct {
	store      Store
	uses       func() []inbox.SecretUse
	replica    func() Replica
	sources    []source
	db, dest   string
	timeout    time.Duration
	now        func() time.Time
	log        zerolog.Logger
	mux        *http.ServeMux
	pages      map[string]*template.Template
	stylesheet []byte
	icon       []byte
}

// New returns the console of store. It panics if its embedded templates do
// not parse, which the tests would have seen.
func New(store Store, cfg Config, log zerolog.Logger) *Console {
	c := &Console{store: store, uses: cfg.SecretUses, replica: cfg.Replica, db: cfg.DB, dest: cfg.Destination, timeout: cfg.Timeout, now: cfg.Now, log: log,
		mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.now == nil {
		c.now = time.Now
	}
	for _, s := range cfg.Sources {
		src := source{name: s.Name, path: s.Path, scheme: s.Scheme}
		for i, k := range s.Keys {
			src.secrets = append(src.secrets, secret{position: i + 1, fingerprint: k.Fingerprint(), expires: k.Expires})
		}
		c.sources = append(c.sources, src)
	}
	for _, page := range []string{"overview", "rows", "row", "problem"} {
		c.pages[page] = template.Must(template.New(page).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+page+".html"))
	}
	c.stylesheet, _ = files.ReadFile("static/console.css")
	c.icon, _ = files.ReadFile("static/icon.svg")
	c.mux.HandleFunc("/{$}", c.overview)
	c.mux.HandleFunc("/rows", c.rows)
	c.mux.HandleFunc("/row", c.row)
	c.mux.HandleFunc("/console.css", c.asset("text/css; charset=utf-8", c.stylesheet))
	c.mux.HandleFunc("/favicon.ico", c.asset("image/svg+xml", c.icon))
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.problem(w, http.StatusNotFound, "No page at this path.", nil)
	})
	return c
}

// ServeHTTP answers GET and HEAD with the console's pages and every other
// method with 405.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		c.problem(w, http.StatusMethodNotAllowed, "The console is read-only: it answers GET and HEAD.", nil)
		return
	}
	c.mux.ServeHTTP(w, r)
}

func (c *Console) asset(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	}
}

// read returns the context one page's reads share: cut off after the
// console's timeout.
func (c *Console) read(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.timeout)
}

// render writes page with data, or a 500 when the template fails: the
// page is rendered whole before anything is sent.
func (c *Console) render(w http.ResponseWriter, status int, page string, data any) {
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, "layout", data); err != nil {
		c.log.Error().Err(err).Str("page", page).Msg("console: render")
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

type problemPage struct {
	Title, Message string
	Err            string
}

// problem renders a page that says what went wrong: a bad request, a row
// that does not exist, a store that did not answer (err, logged).
func (c *Console) problem(w http.ResponseWriter, status int, msg string, err error) {
	p := problemPage{Title: http.StatusText(status), Message: msg}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			p.Err = "the store did not answer within " + c.timeout.String()
		} else {
			p.Err = err.Error()
		}
		c.log.Warn().Err(err).Msg("console: read the store")
	}
	c.render(w, status, "problem", p)
}

// storeFailed answers a page whose reads failed: 503, the store being what
// is down.
func (c *Console) storeFailed(w http.ResponseWriter, err error) {
	c.problem(w, http.StatusServiceUnavailable, "The store could not be read.", err)
}
