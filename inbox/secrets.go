package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// SecretUse is when one configured secret of a source last verified a
// delivery. The secret is named by its fingerprint, never by itself.
type SecretUse struct {
	Source       string    `json:"source"`
	Fingerprint  string    `json:"fingerprint"`
	LastVerified time.Time `json:"last_verified_at"`
}

// SecretStore is what a store implements of RecordSecretUses.
type SecretStore interface {
	// ReadOnly reports whether the store was opened without writes.
	ReadOnly() bool
	// StoredText returns s as the store's text columns keep it.
	StoredText(s string) string
	// SaveSecretUses saves uses, one for each source and fingerprint, in
	// that order, in one write transaction, keeping for each the later of
	// the saved and the given time.
	SaveSecretUses(ctx context.Context, uses []SecretUse) error
}

// Secrets is what a Store answers of secret uses, made from a store's
// statements: a store embeds it.
type Secrets struct{ store SecretStore }

// NewSecrets returns the secret uses of store.
func NewSecrets(store SecretStore) Secrets { return Secrets{store} }

// RecordSecretUses saves in the store when each secret last verified a
// delivery, keeping the later time: the uses are made one a key, as the
// store keeps the key's text, with its latest time, in key order (an
// upsert touches a row once a statement, and replicas lock in one order).
// It fails, saving nothing, when the store is read-only or the
// transaction does not commit.
func (sc Secrets) RecordSecretUses(ctx context.Context, uses []SecretUse) error {
	if len(uses) == 0 {
		return nil
	}
	if sc.store.ReadOnly() {
		return errors.New("record secret uses: store is read-only")
	}
	latest := map[[2]string]time.Time{}
	for _, u := range uses {
		k := [2]string{sc.store.StoredText(u.Source), sc.store.StoredText(u.Fingerprint)}
		if at, ok := latest[k]; !ok || u.LastVerified.After(at) {
			latest[k] = u.LastVerified
		}
	}
	keyed := make([]SecretUse, 0, len(latest))
	for k, at := range latest {
		keyed = append(keyed, SecretUse{Source: k[0], Fingerprint: k[1], LastVerified: at})
	}
	slices.SortFunc(keyed, func(a, b SecretUse) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	if err := sc.store.SaveSecretUses(ctx, keyed); err != nil {
		return fmt.Errorf("record secret uses: %w", err)
	}
	return nil
}
