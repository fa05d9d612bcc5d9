package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/sqlrow"
)

// secretUses is the store's inbox.SecretStore: inbox.Secrets, embedded
// in Store, records the uses through it.
type secretUses struct{ s *Store }

func (u secretUses) ReadOnly() bool { return u.s.readOnly }

// StoredText returns s as a text column keeps it (pgText).
func (secretUses) StoredText(s string) string { return pgText(s) }

func (u secretUses) SaveSecretUses(ctx context.Context, uses []inbox.SecretUse) error {
	sources, fps, ats := make([]string, len(uses)), make([]string, len(uses)), make([]int64, len(uses))
	for i, use := range uses {
		sources[i], fps[i], ats[i] = use.Source, use.Fingerprint, use.LastVerified.UnixMilli()
	}
	ctx, cancel := context.WithTimeout(ctx, u.s.busy)
	defer cancel()
	return u.s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO secret_uses (source, fingerprint, last_verified_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
			ON CONFLICT (source, fingerprint)
			DO UPDATE SET last_verified_at = greatest(secret_uses.last_verified_at, excluded.last_verified_at)`,
			sources, fps, ats)
		return err
	})
}

func (u secretUses) SaveUnverified(ctx context.Context, runs []inbox.Unverified) error {
	sources, counts, firsts, lasts := make([]string, len(runs)), make([]int64, len(runs)), make([]int64, len(runs)), make([]int64, len(runs))
	for i, r := range runs {
		sources[i], counts[i], firsts[i], lasts[i] = r.Source, r.Count, r.First.UnixMilli(), r.Last.UnixMilli()
	}
	ctx, cancel := context.WithTimeout(ctx, u.s.busy)
	defer cancel()
	return u.s.inTx(ctx, func(tx pgx.Tx) error {
		// A run that began before a delivery verified is over.
		_, err := tx.Exec(ctx, `DELETE FROM unverified WHERE source = ANY($1::text[])
			AND first_at <= (SELECT max(last_verified_at) FROM secret_uses WHERE secret_uses.source = unverified.source)`, sources)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO unverified (source, count, first_at, last_at)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
			ON CONFLICT (source) DO UPDATE SET count = unverified.count + excluded.count,
				first_at = least(unverified.first_at, excluded.first_at), last_at = greatest(unverified.last_at, excluded.last_at)`,
			sources, counts, firsts, lasts)
		return err
	})
}

// Unverified returns each source's saved run of failed verifications, by
// source, in a read (Store.read).
func (s *Store) Unverified(ctx context.Context) ([]inbox.Unverified, error) {
	out, err := sqlrow.Unverified(ctx, s.query)
	if err != nil {
		return nil, fmt.Errorf("failed verifications: %w", err)
	}
	return out, nil
}

// SecretUses returns every recorded secret use, by source and fingerprint,
// in a read (Store.read).
func (s *Store) SecretUses(ctx context.Context) ([]inbox.SecretUse, error) {
	out, err := sqlrow.SecretUses(ctx, s.query)
	if err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	return out, nil
}
