package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inbox/inbox"
	"inbox/sqlrow"
)

// Alerts returns what inbox alert last reported of each open finding of
// scope, by finding.
func (s *Store) Alerts(ctx context.Context, scope string) ([]inbox.Alert, error) {
	out, err := sqlrow.Collect(ctx, s.query, `SELECT `+sqlrow.AlertColumns+` FROM alerts WHERE scope = $1 ORDER BY finding`,
		[]any{pgText(scope)}, sqlrow.ScanAlert)
	if err != nil {
		return nil, fmt.Errorf("read the alerts: %w", err)
	}
	return out, nil
}

// SwapAlerts makes each swap (inbox.AlertSwap) in one transaction and
// says which held. A row another run's transaction holds is waited for,
// then its swap checked against the row that run committed. It fails,
// writing nothing, when the store is read-only or the transaction does
// not commit.
func (s *Store) SwapAlerts(ctx context.Context, swaps []inbox.AlertSwap) ([]bool, error) {
	if s.readOnly {
		return nil, errors.New("record the alerts: store is read-only")
	}
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	held := make([]bool, len(swaps))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for i, sw := range swaps {
			var tag pgconn.CommandTag
			var err error
			switch o, n := sw.Old, sw.New; {
			case o == nil && n != nil:
				tag, err = tx.Exec(ctx, `INSERT INTO alerts (`+sqlrow.AlertColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
					ON CONFLICT (scope, finding) DO NOTHING`,
					pgText(n.Scope), pgText(n.Finding), n.OpenedAt.UnixMilli(), n.Count, n.ReportedAt.UnixMilli(), n.Rev)
			case o != nil && n == nil:
				tag, err = tx.Exec(ctx, `DELETE FROM alerts WHERE scope = $1 AND finding = $2 AND rev = $3`,
					pgText(o.Scope), pgText(o.Finding), o.Rev)
			case o != nil:
				tag, err = tx.Exec(ctx, `UPDATE alerts SET opened_at = $1, count = $2, reported_at = $3, rev = $4
					WHERE scope = $5 AND finding = $6 AND rev = $7`,
					n.OpenedAt.UnixMilli(), n.Count, n.ReportedAt.UnixMilli(), n.Rev, pgText(o.Scope), pgText(o.Finding), o.Rev)
			default:
				held[i] = false
				continue
			}
			if err != nil {
				return err
			}
			held[i] = tag.RowsAffected() == 1
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record the alerts: %w", err)
	}
	return held, nil
}
