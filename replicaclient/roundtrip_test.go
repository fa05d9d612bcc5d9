package replicaclient_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/benbjohnson/litestream"
	_ "modernc.org/sqlite"
)

// roundTrip replicates a small WAL-mode SQLite file through client with
// Litestream, in two syncs, then restores it from the replica alone into a
// new file and checks that every row came back.
func roundTrip(t *testing.T, client litestream.ReplicaClient) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { closeClient(t, client) })
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")

	app := openSQLite(t, src)
	if _, err := app.Exec(`CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}

	db := litestream.NewDB(src)
	db.MonitorInterval = 0 // synced by hand below
	replica := litestream.NewReplicaWithClient(db, client)
	replica.MonitorEnabled = false
	db.Replica = replica
	if err := db.Open(); err != nil {
		t.Fatalf("open litestream db: %v", err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })

	var want []string
	for batch := range 2 {
		for i := range 50 {
			body := fmt.Sprintf("batch %d row %d", batch, i)
			if _, err := app.Exec(`INSERT INTO note (body) VALUES (?)`, body); err != nil {
				t.Fatal(err)
			}
			want = append(want, body)
		}
		if err := db.Sync(ctx); err != nil {
			t.Fatalf("sync db: %v", err)
		}
		if err := replica.Sync(ctx); err != nil {
			t.Fatalf("sync replica %s: %v", client.Type(), err)
		}
	}
	if err := db.Close(ctx); err != nil {
		t.Fatalf("close litestream db: %v", err)
	}

	// The restore knows nothing of the source: only the client.
	out := filepath.Join(t.TempDir(), "restored.db")
	restorer := litestream.NewReplicaWithClient(nil, client)
	if err := restorer.Restore(ctx, litestream.RestoreOptions{OutputPath: out, IntegrityCheck: litestream.IntegrityCheckFull}); err != nil {
		t.Fatalf("restore from %s: %v", client.Type(), err)
	}
	got := bodies(t, openSQLite(t, out))
	if !slices.Equal(got, want) {
		t.Fatalf("restored %d rows %q..., want %d rows %q...", len(got), head(got), len(want), head(want))
	}
}

// closeClient closes client's connection if it keeps one (nats does).
func closeClient(t *testing.T, client litestream.ReplicaClient) {
	t.Helper()
	if c, ok := client.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Errorf("close %s client: %v", client.Type(), err)
		}
	}
}

func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode of %s: %q, %v; want wal", path, mode, err)
	}
	return db
}

func bodies(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT body FROM note ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func head(s []string) []string { return s[:min(len(s), 3)] }
