// Package replica copies the SQLite store off the machine while serve
// writes it, with Litestream as a library, and restores a database from
// such a copy. A Replicator owns the WAL's checkpoints while it runs (the
// store's own are off, see sqlite.Options.NoCheckpoints): Litestream copies
// the WAL's frames before it checkpoints them, so no frame is checkpointed
// away unseen. It syncs on its own clock (every SyncInterval) and, for
// --replica-sync, as soon as a delivery waits for its commit to reach the
// replica (Wait).
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/rs/zerolog"

	"inbox/inbox"
)

// Defaults for Config fields left zero.
const (
	// DefaultRetention is how long the replica keeps the history a
	// --timestamp restore can go back into.
	DefaultRetention = 72 * time.Hour
	// DefaultSnapshotInterval is how often a full snapshot is written to
	// the replica: a restore reads the last one and what came after.
	DefaultSnapshotInterval = 24 * time.Hour
	// DefaultSyncInterval is how often the WAL's new frames are sent: the
	// replica trails the file by about this much in the default mode.
	DefaultSyncInterval = time.Second
	// DefaultCheckpointInterval is the timed checkpoint: a WAL that did not
	// reach CheckpointFrames is copied into the database this often.
	DefaultCheckpointInterval = time.Minute
	// DefaultCheckpointFrames is the WAL's length, in frames, past which
	// it is checkpointed, as the store's own writer did (SQLite's
	// default).
	DefaultCheckpointFrames = 1_000
	// DefaultWaitTimeout bounds how long a delivery waits for its commit to
	// reach the replica under --replica-sync before it is answered 503.
	DefaultWaitTimeout = 3 * time.Second
	// maxRetryWait bounds the wait between attempts while the replica
	// cannot be reached: it doubles from SyncInterval up to this.
	maxRetryWait = 10 * time.Second
	// syncTimeout bounds one sync: a replica that hangs counts as
	// unreachable.
	syncTimeout = 30 * time.Second
	// closeTimeout bounds the last sync at Close.
	closeTimeout = 10 * time.Second
)

// ErrBehind is what Wait returns when the commit did not reach the replica
// in time: the caller answers 503, as for any store outage.
var ErrBehind = fmt.Errorf("the replica did not take the commit (%w)", inbox.ErrUnconfirmed)

// Config configures Open.
type Config struct {
	// Client is the replica's storage (see replicaclient.New).
	Client litestream.ReplicaClient
	// Shown is the replica's URL as logs and stats show it: no password,
	// no secret (replicaclient.Redact).
	Shown string
	// Secrets are strings no log line or status may hold (the URL's
	// password); errors are scrubbed of them.
	Secrets []string
	// Sync makes Wait wait: a delivery is answered only once its commit is
	// on the replica (--replica-sync).
	Sync bool
	// Retention, SnapshotInterval, SyncInterval, CheckpointInterval,
	// CheckpointFrames and WaitTimeout default to the Default* constants.
	Retention          time.Duration
	SnapshotInterval   time.Duration
	SyncInterval       time.Duration
	CheckpointInterval time.Duration
	CheckpointFrames   int
	WaitTimeout        time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	Log zerolog.Logger
}

func (c *Config) defaults() {
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = min(DefaultSnapshotInterval, c.Retention)
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.CheckpointFrames <= 0 {
		c.CheckpointFrames = DefaultCheckpointFrames
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Check refuses settings Litestream cannot run with.
func (c Config) Check() error {
	c.defaults()
	if c.SnapshotInterval > c.Retention {
		return fmt.Errorf("replica snapshot interval %s is longer than its retention %s: a restore needs a snapshot within the retention", c.SnapshotInterval, c.Retention)
	}
	return nil
}

// Replicator replicates one SQLite database. Its methods are safe for
// concurrent use.
type Replicator struct {
	cfg    Config
	path   string
	db     *litestream.DB
	ls     *litestream.Store
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	status statusFile

	mu      sync.Mutex
	want    uint64        // the latest sync a waiter asked for
	synced  uint64        // every sync up to it has reached the replica
	failed  uint64        // every sync up to it failed
	changed chan struct{} // closed and replaced after each sync
	lastOK  time.Time     // when the last sync that reached the replica began
	okAt    time.Time     // when it ended
	err     error         // the last sync's error, nil when it reached the replica
	errs    int64         // syncs that failed
	opened  time.Time

	closeOnce sync.Once
	closeErr  error
}

// Open starts replicating the database at path, which must exist in WAL
// mode, with its checkpoints left to the Replicator. It does not contact
// the replica: one that cannot be reached as Open runs is, like one that
// goes away later, a sync that fails and is retried (see run). Until the
// first sync reaches it, though, the WAL is not checkpointed and grows:
// Litestream starts following the file only once it has read where the
// replica stands. Open fails when the settings are refused or Litestream
// cannot open the database's own files.
func Open(ctx context.Context, path string, cfg Config) (*Replicator, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg.defaults()
	quiet := slog.New(slog.DiscardHandler) // Litestream's errors may name the replica's address: Replicator logs them, scrubbed
	db := litestream.NewDB(path)
	db.MonitorInterval = 0 // synced by the Replicator's loop instead
	db.CheckpointInterval = cfg.CheckpointInterval
	db.MinCheckpointPageN = cfg.CheckpointFrames
	db.ShutdownSyncTimeout = closeTimeout
	rep := litestream.NewReplicaWithClient(db, deferredInit{cfg.Client})
	rep.MonitorEnabled = false
	db.Replica = rep
	levels := litestream.CompactionLevels{
		{Level: 0},
		{Level: 1, Interval: 30 * time.Second},
		{Level: 2, Interval: 5 * time.Minute},
		{Level: 3, Interval: time.Hour},
	}
	ls := litestream.NewStore([]*litestream.DB{db}, levels)
	ls.Logger = quiet
	ls.SnapshotInterval = cfg.SnapshotInterval
	ls.SnapshotRetention = cfg.Retention
	ls.ShutdownSyncTimeout = closeTimeout
	db.SetLogger(quiet)
	if err := ls.Open(ctx); err != nil {
		return nil, fmt.Errorf("replica %s: %s", cfg.Shown, scrub(err, cfg.Secrets))
	}
	now := cfg.Now()
	r := &Replicator{cfg: cfg, path: path, db: db, ls: ls, kick: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{}), changed: make(chan struct{}), opened: now, lastOK: now,
		status: statusFile{path: StatusPath(path)}}
	r.kick <- struct{}{} // the first sync at once: it takes Litestream's hold on the WAL
	go r.run()
	return r, nil
}

// deferredInit is a replica client whose Init, which Litestream calls as
// it opens the database, does nothing: a replica that cannot be reached
// then would stop serve from starting. Each client connects on its first
// call instead (the file client needs no connection, the S3, SFTP and NATS
// ones call Init from every method), so a replica that is not there yet
// shows as a failed sync.
type deferredInit struct{ litestream.ReplicaClient }

func (deferredInit) Init(context.Context) error { return nil }

// StatusPath is where serve keeps the replica's state for inbox stats and
// inbox alert, beside Litestream's own files for the database at db.
func StatusPath(db string) string {
	dir, file := filepath.Split(db)
	return filepath.Join(dir, "."+file+litestream.MetaDirSuffix, "inbox-replica.json")
}

// run syncs every SyncInterval, and at once when a waiter asks, until
// Close. While the replica cannot be reached it waits between attempts,
// from SyncInterval doubling up to maxRetryWait, asked or not: a replica
// that is down is not contacted for every delivery.
func (r *Replicator) run() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.SyncInterval)
	defer t.Stop()
	wait := r.cfg.SyncInterval
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		if err := r.syncOnce(); err == nil {
			wait = r.cfg.SyncInterval
			continue
		}
		select {
		case <-r.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, max(maxRetryWait, r.cfg.SyncInterval))
	}
}

// syncOnce sends what the WAL holds now to the replica and tells the
// waiters that asked before it began.
func (r *Replicator) syncOnce() error {
	r.mu.Lock()
	target := r.want
	r.mu.Unlock()
	start := r.cfg.Now()
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	err := r.db.SyncAndWait(ctx)
	cancel()
	r.mu.Lock()
	never := r.okAt.IsZero()
	if err == nil {
		r.synced, r.lastOK, r.okAt = target, start, r.cfg.Now()
		switch {
		case r.err != nil && never:
			r.cfg.Log.Info().Str("replica", r.cfg.Shown).Msg("replica reached: replicating")
		case r.err != nil:
			r.cfg.Log.Info().Str("replica", r.cfg.Shown).Msg("replica reached again: replicating")
		}
	} else {
		err = errors.New(scrub(err, r.cfg.Secrets))
		r.failed = target
		r.errs++
		if r.err == nil {
			r.cfg.Log.Error().Str("replica", r.cfg.Shown).Str("cause", err.Error()).
				Msg(r.unreachable(never))
		}
	}
	r.err = err
	close(r.changed)
	r.changed = make(chan struct{})
	st := r.statusLocked(r.cfg.Now())
	r.mu.Unlock()
	r.status.write(st)
	return err
}

// unreachable is what is logged, once, when the replica stops taking
// syncs, or never took one since serve started (never).
func (r *Replicator) unreachable(never bool) string {
	what := "replica cannot be reached: "
	if never {
		what = "replica cannot be reached (not since serve started): "
	}
	const retried = "; retried after 1s, then less often, at least every 10s"
	if r.cfg.Sync {
		return what + "deliveries get 503 (their keys kept for inbox missed) and /readyz fails until it takes a sync" + retried
	}
	return what + "deliveries go on, the replica falls behind (inbox_replica_lag_seconds, inbox alert --replica-lag) until it takes a sync" + retried
}

// Wait returns once every commit made before it was called has reached
// the replica, or ErrBehind when a sync fails or WaitTimeout (or ctx)
// runs out first. Without Config.Sync it returns nil at once.
func (r *Replicator) Wait(ctx context.Context) error {
	if !r.cfg.Sync {
		return nil
	}
	r.mu.Lock()
	r.want++
	mine := r.want
	changed := r.changed
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	timer := time.NewTimer(r.cfg.WaitTimeout)
	defer timer.Stop()
	for {
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("%w within %s", ErrBehind, r.cfg.WaitTimeout)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrBehind, ctx.Err())
		}
		r.mu.Lock()
		synced, failed, err := r.synced, r.failed, r.err
		changed = r.changed
		r.mu.Unlock()
		switch {
		case synced >= mine:
			return nil
		case failed >= mine:
			return fmt.Errorf("%w: %w", ErrBehind, err)
		}
	}
}

// Sync reports whether deliveries wait for the replica (--replica-sync).
func (r *Replicator) Sync() bool { return r.cfg.Sync }

// Status is how the replica stands now.
func (r *Replicator) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.statusLocked(r.cfg.Now())
}

func (r *Replicator) statusLocked(now time.Time) Status {
	st := Status{URL: r.cfg.Shown, Sync: r.cfg.Sync, Errors: r.errs, At: now.UTC(), Lag: now.Sub(r.lastOK).Seconds()}
	if !r.okAt.IsZero() {
		st.LastSuccess = r.okAt.UTC()
		st.Covered = r.lastOK.UTC()
	}
	if r.err != nil {
		st.Error = r.err.Error()
	}
	return st
}

// Close stops the loop, sends what the WAL holds (retrying for a few
// seconds) and releases the database. The store must be closed first:
// a commit after the last sync would not reach the replica. It fails when
// the last sync did not reach the replica.
func (r *Replicator) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout+5*time.Second)
		defer cancel()
		start := r.cfg.Now()
		// Litestream's own last sync skips a database it never opened (no
		// sync ran yet): this one opens it.
		err := r.db.SyncAndWait(ctx)
		err = errors.Join(err, r.ls.Close(ctx))
		r.mu.Lock()
		if err == nil {
			r.lastOK, r.okAt, r.err = start, r.cfg.Now(), nil
		} else {
			err = fmt.Errorf("replica %s: last sync: %s", r.cfg.Shown, scrub(err, r.cfg.Secrets))
			r.err = err
		}
		st := r.statusLocked(r.cfg.Now())
		st.Stopped = err == nil
		r.mu.Unlock()
		r.status.write(st)
		r.closeErr = err
	})
	return r.closeErr
}
