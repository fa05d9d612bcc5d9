// Command dispatch measures, in one run on one machine, how fast inbox
// stores signed deliveries (the ingest rate) and how fast the dispatcher
// hands stored rows to a local HTTP sink and to a local JetStream stream.
// Everything runs in this process on the loopback interface, on real
// SQLite files with the pragmas serve uses, in a temporary folder.
//
//	go run ./bench/dispatch -n 20000 -conns 32 -workers 32
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/nats"
	"inbox/receiver"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sume"
)

const (
	secret  = "bench-secret"
	subject = "sume.jobs.terminal"
)

var rules = inbox.Rules{Events: []string{"job.completed"}, MaxBody: 1 << 20}

func main() {
	n := flag.Int("n", 20000, "events per measurement")
	conns := flag.Int("conns", 32, "concurrent senders for the ingest measurement")
	workers := flag.Int("workers", 32, "dispatcher workers")
	pad := flag.Int("pad", 512, "bytes of padding in each body")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
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
	if err := run(*n, *conns, *workers, *pad); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n, conns, workers, pad int) error {
	dir, err := os.MkdirTemp("", "inbox-bench-dispatch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		return fmt.Errorf("run from the module root: %w", err)
	}
	fmt.Printf("go %s, %s/%s, %d CPUs; n=%d conns=%d workers=%d body≈%d B\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), n, conns, workers, pad+80)

	// Ingest: signed POSTs to the real receiver, each answered once on disk.
	ingestDB := filepath.Join(dir, "ingest.db")
	rate, err := ingest(ingestDB, string(schema), n, conns, pad)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	fmt.Printf("ingest (signed POST -> 204 on disk):   %8.0f events/s\n", rate)

	// The same file, copied before each run, is the backlog each
	// destination drains.
	httpRate, err := drain(dir, ingestDB, string(schema), n, workers, func(ctx context.Context) (dispatch.Destination, func(), error) {
		return httpSink()
	})
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	fmt.Printf("dispatch to a local HTTP sink:        %8.0f events/s (%.2fx ingest)\n", httpRate, httpRate/rate)

	jsRate, err := drain(dir, ingestDB, string(schema), n, workers, func(ctx context.Context) (dispatch.Destination, func(), error) {
		return jetStream(ctx, filepath.Join(dir, "js"))
	})
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	fmt.Printf("dispatch to JetStream (file storage): %8.0f events/s (%.2fx ingest)\n", jsRate, jsRate/rate)
	return nil
}

// ingest sends n signed deliveries with unique job ids from conns
// keep-alive connections to the receiver and returns deliveries per second.
func ingest(db, schema string, n, conns, pad int) (float64, error) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, db, sqlite.Options{Schema: schema})
	if err != nil {
		return 0, err
	}
	defer store.Close()
	h, err := receiver.NewHandler(store, receiver.Config{
		Keys: []scheme.Secret{{Key: []byte(secret)}}, Scheme: scheme.Sume{Tolerance: 5 * time.Minute}, Rules: rules, HardCap: 4 << 20,
	}, zerolog.Nop())
	if err != nil {
		return 0, err
	}
	srv, url, err := listen(h)
	if err != nil {
		return 0, err
	}
	defer srv.Close()

	var next, failed atomic.Int64
	padding := strings.Repeat("x", pad)
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
	if f := failed.Load(); f > 0 {
		return 0, fmt.Errorf("%d deliveries not answered 204", f)
	}
	return float64(n) / took.Seconds(), store.Close()
}

// drain copies the ingested database, runs a dispatcher on it into the
// destination newDest makes, and returns rows done per second.
func drain(dir, src, schema string, n, workers int, newDest func(context.Context) (dispatch.Destination, func(), error)) (float64, error) {
	db := filepath.Join(dir, fmt.Sprintf("drain-%d.db", time.Now().UnixNano()))
	b, err := os.ReadFile(src)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := sqlite.Open(ctx, db, sqlite.Options{Schema: schema})
	if err != nil {
		return 0, err
	}
	defer store.Close()
	dest, closeDest, err := newDest(ctx)
	if err != nil {
		return 0, err
	}
	defer closeDest()
	d, err := dispatch.New(store, dispatch.Config{Destination: dest, Workers: workers, Timeout: 10 * time.Second, Lease: time.Minute}, zerolog.Nop())
	if err != nil {
		return 0, err
	}
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// NextDue reads one index entry: watching costs the run next to nothing.
	for {
		_, waiting, err := store.NextDue(ctx)
		if err != nil {
			return 0, err
		}
		if !waiting {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(began)
	cancel()
	if err := <-done; err != nil {
		return 0, err
	}
	st, err := store.Stats(context.Background())
	if err != nil {
		return 0, err
	}
	if got := st.ByStatus[inbox.StatusDone]; got != int64(n) {
		return 0, fmt.Errorf("%d rows done, want %d: %v %v", got, n, st.ByStatus, st.ByReason)
	}
	return float64(n) / took.Seconds(), nil
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
