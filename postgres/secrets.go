package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// RecordSecretUses saves uses in one statement, keeping for each secret the
// later of the saved and the given time. It fails when the store is
// read-only or closed, or the statement does not commit.
func (s *Store) RecordSecretUses(ctx context.Context, uses []inbox.SecretUse) error {
	if len(uses) == 0 {
		return nil
	}
	if s.readOnly {
		return errors.New("record secret uses: store is read-only")
	}
	// One row per key, the latest time, in key order: ON CONFLICT cannot
	// touch a row twice in one statement, and replicas lock in one order.
	latest := map[[2]string]int64{}
	for _, u := range uses {
		k := [2]string{pgText(u.Source), pgText(u.Fingerprint)}
		latest[k] = max(latest[k], u.LastVerified.UnixMilli())
	}
	keys := make([][2]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1])
	})
	sources, fps, ats := make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		sources[i], fps[i], ats[i] = k[0], k[1], latest[k]
	}
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO secret_uses (source, fingerprint, last_verified_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
			ON CONFLICT (source, fingerprint)
			DO UPDATE SET last_verified_at = greatest(secret_uses.last_verified_at, excluded.last_verified_at)`,
			sources, fps, ats)
		return err
	})
	if err != nil {
		return fmt.Errorf("record secret uses: %w", err)
	}
	return nil
}

// SecretUses returns every recorded secret use, by source and fingerprint.
func (s *Store) SecretUses(ctx context.Context) ([]inbox.SecretUse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT source, fingerprint, last_verified_at FROM secret_uses ORDER BY source, fingerprint`)
	if err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.SecretUse, error) {
		var u inbox.SecretUse
		var at int64
		err := r.Scan(&u.Source, &u.Fingerprint, &at)
		u.LastVerified = fromMillis(at)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("secret uses: %w", err)
	}
	return out, nil
}
