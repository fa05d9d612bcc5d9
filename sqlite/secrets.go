package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"inbox/inbox"
)

// RecordSecretUses saves uses in the writer's next transaction, keeping for
// each secret the later of the saved and the given time. It fails when the
// store is read-only or closed, or the transaction does not commit.
func (s *Store) RecordSecretUses(ctx context.Context, uses []inbox.SecretUse) error {
	if len(uses) == 0 {
		return nil
	}
	err := s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, u := range uses {
			_, err := tx.ExecContext(ctx, `INSERT INTO secret_uses (source, fingerprint, last_verified_at)
				VALUES (?, ?, ?) ON CONFLICT (source, fingerprint)
				DO UPDATE SET last_verified_at = max(last_verified_at, excluded.last_verified_at)`,
				u.Source, u.Fingerprint, millis(u.LastVerified))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record secret uses: %w", err)
	}
	return nil
}

// SecretUses returns every recorded secret use, by source and fingerprint;
// none when no serve has opened the database since secrets were recorded.
func (s *Store) SecretUses(ctx context.Context) ([]inbox.SecretUse, error) {
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'secret_uses'`).Scan(&n); err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := s.read.QueryContext(ctx, `SELECT source, fingerprint, last_verified_at FROM secret_uses ORDER BY source, fingerprint`)
	if err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	defer rows.Close()
	var out []inbox.SecretUse
	for rows.Next() {
		var u inbox.SecretUse
		var at int64
		if err := rows.Scan(&u.Source, &u.Fingerprint, &at); err != nil {
			return nil, fmt.Errorf("secret uses: %w", err)
		}
		u.LastVerified = fromMillis(at)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	return out, nil
}
