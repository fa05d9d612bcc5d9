package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"inbox/inbox"
	"inbox/scheme"
)

// referenceArg as the first argument runs the bench binary as a reference
// receiver: `bench __reference KIND ADDR DB`. It is not a flag, so it stays
// out of -help.
const referenceArg = "__reference"

// The reference receivers. Each is what inbox is measured against.
const (
	// storeNothing verifies and answers: the ceiling for any receiver that
	// verifies on this machine, and the cost of HTTP and HMAC alone.
	storeNothing = "store-nothing"
	// commitEach stores the obvious way: one transaction, so one fsync, per
	// request.
	commitEach = "commit-each"
	// groupCommit stores each delivery in the smallest table, as commit-each
	// does, through inbox's own group commit (inbox.GroupCommit, one writer,
	// one fsync a batch) and inbox's classifier: what inbox's receiver
	// would take if a row carried nothing but its key and body. inbox
	// against it is the cost of what inbox's row carries and does.
	groupCommit = "group-commit"
)

// refPGConns is the commit-each-pg pool's size: a connection for each of
// the targetConns senders, so no request waits for a connection and the
// server groups the WAL flushes of their concurrent commits, the obvious
// receiver at its best.
const refPGConns = targetConns

// The reference receivers mirror inbox's defaults, so that the only
// difference is what happens after the signature is verified.
const (
	refPath        = "/webhooks/sume"
	refTolerance   = 5 * time.Minute
	refMaxRequest  = 4 << 20
	refSecretEnv   = "SUME_COM_WEBHOOK_SIGNING_SECRET"
	refBusyTimeout = 3 * time.Second
)

// referenceSchema is the smallest table that keeps each job once.
const referenceSchema = `CREATE TABLE IF NOT EXISTS deliveries (
	id   TEXT NOT NULL PRIMARY KEY, -- the job_id
	body BLOB NOT NULL
) STRICT`

// referencePGSchema is referenceSchema in PostgreSQL's types.
const referencePGSchema = `CREATE TABLE IF NOT EXISTS deliveries (
	id   text COLLATE "C" NOT NULL PRIMARY KEY, -- the job_id
	body bytea NOT NULL
)`

// runReference serves one reference receiver until SIGTERM or SIGINT. DB
// is a file for commit-each and group-commit, a postgres:// URL for
// commit-each-pg.
func runReference(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want %s KIND ADDR DB, got %d arguments", referenceArg, len(args))
	}
	kind, addr, dbPath := args[0], args[1], args[2]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	secret := os.Getenv(refSecretEnv)
	if secret == "" {
		return fmt.Errorf("no signing secret: set %s", refSecretEnv)
	}
	h := &referenceHandler{secret: secret}
	switch kind {
	case storeNothing:
	case commitEach:
		db, err := openReferenceDB(ctx, dbPath)
		if err != nil {
			return err
		}
		defer db.Close()
		h.commit = func(ctx context.Context, body []byte) error { return commitOne(ctx, db, body) }
	case groupCommit:
		db, err := openReferenceDB(ctx, dbPath)
		if err != nil {
			return err
		}
		defer db.Close()
		g, err := startGroupWriter(ctx, db, dbPath)
		if err != nil {
			return err
		}
		defer g.close()
		h.commit = g.put
	case commitEachPG:
		pool, err := openReferencePG(ctx, dbPath)
		if err != nil {
			return err
		}
		defer pool.Close()
		h.commit = func(ctx context.Context, body []byte) error { return commitOnePG(ctx, pool, body) }
	default:
		return fmt.Errorf("unknown reference receiver %q", kind)
	}

	mux := http.NewServeMux()
	mux.Handle(refPath, h)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintf(os.Stderr, "%s listening on %s\n", kind, ln.Addr())
	// The same timeouts as inbox's server (receiver/server.go).
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       8 * time.Second,
		WriteTimeout:      9 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// openReferenceDB opens the store of commit-each and group-commit, on one
// connection, with inbox's pragmas, and checks that WAL took.
func openReferenceDB(ctx context.Context, path string) (*sql.DB, error) {
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate",
		path, refBusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open reference db: %w", err)
	}
	// One connection: SQLite has one writer at a time, and requests queue
	// for it in database/sql rather than busy-wait in SQLite.
	db.SetMaxOpenConns(1)
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("open reference db: %w", err)
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("open reference db: journal_mode=%s, want wal", mode)
	}
	if _, err := db.ExecContext(ctx, referenceSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open reference db: %w", err)
	}
	return db, nil
}

// referenceHandler verifies a delivery and, when commit is set, has it
// committed before answering.
type referenceHandler struct {
	secret string
	commit func(ctx context.Context, body []byte) error // nil: store nothing
}

func (h *referenceHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, refMaxRequest+1))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(body) > refMaxRequest {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	}
	_, err = scheme.Sume{Tolerance: refTolerance}.Verify(r.Header, body, []scheme.Secret{{Key: []byte(h.secret)}}, time.Now())
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if h.commit != nil {
		if err := h.commit(r.Context(), body); err != nil {
			fmt.Fprintln(os.Stderr, err)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// jobID reads the job_id of a body, as commit-each does: encoding/json.
func jobID(body []byte) (string, error) {
	var doc struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.JobID == "" {
		return "", errors.New("commit: body has no job_id")
	}
	return doc.JobID, nil
}

// commitOne stores body under its job_id in one IMMEDIATE transaction; a
// repeat of a stored job changes nothing. It fails on a body without a
// job_id and on any database error.
func commitOne(ctx context.Context, db *sql.DB, body []byte) error {
	id, err := jobID(body)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit: begin: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (id, body) VALUES (?, ?) ON CONFLICT(id) DO NOTHING`,
		id, body); err != nil {
		return fmt.Errorf("commit: insert %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// groupWriter is group-commit's store: inbox.GroupCommit on the one
// connection of db, each batch one IMMEDIATE transaction of prepared
// inserts into referenceSchema's table, answered once it has committed,
// and beside it a PASSIVE checkpoint every refCheckpointEvery on a
// connection of its own, as inbox's SQLite store runs (sqlite/checkpoint.go),
// so that the writer's commits copy WAL pages into the database no more
// often than inbox's do.
type groupWriter struct {
	db     *sql.DB
	ckpt   *sql.DB
	insert *sql.Stmt
	g      *inbox.GroupCommit[refRow]
	stop   chan struct{}
	done   sync.WaitGroup
}

// refRow is one delivery group-commit stores.
type refRow struct {
	id   string
	body []byte
}

// refRules are what group-commit's classifier takes: the bench's event.
var refRules = inbox.Rules{Events: []string{"job.completed"}}

// refCheckpointEvery is inbox's checkpointer's tick.
const refCheckpointEvery = 100 * time.Millisecond

// startGroupWriter starts group-commit's writer on db, whose file it
// checkpoints through a connection of its own, until close.
func startGroupWriter(ctx context.Context, db *sql.DB, path string) (*groupWriter, error) {
	insert, err := db.PrepareContext(ctx, `INSERT INTO deliveries (id, body) VALUES (?, ?) ON CONFLICT(id) DO NOTHING`)
	if err != nil {
		return nil, fmt.Errorf("group-commit: %w", err)
	}
	ckpt, err := openReferenceDB(ctx, path)
	if err != nil {
		insert.Close()
		return nil, err
	}
	w := &groupWriter{db: db, ckpt: ckpt, insert: insert, stop: make(chan struct{})}
	w.g = inbox.NewGroupCommit(inbox.GroupCommit[refRow]{MaxBatch: inbox.DefaultMaxBatch, Commit: w.commit, Stop: w.stop})
	w.done.Go(w.g.Run)
	w.done.Go(w.checkpoint)
	return w, nil
}

// put classifies body as inbox does and returns once the batch that holds
// it has committed. A body inbox would not store as new fails. It waits
// under no timer: inbox's store shares one a millisecond, and a timer per
// request would be a cost inbox does not pay. A commit that hangs holds
// the request until the bench's own request timeout gives up on it.
func (w *groupWriter) put(_ context.Context, body []byte) error {
	d := inbox.Classify("", inbox.Named{}, body, 0, refRules)
	if d.Status != inbox.StatusNew {
		return fmt.Errorf("commit: %s body, not stored", d.Reason)
	}
	ctx := context.Background()
	return w.g.Send(ctx, ctx, &inbox.Write[refRow]{Op: refRow{id: d.Key, body: body}}).Err
}

// commit stores batch in one transaction; any error fails the whole batch.
func (w *groupWriter) commit(batch []*inbox.Write[refRow]) ([]inbox.Written, error) {
	out := make([]inbox.Written, len(batch))
	ctx := context.Background()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return out, fmt.Errorf("commit: begin: %w", err)
	}
	insert := tx.StmtContext(ctx, w.insert)
	for _, r := range batch {
		if _, err := insert.ExecContext(ctx, r.Op.id, r.Op.body); err != nil {
			tx.Rollback()
			return out, fmt.Errorf("commit: insert %s: %w", r.Op.id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return out, fmt.Errorf("commit: %w", err)
	}
	return out, nil
}

// checkpoint copies committed WAL pages into the database every
// refCheckpointEvery until close. The first error is printed; the writer
// meets any that stays.
func (w *groupWriter) checkpoint() {
	t := time.NewTicker(refCheckpointEvery)
	defer t.Stop()
	failed := false
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			if _, err := w.ckpt.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil && !failed {
				failed = true
				fmt.Fprintln(os.Stderr, "group-commit: checkpoint:", err)
			}
		}
	}
}

// close stops the writer once the commit under way has ended, and the
// checkpoints.
func (w *groupWriter) close() {
	close(w.stop)
	w.done.Wait()
	w.insert.Close()
	w.ckpt.Close()
}

// openReferencePG opens the commit-each-pg pool on the database at dsn
// (its search_path the run's schema) and makes its table. Its errors never
// carry the URL, which may hold a password.
func openReferencePG(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("open reference db: the PostgreSQL URL does not parse")
	}
	cfg.MaxConns = refPGConns
	ctx, cancel := context.WithTimeout(ctx, refBusyTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open reference db: %w", err)
	}
	if _, err := pool.Exec(ctx, referencePGSchema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open reference db: %w", err)
	}
	return pool, nil
}

// commitOnePG stores body under its job_id in a PostgreSQL transaction of
// its own (BEGIN, INSERT, COMMIT: the commit waits for its WAL flush), as
// commitOne does on SQLite; a repeat changes nothing. It fails on a body
// without a job_id, on any database error, and past refBusyTimeout.
func commitOnePG(ctx context.Context, pool *pgxpool.Pool, body []byte) error {
	id, err := jobID(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, refBusyTimeout)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("commit: begin: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	if _, err := tx.Exec(ctx, `INSERT INTO deliveries (id, body) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, body); err != nil {
		return fmt.Errorf("commit: insert %s: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
