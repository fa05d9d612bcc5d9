// Command dispatch measures, in one run on one machine, how fast inbox
// stores signed deliveries (the ingest rate) and how fast the dispatcher
// hands stored rows to a local HTTP sink and to a local JetStream stream,
// with the CPU time this process spent per row. Everything runs in this
// process on the loopback interface, on real SQLite files with the pragmas
// serve uses, in a temporary folder, or with -postgres in schemas of its
// own on that server (its CPU time is the server's, not counted).
//
//	go -C bench run ./dispatch -n 20000 -conns 32 -workers 32 -rounds 3
//	go -C bench run ./dispatch -n 10000 -workers 32 -jetstream=false \
//	    -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/nats"
	"inbox/postgres"
	"inbox/receiver"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sume"

	"inbox/bench/internal/inboxmod"
)

const (
	secret  = "bench-secret"
	subject = "sume.jobs.terminal"
)

var rules = inbox.Rules{Events: []string{"job.completed"}, MaxBody: 1 << 20}

// settings are the command's flags.
type settings struct {
	n, conns, workers, pad, rounds int
	postgres                       string
	jetStream                      bool
}

func main() {
	var set settings
	flag.IntVar(&set.n, "n", 20000, "events per measurement")
	flag.IntVar(&set.conns, "conns", 32, "concurrent senders for the ingest measurement")
	flag.IntVar(&set.workers, "workers", 32, "dispatcher workers")
	flag.IntVar(&set.pad, "pad", 512, "bytes of padding in each body")
	flag.IntVar(&set.rounds, "rounds", 1, "measure this many times, one after the other, and print the medians")
	flag.StringVar(&set.postgres, "postgres", "", "measure on this PostgreSQL database (postgres:// URL), each run in a schema of its own, instead of SQLite")
	flag.BoolVar(&set.jetStream, "jetstream", true, "measure the dispatch to JetStream too")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if set.n < 1 || set.conns < 1 || set.workers < 1 || set.rounds < 1 {
		fmt.Fprintln(os.Stderr, "bench: -n, -conns, -workers and -rounds must be at least 1")
		os.Exit(2)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(set); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// benchStore is what the bench needs of a store.
type benchStore interface {
	dispatch.Store
	receiver.Store
	Stats(ctx context.Context) (inbox.Stats, error)
	Close() error
}

// backlog makes stores holding the same n stored rows, one per drain.
type backlog interface {
	// fill ingests the rows into a new store and returns the ingest rate.
	fill() (drained, error)
	// fresh opens a store holding the rows fill stored, for one drain.
	fresh(ctx context.Context) (benchStore, error)
	cleanup()
}

// drained is one ingest's or drain's rate and this process's CPU time
// per row.
type drained struct {
	rate float64
	cpu  time.Duration // zero when not measured
}

func run(set settings) error {
	schema, err := inboxmod.Schema(context.Background())
	if err != nil {
		return fmt.Errorf("read schema.sql: %w", err)
	}
	on := "SQLite"
	if set.postgres != "" {
		on = "PostgreSQL"
	}
	fmt.Printf("go %s, %s/%s, %d CPUs; %s; n=%d conns=%d workers=%d body≈%d B\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), on, set.n, set.conns, set.workers, set.pad+80)
	var ingests, sinks, streams []drained
	for round := 1; round <= set.rounds; round++ {
		if set.rounds > 1 {
			fmt.Printf("round %d\n", round)
		}
		before := loadAvg()
		in, sink, stream, err := measure(set, string(schema))
		if err != nil {
			return err
		}
		fmt.Printf("load avg (1 min) as the round started -> ended: %s -> %s\n", before, loadAvg())
		ingests, sinks = append(ingests, in), append(sinks, sink)
		if set.jetStream {
			streams = append(streams, stream)
		}
	}
	if set.rounds > 1 {
		in := medianDrain(ingests)
		fmt.Printf("median of %d rounds:\n", set.rounds)
		report("ingest (signed POST -> 204 on disk):  ", in, 0)
		report("dispatch to a local HTTP sink:        ", medianDrain(sinks), in.rate)
		if set.jetStream {
			report("dispatch to JetStream (file storage): ", medianDrain(streams), in.rate)
		}
	}
	return nil
}

// measure runs one round: the ingest, then a drain into each destination.
func measure(set settings, schema string) (in, sink, stream drained, err error) {
	var b backlog
	if set.postgres != "" {
		b, err = newPGBacklog(set)
	} else {
		b, err = newFileBacklog(set, schema)
	}
	if err != nil {
		return drained{}, drained{}, drained{}, err
	}
	defer b.cleanup()
	if in, err = b.fill(); err != nil {
		return drained{}, drained{}, drained{}, fmt.Errorf("ingest: %w", err)
	}
	report("ingest (signed POST -> 204 on disk):  ", in, 0)
	sink, err = drain(b, set.n, set.workers, func(ctx context.Context) (dispatch.Destination, func(), error) {
		return httpSink()
	})
	if err != nil {
		return drained{}, drained{}, drained{}, fmt.Errorf("http: %w", err)
	}
	report("dispatch to a local HTTP sink:        ", sink, in.rate)
	if !set.jetStream {
		return in, sink, drained{}, nil
	}
	dir, err := os.MkdirTemp("", "inbox-bench-js-")
	if err != nil {
		return drained{}, drained{}, drained{}, err
	}
	defer os.RemoveAll(dir)
	stream, err = drain(b, set.n, set.workers, func(ctx context.Context) (dispatch.Destination, func(), error) {
		return jetStream(ctx, dir)
	})
	if err != nil {
		return drained{}, drained{}, drained{}, fmt.Errorf("jetstream: %w", err)
	}
	report("dispatch to JetStream (file storage): ", stream, in.rate)
	return in, sink, stream, nil
}

// report prints one ingest or drain, a drain against the ingest rate
// (ingest above 0).
func report(what string, d drained, ingest float64) {
	var notes []string
	if ingest > 0 {
		notes = append(notes, fmt.Sprintf("%.2fx ingest", d.rate/ingest))
	}
	if d.cpu > 0 {
		notes = append(notes, fmt.Sprintf("%.0f µs CPU/row", float64(d.cpu.Nanoseconds())/1e3))
	}
	fmt.Printf("%s %8.0f events/s (%s)\n", what, d.rate, strings.Join(notes, ", "))
}

// median is the middle of xs (the mean of the middle two when even).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianDrain is the median rate and the median CPU per row of ds.
func medianDrain(ds []drained) drained {
	rates, cpus := make([]float64, len(ds)), make([]float64, len(ds))
	for i, d := range ds {
		rates[i], cpus[i] = d.rate, float64(d.cpu)
	}
	return drained{rate: median(rates), cpu: time.Duration(median(cpus))}
}

// fileBacklog is an SQLite file, copied before each drain.
type fileBacklog struct {
	set    settings
	schema string
	dir    string
	drains int
}

func newFileBacklog(set settings, schema string) (*fileBacklog, error) {
	dir, err := os.MkdirTemp("", "inbox-bench-dispatch-")
	if err != nil {
		return nil, err
	}
	return &fileBacklog{set: set, schema: schema, dir: dir}, nil
}

func (b *fileBacklog) cleanup() { os.RemoveAll(b.dir) }

func (b *fileBacklog) fill() (drained, error) {
	store, err := sqlite.Open(context.Background(), filepath.Join(b.dir, "ingest.db"), sqlite.Options{Schema: b.schema})
	if err != nil {
		return drained{}, err
	}
	return ingest(store, b.set)
}

func (b *fileBacklog) fresh(ctx context.Context) (benchStore, error) {
	b.drains++
	db := filepath.Join(b.dir, fmt.Sprintf("drain-%d.db", b.drains))
	data, err := os.ReadFile(filepath.Join(b.dir, "ingest.db"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(db, data, 0o600); err != nil {
		return nil, err
	}
	return sqlite.Open(ctx, db, sqlite.Options{Schema: b.schema})
}

// pgBacklog is a schema on the -postgres database, filled again by the
// receiver for each drain after the first: the ingest rate is the first
// fill's.
type pgBacklog struct {
	set     settings
	base    string
	schemas []string
	filled  bool // the last schema is filled and not yet drained
}

func newPGBacklog(set settings) (*pgBacklog, error) {
	u, err := url.Parse(set.postgres)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// Not the URL itself: it may hold a password.
		return nil, errors.New("-postgres: want a postgres:// or postgresql:// URL with a host")
	}
	return &pgBacklog{set: set, base: set.postgres}, nil
}

// open creates a schema and opens a store on it, migrated.
func (b *pgBacklog) open(ctx context.Context) (benchStore, error) {
	r := make([]byte, 4)
	rand.Read(r)
	name := "inbox_bench_dispatch_" + hex.EncodeToString(r)
	if err := pgExec(ctx, b.base, `CREATE SCHEMA `+name); err != nil {
		return nil, fmt.Errorf("postgres: create schema: %w", err)
	}
	b.schemas = append(b.schemas, name)
	return postgres.Open(ctx, b.url(name), postgres.Options{})
}

// url is the -postgres URL with the schema name as its search_path.
func (b *pgBacklog) url(name string) string {
	u, _ := url.Parse(b.base) // checked by newPGBacklog
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func (b *pgBacklog) fill() (drained, error) {
	store, err := b.open(context.Background())
	if err != nil {
		return drained{}, err
	}
	b.filled = true
	return ingest(store, b.set)
}

func (b *pgBacklog) fresh(ctx context.Context) (benchStore, error) {
	if !b.filled {
		if _, err := b.fill(); err != nil {
			return nil, fmt.Errorf("ingest again: %w", err)
		}
	}
	b.filled = false
	return postgres.Open(ctx, b.url(b.schemas[len(b.schemas)-1]), postgres.Options{})
}

func (b *pgBacklog) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range b.schemas {
		pgExec(ctx, b.base, `DROP SCHEMA IF EXISTS `+name+` CASCADE`)
	}
}

// pgExec runs one statement on a connection of its own.
func pgExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// ingest sends n signed deliveries with unique job ids from conns
// keep-alive connections to the receiver on store, closes the store, and
// returns deliveries per second and this process's CPU time per delivery.
func ingest(store benchStore, set settings) (drained, error) {
	defer store.Close()
	n, conns := set.n, set.conns
	h, err := receiver.NewHandler(store, receiver.Config{
		Keys: []scheme.Secret{{Key: []byte(secret)}}, Scheme: scheme.Sume{Tolerance: 5 * time.Minute}, Rules: rules, HardCap: 4 << 20,
	}, zerolog.Nop())
	if err != nil {
		return drained{}, err
	}
	srv, url, err := listen(h)
	if err != nil {
		return drained{}, err
	}
	defer srv.Close()

	var next, failed atomic.Int64
	padding := strings.Repeat("x", set.pad)
	cpu0, cpuOK := selfCPU()
	began := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_%08d","status":"COMPLETED","payload":{"pad":%q}}`, i, padding)
				ts := strconv.FormatInt(time.Now().Unix(), 10)
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set(sume.HeaderTimestamp, ts)
				req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), secret))
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	cpu1, _ := selfCPU()
	if f := failed.Load(); f > 0 {
		return drained{}, fmt.Errorf("%d deliveries not answered 204", f)
	}
	out := drained{rate: float64(n) / took.Seconds()}
	if cpuOK {
		out.cpu = (cpu1 - cpu0) / time.Duration(n)
	}
	return out, store.Close()
}

// drain runs a dispatcher on a fresh store of b into the destination
// newDest makes, and returns rows done per second and this process's CPU
// time per row meanwhile.
func drain(b backlog, n, workers int, newDest func(context.Context) (dispatch.Destination, func(), error)) (drained, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := b.fresh(ctx)
	if err != nil {
		return drained{}, err
	}
	defer store.Close()
	dest, closeDest, err := newDest(ctx)
	if err != nil {
		return drained{}, err
	}
	defer closeDest()
	d, err := dispatch.New(store, dispatch.Config{Destination: dest, Workers: workers, Timeout: 10 * time.Second, Lease: time.Minute}, zerolog.Nop())
	if err != nil {
		return drained{}, err
	}
	cpu0, cpuOK := selfCPU()
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// NextDue reads one index entry: watching costs the run next to nothing.
	for {
		_, waiting, err := store.NextDue(ctx)
		if err != nil {
			return drained{}, err
		}
		if !waiting {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(began)
	cpu1, _ := selfCPU()
	cancel()
	if err := <-done; err != nil {
		return drained{}, err
	}
	st, err := store.Stats(context.Background())
	if err != nil {
		return drained{}, err
	}
	if got := st.ByStatus[inbox.StatusDone]; got != int64(n) {
		return drained{}, fmt.Errorf("%d rows done, want %d: %v %v", got, n, st.ByStatus, st.ByReason)
	}
	out := drained{rate: float64(n) / took.Seconds()}
	if cpuOK {
		out.cpu = (cpu1 - cpu0) / time.Duration(n)
	}
	return out, nil
}

// httpSink is a local application that takes every delivery at once.
func httpSink() (dispatch.Destination, func(), error) {
	srv, url, err := listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		return nil, nil, err
	}
	f, err := dispatch.NewForward(url, "whsec_c2VjcmV0LWtleQ==", nil)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return f, func() { srv.Close() }, nil
}

// jetStream runs an embedded nats-server with file-backed JetStream and a
// stream over the subject, and connects a publisher to it.
func jetStream(ctx context.Context, storeDir string) (dispatch.Destination, func(), error) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: storeDir, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return nil, nil, fmt.Errorf("nats-server did not start")
	}
	nc, err := natsgo.Connect(s.ClientURL())
	if err != nil {
		s.Shutdown()
		return nil, nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		s.Shutdown()
		return nil, nil, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"sume.jobs.>"}, Duplicates: 2 * time.Minute}); err != nil {
		s.Shutdown()
		return nil, nil, err
	}
	p, err := nats.Connect(s.ClientURL(), subject, zerolog.Nop())
	if err == nil {
		if err = p.Check(ctx); err != nil {
			p.Close()
		}
	}
	if err != nil {
		s.Shutdown()
		return nil, nil, err
	}
	return p, func() { p.Close(); s.Shutdown() }, nil
}

// listen serves h on a free loopback port.
func listen(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/", nil
}

// loadAvg is the 1-minute load average (/proc/loadavg), "?" where there is
// none: how busy the machine was around a round.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
