package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// reprocessBatch bounds how many rows one reprocess transaction carries, so
// the write lock is never held long enough to make the receiver answer 503.
const reprocessBatch = 100

// Selection names the parked rows Reprocess works on: the rows with IDs,
// every parked row with Reason, or with All every parked row.
type Selection struct {
	IDs    []string
	Reason Reason
	All    bool
}

// ReprocessReport counts what Reprocess did.
type ReprocessReport struct {
	// Moved is how many parked rows became new, Merged included.
	Moved int `json:"moved"`
	// Merged is how many of them were folded into the job's existing row.
	Merged int `json:"merged"`
	// Parked counts the selected rows that stay parked, by their reason now.
	Parked map[Reason]int `json:"parked"`
	// DryRun is set when every change was rolled back.
	DryRun bool `json:"dry_run"`
}

// Reprocess classifies the stored bodies of the selected parked rows again
// under rules, with each row's recorded delivery timestamp. A row that is
// now storable becomes new: it takes its job's key when the job has no row,
// takes over a job row parked on receipt (as a delivery would, contract row
// 17), or is folded into a job row that is new, done or parked by the
// dispatcher and holds the same event and status (its deliveries added, the
// parked row removed); a job row that differs leaves it parked conflict. A
// row the dispatcher parked (handler_failed, handler_rejected) that is its
// job's row becomes new with its own body. Every row made new is queued
// afresh: no attempts, no lease, no error. The rest stay parked with their reason as classified
// now. Rows are taken oldest first, in transactions of reprocessBatch rows;
// with dryRun each transaction is rolled back, so the counts are those of a
// real run except where rows of one job fall into different batches.
//
// It fails, changing nothing, when the selection is empty, or an id names
// no row or a row that is not parked; a failed batch is rolled back and the
// error says how many rows earlier batches moved.
func (s *Store) Reprocess(ctx context.Context, sel Selection, rules Rules, dryRun bool) (ReprocessReport, error) {
	rep := ReprocessReport{Parked: map[Reason]int{}, DryRun: dryRun}
	if s.write == nil {
		return rep, errors.New("reprocess: store is read-only")
	}
	ids, err := s.selectParked(ctx, sel)
	if err != nil {
		return rep, fmt.Errorf("reprocess: %w", err)
	}
	for start := 0; start < len(ids); start += reprocessBatch {
		batch := ids[start:min(start+reprocessBatch, len(ids))]
		if err := s.reprocessTx(ctx, batch, rules, dryRun, &rep); err != nil {
			return rep, fmt.Errorf("reprocess (%d rows moved before this batch): %w", rep.Moved, err)
		}
	}
	return rep, nil
}

// selectParked returns the ids of the selected parked rows, oldest first.
func (s *Store) selectParked(ctx context.Context, sel Selection) ([]string, error) {
	if len(sel.IDs) > 0 {
		for _, id := range sel.IDs {
			var status string
			err := s.read.QueryRowContext(ctx, `SELECT status FROM events WHERE id = ?`, id).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
			}
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", id, err)
			}
			if Status(status) != StatusParked {
				return nil, fmt.Errorf("%s is %s, not parked", id, status)
			}
		}
		return sel.IDs, nil
	}
	if sel.Reason == "" && !sel.All {
		return nil, errors.New("no rows selected: name ids, a reason, or all")
	}
	where, args := Filter{Status: StatusParked, Reason: sel.Reason}.where()
	rows, err := s.read.QueryContext(ctx, `SELECT id FROM events`+where+` ORDER BY received_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("select parked rows: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	return ids, nil
}

// reprocessTx reprocesses ids in one IMMEDIATE transaction. A row that
// is no longer parked (a delivery revived it meanwhile) is skipped.
func (s *Store) reprocessTx(ctx context.Context, ids []string, rules Rules, dryRun bool, rep *ReprocessReport) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	now := millis(s.now())
	batch := ReprocessReport{Parked: map[Reason]int{}}
	for _, id := range ids {
		row := tx.QueryRowContext(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = ? AND status = 'parked'`, id)
		p, err := scanEvent(row.Scan, true)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", id, err)
		}
		if err := reprocessRow(ctx, tx, p, rules, now, &batch); err != nil {
			return err
		}
	}
	if !dryRun {
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	rep.Moved += batch.Moved
	rep.Merged += batch.Merged
	for r, n := range batch.Parked {
		rep.Parked[r] += n
	}
	return nil
}

// reprocessRow classifies the parked row p again and applies the result.
func reprocessRow(ctx context.Context, tx *sql.Tx, p Event, rules Rules, now int64, rep *ReprocessReport) error {
	d := Classify(p.Body, p.DeliveryTS, rules)
	if d.Status != StatusNew {
		reason := d.Reason
		if reason == "" {
			// Not storable, yet not parked either (a test ping): keep the reason on record.
			reason = p.Reason
		}
		return stayParked(ctx, tx, p, reason, now, rep)
	}

	cur, err := readCurrent(ctx, tx, d.Key)
	if errors.Is(err, sql.ErrNoRows) {
		// The job has no row: this one becomes it.
		if _, err := tx.ExecContext(ctx, `UPDATE events SET id = ? WHERE id = ?`, d.Key, p.ID); err != nil {
			return fmt.Errorf("rekey %s as %s: %w", p.ID, d.Key, err)
		}
		p.ID = d.Key
		cur = current{status: StatusParked}
	} else if err != nil {
		return fmt.Errorf("read %s: %w", d.Key, err)
	}
	// The deliveries of a row that lands on itself are counted already.
	own := p.ID == d.Key
	added := p.Deliveries
	if own {
		added = 0
	}
	lastSeen := millis(p.LastSeenAt)
	landing := landOn(cur, d)
	if own {
		// The row is parked (it was selected so), whatever parked it: a
		// person's decision brings it back with its own body.
		landing = landRevive
	}
	switch landing {
	case landRevive:
		if err := revive(ctx, tx, d, added, lastSeen, now); err != nil {
			return err
		}
	case landRepeat:
		if _, err := repeat(ctx, tx, d.Key, added, lastSeen); err != nil {
			return err
		}
	default:
		return stayParked(ctx, tx, p, ReasonConflict, now, rep)
	}
	rep.Moved++
	if !own {
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id = ?`, p.ID); err != nil {
			return fmt.Errorf("remove %s after merging it into %s: %w", p.ID, d.Key, err)
		}
		rep.Merged++
	}
	return nil
}

// stayParked keeps p parked with reason, recording a change of reason.
func stayParked(ctx context.Context, tx *sql.Tx, p Event, reason Reason, now int64, rep *ReprocessReport) error {
	if reason != p.Reason {
		_, err := tx.ExecContext(ctx, `UPDATE events SET reason = ?, updated_at = ? WHERE id = ?`,
			string(reason), now, p.ID)
		if err != nil {
			return fmt.Errorf("re-park %s as %s: %w", p.ID, reason, err)
		}
	}
	rep.Parked[reason]++
	return nil
}
