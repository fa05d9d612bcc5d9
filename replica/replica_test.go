package replica_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/superfly/ltx"

	"inbox/inbox"
	"inbox/replica"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// delivery is a job event whose body, padded to about a page, makes each
// row take at least one WAL frame.
func delivery(i int) inbox.Delivery {
	body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_%06d","status":"COMPLETED","payload":{"pad":"%s"}}`, i, strings.Repeat("x", 3000))
	return inbox.Classify("", inbox.Named{}, []byte(body), 1, inbox.Rules{Events: []string{"job.completed"}, MaxBody: 1 << 20})
}

// open opens a store at dir/inbox.db with its checkpoints left to a
// Replicator to dir/replica, as serve --replica does.
func open(t *testing.T, dir string, cfg replica.Config) (*replica.Store, string) {
	t.Helper()
	db := filepath.Join(dir, "inbox.db")
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{Schema: sqlitetest.Schema(t), NoCheckpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Client == nil {
		cfg.Client = file.NewReplicaClient(filepath.Join(dir, "replica"))
	}
	cfg.Shown = "file://" + filepath.Join(dir, "replica")
	cfg.Log = zerolog.Nop()
	r, err := replica.Open(context.Background(), db, cfg)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	rs := replica.Wrap(s, r)
	t.Cleanup(func() { rs.Close() })
	return rs, db
}

// restored restores dir/replica into a new file and returns its job ids.
func restored(t *testing.T, dir string) map[string]bool {
	t.Helper()
	to := filepath.Join(t.TempDir(), "restored.db")
	cfg := replica.Config{Client: file.NewReplicaClient(filepath.Join(dir, "replica")), Shown: "file://replica"}
	check := func(ctx context.Context, path string) error {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Schema: sqlitetest.Schema(t), ReadOnly: true, MustExist: true})
		if err != nil {
			return err
		}
		return s.Close()
	}
	if err := replica.Restore(context.Background(), cfg, to, time.Time{}, check); err != nil {
		t.Fatal(err)
	}
	s := sqlitetest.MustOpenPath(t, to, sqlite.Options{ReadOnly: true, MustExist: true})
	ids := map[string]bool{}
	err := s.Each(context.Background(), inbox.Filter{}, func(e inbox.Event) error {
		ids[e.ID] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkpoints sums Litestream's checkpoint counter for the database at db.
func checkpoints(t *testing.T, db string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "litestream_checkpoint_count" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "db" && l.GetValue() == db {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// load puts n deliveries from senders goroutines and returns the ids
// whose Put succeeded.
func load(t *testing.T, s inbox.Store, n, senders int, between func(i int)) []string {
	t.Helper()
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	next := make(chan int)
	for range senders {
		wg.Go(func() {
			for i := range next {
				d := delivery(i)
				if _, err := s.Put(context.Background(), d); err != nil {
					t.Errorf("put %s: %v", d.Key, err)
					continue
				}
				mu.Lock()
				acked = append(acked, d.Key)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		if between != nil {
			between(i)
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return acked
}

// TestCheckpointsHandedOver writes under load across many 1,000-frame
// checkpoints and timed ones, with the store's own checkpoints off, and
// finds every committed row in a restore of the replica: no frame was
// checkpointed away before Litestream copied it.
func TestCheckpointsHandedOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, db := open(t, dir, replica.Config{SyncInterval: 50 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	// Pauses let the timed checkpoint, not only the 1,000-frame one, run
	// between bursts.
	acked := load(t, s, 6000, 16, func(i int) {
		if i%1500 == 1499 {
			time.Sleep(300 * time.Millisecond)
		}
	})
	t.Logf("litestream checkpoints: %v", checkpoints(t, db))
	if got := checkpoints(t, db); got < 5 {
		t.Errorf("litestream checkpoints: got %v, want at least 5 (6000 pages through a 1,000-frame WAL, and timed ones)", got)
	}
	wal, err := os.Stat(db + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if frames := wal.Size() / 4120; frames > 4000 {
		t.Errorf("WAL holds %d frames: checkpoints did not restart it", frames)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ids := restored(t, dir)
	if len(acked) != 6000 {
		t.Fatalf("acked %d of 6000", len(acked))
	}
	for _, id := range acked {
		if !ids[id] {
			t.Fatalf("row %s committed but not in the restored replica (%d rows there)", id, len(ids))
		}
	}
}

// TestSyncEveryAckOnReplica restores the replica while serve would still
// run (no Close, no last sync): under Sync, every Put that returned is in
// it.
func TestSyncEveryAckOnReplica(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := open(t, dir, replica.Config{Sync: true, SyncInterval: time.Hour, CheckpointInterval: 100 * time.Millisecond})
	acked := load(t, s, 3000, 32, nil)
	ids := restored(t, dir)
	for _, id := range acked {
		if !ids[id] {
			t.Fatalf("row %s acknowledged under Sync but not on the replica", id)
		}
	}
	st := s.Replica().Status()
	if st.LastSuccess.IsZero() || st.Errors != 0 || !st.Sync {
		t.Errorf("status: got %+v, want a success, no error, sync", st)
	}
}

// TestSyncReplicaGone replaces the replica's folder with a file, which no
// one, root included, can write into: under Sync, Put fails with
// ErrBehind; once the folder is back, Puts succeed again and every one
// that succeeded is on the replica.
func TestSyncReplicaGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := open(t, dir, replica.Config{Sync: true, SyncInterval: 50 * time.Millisecond, WaitTimeout: 2 * time.Second})
	acked := load(t, s, 50, 4, nil)
	rep := filepath.Join(dir, "replica")
	if err := os.Rename(rep, rep+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rep, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(context.Background(), delivery(100))
	if !errors.Is(err, replica.ErrBehind) {
		t.Fatalf("put with the replica gone: got %v, want ErrBehind", err)
	}
	if st := s.Replica().Status(); st.Error == "" || st.Errors == 0 {
		t.Errorf("status with the replica gone: got %+v, want its error", st)
	}
	if err := os.Remove(rep); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rep+".away", rep); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, load(t, s, 50, 4, nil)...)
	if st := s.Replica().Status(); st.Error != "" {
		t.Errorf("status once back: got %+v, want no error", st)
	}
	ids := restored(t, dir)
	for _, id := range append(acked, delivery(100).Key) {
		if !ids[id] {
			t.Fatalf("row %s not on the replica once it was back", id)
		}
	}
}

// downClient is the file client behind a switch: while down, Init and
// every call fail, as an S3, SFTP or NATS client does when its server
// cannot be reached.
type downClient struct {
	litestream.ReplicaClient
	down atomic.Bool
}

var errDown = errors.New("dial tcp 192.0.2.1:22: connect: connection refused")

func (c *downClient) Init(ctx context.Context) error {
	if c.down.Load() {
		return errDown
	}
	return c.ReplicaClient.Init(ctx)
}

func (c *downClient) LTXFiles(ctx context.Context, level int, seek ltx.TXID, meta bool) (ltx.FileIterator, error) {
	if err := c.Init(ctx); err != nil {
		return nil, err
	}
	return c.ReplicaClient.LTXFiles(ctx, level, seek, meta)
}

func (c *downClient) OpenLTXFile(ctx context.Context, level int, lo, hi ltx.TXID, offset, size int64) (io.ReadCloser, error) {
	if err := c.Init(ctx); err != nil {
		return nil, err
	}
	return c.ReplicaClient.OpenLTXFile(ctx, level, lo, hi, offset, size)
}

func (c *downClient) WriteLTXFile(ctx context.Context, level int, lo, hi ltx.TXID, r io.Reader) (*ltx.FileInfo, error) {
	if err := c.Init(ctx); err != nil {
		return nil, err
	}
	return c.ReplicaClient.WriteLTXFile(ctx, level, lo, hi, r)
}

func (c *downClient) DeleteLTXFiles(ctx context.Context, a []*ltx.FileInfo) error {
	if err := c.Init(ctx); err != nil {
		return err
	}
	return c.ReplicaClient.DeleteLTXFiles(ctx, a)
}

// TestStartReplicaDown opens a Replicator on a replica that cannot be
// reached, as a VM boots while its S3, SFTP or NATS server is down: Open
// succeeds, Put fails with ErrBehind under Sync, and once the replica
// answers Puts succeed again and every row is on it.
func TestStartReplicaDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client := &downClient{ReplicaClient: file.NewReplicaClient(filepath.Join(dir, "replica"))}
	client.down.Store(true)
	s, _ := open(t, dir, replica.Config{Client: client, Sync: true, SyncInterval: 50 * time.Millisecond,
		WaitTimeout: 300 * time.Millisecond})
	var keys []string
	for i := range 3 {
		keys = append(keys, delivery(i).Key)
		if _, err := s.Put(context.Background(), delivery(i)); !errors.Is(err, replica.ErrBehind) {
			t.Fatalf("put with the replica down since the start: got %v, want ErrBehind", err)
		}
	}
	st := s.Replica().Status()
	if !strings.Contains(st.Error, "connection refused") || st.Errors == 0 || !st.LastSuccess.IsZero() {
		t.Errorf("status with the replica down since the start: got %+v, want its error and no success", st)
	}
	client.down.Store(false)
	for i := 3; ; i++ {
		keys = append(keys, delivery(i).Key)
		_, err := s.Put(context.Background(), delivery(i))
		if err == nil {
			break
		}
		if !errors.Is(err, replica.ErrBehind) || i > 200 {
			t.Fatalf("put %d once the replica answers: %v", i, err)
		}
	}
	if st := s.Replica().Status(); st.Error != "" || st.LastSuccess.IsZero() {
		t.Errorf("status once the replica answers: got %+v, want a success", st)
	}
	ids := restored(t, dir)
	for _, id := range keys {
		if !ids[id] {
			t.Errorf("row %s not on the replica once it answered", id)
		}
	}
}

// TestRestoreRefusesExisting: a restore never replaces a file.
func TestRestoreRefusesExisting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := open(t, dir, replica.Config{SyncInterval: 50 * time.Millisecond})
	load(t, s, 10, 2, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "there.db")
	if err := os.WriteFile(to, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := replica.Config{Client: file.NewReplicaClient(filepath.Join(dir, "replica")), Shown: "file://replica"}
	err := replica.Restore(context.Background(), cfg, to, time.Time{}, nil)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("restore onto a file: got %v, want it refused", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "keep me" {
		t.Errorf("the file was changed: %q", b)
	}
	empty := replica.Config{Client: file.NewReplicaClient(filepath.Join(dir, "nothing")), Shown: "file://nothing"}
	err = replica.Restore(context.Background(), empty, filepath.Join(t.TempDir(), "new.db"), time.Time{}, nil)
	if !errors.Is(err, replica.ErrEmpty) {
		t.Errorf("restore from an empty replica: got %v, want ErrEmpty", err)
	}
}
