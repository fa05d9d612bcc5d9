package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"inbox/bench/internal/inboxmod"
)

// maxPrefill bounds -prefill: 50 million rows of 1 KiB are about 60 GB.
const maxPrefill = 50_000_000

// prefillBatch is how many rows one statement of the fill inserts.
const prefillBatch = 100_000

// prefillSQL inserts ?1 rows numbered from ?2 as an inbox that has run for a
// while holds them: handed on (done), received over the last 30 days, keyed
// by job ids scattered over the key space that the run's own ids fall in
// (job_<8 hex digits>_<n>), with a body of ?3 bytes. It runs in SQL alone, so millions of rows take seconds,
// not the hours the HTTP path would.
const prefillSQL = `INSERT INTO events
	(id, job_id, status, event, job_status, body, size, sha256, delivery_ts,
	 received_at, deliveries, last_seen_at, updated_at, done_at, source)
	WITH RECURSIVE n(i) AS (SELECT ?2 UNION ALL SELECT i + 1 FROM n WHERE i < ?2 + ?1 - 1)
	SELECT id, id, 'done', 'job.completed', 'COMPLETED', zeroblob(?3), ?3, lower(hex(randomblob(32))),
		t / 1000, t, 1, t, t, t, 'sume'
	FROM (SELECT printf('job_%08x_%d', (i * 2654435761) % 4294967296, i) AS id,
		?4 - (i * 7919) % 2592000000 AS t FROM n)`

// prefillTemplate makes, in dir, a database with inbox's schema and rows
// stored rows, once per run; each inbox run then starts from a copy. The
// schema is the module's schema.sql, the one inbox serve applies.
func prefillTemplate(ctx context.Context, dir string, rows int64, bodySize int) (string, error) {
	schema, err := inboxmod.Schema(ctx)
	if err != nil {
		return "", fmt.Errorf("prefill: %w", err)
	}
	path := filepath.Join(dir, "prefill-template.db")
	// No fsync while filling (synchronous OFF): the file is the bench's
	// own scratch, checkpointed and closed before any run copies it.
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		return "", fmt.Errorf("prefill: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, string(schema)); err != nil {
		return "", fmt.Errorf("prefill: apply schema.sql: %w", err)
	}
	now := time.Now().UnixMilli()
	for from := int64(0); from < rows; from += prefillBatch {
		n := min(prefillBatch, rows-from)
		if _, err := db.ExecContext(ctx, prefillSQL, n, from, bodySize, now); err != nil {
			return "", fmt.Errorf("prefill: insert rows %d to %d: %w", from, from+n, err)
		}
	}
	var got int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&got); err != nil {
		return "", fmt.Errorf("prefill: %w", err)
	}
	if got != rows {
		return "", fmt.Errorf("prefill: %d rows stored, want %d", got, rows)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return "", fmt.Errorf("prefill: checkpoint: %w", err)
	}
	if err := db.Close(); err != nil {
		return "", fmt.Errorf("prefill: %w", err)
	}
	return path, nil
}

// copyDB copies the database file at src (checkpointed, so it has no
// -wal) to dst, made readable by its owner only, as inbox makes its own.
func copyDB(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}
