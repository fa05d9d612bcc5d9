package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestKeyedRowsEnterNoPartialIndex checks that a new row of another source
// enters no index but the primary key and the queue, as a Sume row: its
// job_id is its row id, so events_beside_job (job_id <> id) does not take
// it, while a conflict beside it names that row.
func TestKeyedRowsEnterNoPartialIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	rules := inbox.Rules{Events: []string{"push"}}
	for _, d := range []inbox.Delivery{
		keyed("gh", "d1", "push", []byte(`{"a":1}`), 1, rules),
		keyed("gh", "d1", "ping", []byte(`{"a":2}`), 1, rules), // parked beside d1
	} {
		if _, err := s.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, job_id FROM events WHERE job_id <> id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var beside []string
	for rows.Next() {
		var id, job string
		if err := rows.Scan(&id, &job); err != nil {
			t.Fatal(err)
		}
		beside = append(beside, id+" -> "+job)
	}
	if len(beside) != 1 || !strings.HasSuffix(beside[0], " -> gh/d1") {
		t.Errorf("rows in events_beside_job: %v, want only the conflict row, naming gh/d1", beside)
	}
}
