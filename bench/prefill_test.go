package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestPrefillTemplate fills a database through SQL as -prefill does and
// checks it is one inbox serve takes: the schema's tables, the rows asked
// for with distinct ids in inbox's key space, each done and of the body
// size, and a copy that opens to the same rows.
func TestPrefillTemplate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const rows = 250_001 // more than one statement's worth
	path, err := prefillTemplate(ctx, dir, rows, 300)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "copy.db")
	if err := copyDB(path, cp); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", cp+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, ids, done, sized, jobs, tables int64
	err = db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT id), sum(status = 'done' AND done_at IS NOT NULL),
		sum(size = 300 AND length(body) = 300), sum(id = job_id AND id GLOB 'job_*_*')
		FROM events`).Scan(&n, &ids, &done, &sized, &jobs)
	if err != nil {
		t.Fatal(err)
	}
	if n != rows || ids != rows || done != rows || sized != rows || jobs != rows {
		t.Errorf("rows %d, distinct ids %d, done %d, of the size %d, job-keyed %d: want %d each", n, ids, done, sized, jobs, rows)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table'
		AND name IN ('events', 'refusals', 'expectations')`).Scan(&tables); err != nil || tables != 3 {
		t.Errorf("%d of the schema's tables, err %v", tables, err)
	}
}
