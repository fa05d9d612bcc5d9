package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"inbox/inbox"
	"inbox/sqlrow"
)

// Alerts returns what inbox alert last reported of each open finding of
// scope, by finding.
func (s *Store) Alerts(ctx context.Context, scope string) ([]inbox.Alert, error) {
	out, err := sqlrow.Collect(ctx, s.query, `SELECT `+sqlrow.AlertColumns+` FROM alerts WHERE scope = ? ORDER BY finding`,
		[]any{scope}, sqlrow.ScanAlert)
	if err != nil {
		return nil, fmt.Errorf("read the alerts: %w", err)
	}
	return out, nil
}

// SwapAlerts makes each swap (inbox.AlertSwap) in one IMMEDIATE
// transaction and says which held. It fails, writing nothing, when the
// store is read-only or the transaction does not commit.
func (s *Store) SwapAlerts(ctx context.Context, swaps []inbox.AlertSwap) ([]bool, error) {
	if s.write == nil {
		return nil, errors.New("record the alerts: store is read-only")
	}
	held := make([]bool, len(swaps))
	err := s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for i, sw := range swaps {
			var res sql.Result
			var err error
			switch o, n := sw.Old, sw.New; {
			case o == nil && n != nil:
				res, err = tx.ExecContext(ctx, `INSERT INTO alerts (`+sqlrow.AlertColumns+`) VALUES (?, ?, ?, ?, ?, ?)
					ON CONFLICT (scope, finding) DO NOTHING`,
					n.Scope, n.Finding, millis(n.OpenedAt), n.Count, millis(n.ReportedAt), n.Rev)
			case o != nil && n == nil:
				res, err = tx.ExecContext(ctx, `DELETE FROM alerts WHERE scope = ? AND finding = ? AND rev = ?`,
					o.Scope, o.Finding, o.Rev)
			case o != nil:
				res, err = tx.ExecContext(ctx, `UPDATE alerts SET opened_at = ?, count = ?, reported_at = ?, rev = ?
					WHERE scope = ? AND finding = ? AND rev = ?`,
					millis(n.OpenedAt), n.Count, millis(n.ReportedAt), n.Rev, o.Scope, o.Finding, o.Rev)
			default:
				continue
			}
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			held[i] = n == 1
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record the alerts: %w", err)
	}
	return held, nil
}
