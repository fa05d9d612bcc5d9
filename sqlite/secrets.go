package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"inbox/inbox"
	"inbox/sqlrow"
)

// secretUses is the store's inbox.SecretStore: inbox.Secrets, embedded
// in Store, records the uses through it.
type secretUses struct{ s *Store }

func (u secretUses) ReadOnly() bool { return u.s.write == nil }

// StoredText returns s: a SQLite text column keeps any bytes.
func (secretUses) StoredText(s string) string { return s }

func (u secretUses) SaveSecretUses(ctx context.Context, uses []inbox.SecretUse) error {
	return u.s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, use := range uses {
			_, err := tx.ExecContext(ctx, `INSERT INTO secret_uses (source, fingerprint, last_verified_at)
				VALUES (?, ?, ?) ON CONFLICT (source, fingerprint)
				DO UPDATE SET last_verified_at = max(last_verified_at, excluded.last_verified_at)`,
				use.Source, use.Fingerprint, millis(use.LastVerified))
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (u secretUses) SaveUnverified(ctx context.Context, runs []inbox.Unverified) error {
	return u.s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, r := range runs {
			// A run that began before a delivery verified is over.
			_, err := tx.ExecContext(ctx, `DELETE FROM unverified WHERE source = ?1
				AND first_at <= (SELECT max(last_verified_at) FROM secret_uses WHERE source = ?1)`, r.Source)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO unverified (source, count, first_at, last_at)
				VALUES (?, ?, ?, ?) ON CONFLICT (source)
				DO UPDATE SET count = count + excluded.count, first_at = min(first_at, excluded.first_at), last_at = max(last_at, excluded.last_at)`,
				r.Source, r.Count, millis(r.First), millis(r.Last))
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Unverified returns each source's saved run of failed verifications, by
// source; none when no serve has opened the database since they were
// recorded.
func (s *Store) Unverified(ctx context.Context) ([]inbox.Unverified, error) {
	if ok, err := s.hasTable(ctx, "unverified"); err != nil || !ok {
		return nil, err
	}
	out, err := sqlrow.Unverified(ctx, s.query)
	if err != nil {
		return nil, fmt.Errorf("failed verifications: %w", err)
	}
	return out, nil
}

// SecretUses returns every recorded secret use, by source and fingerprint;
// none when no serve has opened the database since secrets were recorded.
func (s *Store) SecretUses(ctx context.Context) ([]inbox.SecretUse, error) {
	if ok, err := s.hasTable(ctx, "secret_uses"); err != nil || !ok {
		return nil, err
	}
	out, err := sqlrow.SecretUses(ctx, s.query)
	if err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	return out, nil
}
