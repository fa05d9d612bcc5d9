package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"inbox/inbox"
)

// RecordRefusals writes refusals remembered while the store was down,
// adding each one's count and widening its times onto what the key already
// has. A key whose row exists by now is left out: a retry landed before
// the refusal could be written, so nothing is missing. It fails, writing
// nothing, when the store cannot take the write; the caller keeps them.
func (s *Store) RecordRefusals(ctx context.Context, refusals []inbox.Refusal) error {
	if len(refusals) == 0 {
		return nil
	}
	err := s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, r := range refusals {
			r = r.Normalized()
			// WHERE on the SELECT: SQLite needs it to read the upsert's ON.
			_, err := tx.ExecContext(ctx, `INSERT INTO refusals
				(source, key, job_id, event, first_refused_at, last_refused_at, refusals)
				SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE NOT EXISTS (SELECT 1 FROM events WHERE id = ?2)
				ON CONFLICT(source, key) DO UPDATE SET
					first_refused_at = min(first_refused_at, excluded.first_refused_at),
					last_refused_at = max(last_refused_at, excluded.last_refused_at),
					refusals = refusals + excluded.refusals,
					job_id = coalesce(excluded.job_id, job_id),
					event = coalesce(excluded.event, event)`,
				r.Source, r.Key, nullable(r.JobID), nullable(r.Event), millis(r.First), millis(r.Last), r.Count)
			if err != nil {
				return fmt.Errorf("record refusal of %s: %w", r.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %d refusals: %w", len(refusals), err)
	}
	return nil
}

// Missed returns the refused keys not delivered since, first refused
// first; with before set, only those first refused before it. A database
// that has no refusals table yet (made by an earlier inbox, opened
// read-only) has none.
func (s *Store) Missed(ctx context.Context, before time.Time) ([]inbox.Refusal, error) {
	if ok, err := s.hasTable(ctx, "refusals"); err != nil || !ok {
		return nil, err
	}
	limit := int64(1<<63 - 1)
	if !before.IsZero() {
		limit = millis(before)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT source, key, coalesce(job_id, ''), coalesce(event, ''),
		first_refused_at, last_refused_at, refusals FROM refusals WHERE first_refused_at < ?
		ORDER BY first_refused_at, source, key`, limit)
	if err != nil {
		return nil, fmt.Errorf("read missed: %w", err)
	}
	defer rows.Close()
	var out []inbox.Refusal
	for rows.Next() {
		var r inbox.Refusal
		var first, last int64
		if err := rows.Scan(&r.Source, &r.Key, &r.JobID, &r.Event, &first, &last, &r.Count); err != nil {
			return nil, fmt.Errorf("read missed: %w", err)
		}
		r.First, r.Last = fromMillis(first), fromMillis(last)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read missed: %w", err)
	}
	return out, nil
}

// hasTable reports whether the database has the named table.
func (s *Store) hasTable(ctx context.Context, name string) (bool, error) {
	var n int
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look for table %s: %w", name, err)
	}
	return n == 1, nil
}

// settleArrivals runs in the writer's transaction, after the batch's
// deliveries: each one clears its key's refusal and settles its job's
// waiting expectation as done, so a key is never both stored and missing.
// While there is nothing to settle it costs one prepared query per batch.
// A database that had no refusals or expectations table at open (the admin
// commands open it without the schema) is looked at for them in each
// commit, and settled with statements parsed for it, once they appear.
func settleArrivals(ctx context.Context, st *txStmts, batch []*putRequest, now int64) error {
	pending := st.get(stmtPending)
	var clear, settle execer
	if pending != nil {
		clear, settle = st.get(stmtClearRefusal), st.get(stmtSettleExpectation)
	} else {
		var tables bool
		if err := st.tx.QueryRowContext(ctx, settleTablesSQL).Scan(&tables); err != nil {
			return fmt.Errorf("settle arrivals: %w", err)
		}
		if !tables {
			return nil
		}
		clear, settle = textExec{st.tx, clearRefusalSQL}, textExec{st.tx, settleExpectationSQL}
	}
	var waiting bool
	var err error
	if pending != nil {
		err = pending.QueryRowContext(ctx).Scan(&waiting)
	} else {
		err = st.tx.QueryRowContext(ctx, pendingSQL).Scan(&waiting)
	}
	if err != nil {
		return fmt.Errorf("settle arrivals: %w", err)
	}
	if !waiting {
		return nil
	}
	for _, req := range batch {
		if req.op != nil {
			continue
		}
		d := req.d
		if _, err := clear.ExecContext(ctx, inbox.SourceOf(d), d.Key); err != nil {
			return fmt.Errorf("clear refusal of %s: %w", d.Key, err)
		}
		if d.JobID == "" {
			continue
		}
		if _, err := settle.ExecContext(ctx, now, inbox.SourceOf(d), d.JobID); err != nil {
			return fmt.Errorf("settle expectation of %s: %w", d.JobID, err)
		}
	}
	return nil
}
