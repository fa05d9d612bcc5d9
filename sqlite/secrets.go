package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"inbox/inbox"
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

// SecretUses returns every recorded secret use, by source and fingerprint;
// none when no serve has opened the database since secrets were recorded.
func (s *Store) SecretUses(ctx context.Context) ([]inbox.SecretUse, error) {
	if ok, err := s.hasTable(ctx, "secret_uses"); err != nil || !ok {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, `SELECT source, fingerprint, last_verified_at FROM secret_uses ORDER BY source, fingerprint`)
	if err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	out, err := collect(rows, func(scan func(...any) error) (u inbox.SecretUse, err error) {
		var at int64
		err = scan(&u.Source, &u.Fingerprint, &at)
		u.LastVerified = fromMillis(at)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	return out, nil
}
