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
	// SaveUnverified adds runs, one for each source, in that order, in
	// one write transaction: it first deletes the saved run of each of
	// their sources that began at or before the source's newest secret
	// use (such a run is over: a delivery verified after it began), then
	// adds each run's count to the saved one, keeping the earlier first
	// and the later last time.
	SaveUnverified(ctx context.Context, runs []Unverified) error
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

// Unverified is a source's run of requests that failed verification
// (answered 401): how many, the first and the last, as serve saved them
// since the source last verified a delivery. Nothing of the requests
// themselves (body, signature, headers) is kept.
type Unverified struct {
	Source string    `json:"source"`
	Count  int64     `json:"count"`
	First  time.Time `json:"first_at"`
	Last   time.Time `json:"last_at"`
}

// Add returns u with the failures of v, of the same source, counted in.
func (u Unverified) Add(v Unverified) Unverified {
	switch {
	case v.Count <= 0:
		return u
	case u.Count <= 0:
		return v
	}
	u.Count += v.Count
	if v.First.Before(u.First) {
		u.First = v.First
	}
	if v.Last.After(u.Last) {
		u.Last = v.Last
	}
	return u
}

// RecordUnverified saves the failed verifications of runs in the store:
// the runs are made one a source, as the store keeps its text, in source
// order, and each is added to the source's saved run, or replaces it when
// that run is over (a secret of the source verified a delivery after the
// run began, as RecordSecretUses saved it: record those first). It fails,
// saving nothing, when the store is read-only or the transaction does not
// commit.
func (sc Secrets) RecordUnverified(ctx context.Context, runs []Unverified) error {
	if len(runs) == 0 {
		return nil
	}
	if sc.store.ReadOnly() {
		return errors.New("record failed verifications: store is read-only")
	}
	bySource := map[string]Unverified{}
	for _, r := range runs {
		if r.Count <= 0 {
			continue
		}
		r.Source = sc.store.StoredText(r.Source)
		bySource[r.Source] = bySource[r.Source].Add(r)
	}
	keyed := make([]Unverified, 0, len(bySource))
	for _, r := range bySource {
		keyed = append(keyed, r)
	}
	if len(keyed) == 0 {
		return nil
	}
	slices.SortFunc(keyed, func(a, b Unverified) int { return cmp.Compare(a.Source, b.Source) })
	if err := sc.store.SaveUnverified(ctx, keyed); err != nil {
		return fmt.Errorf("record failed verifications: %w", err)
	}
	return nil
}

// LastVerified returns, by source, when a secret of it last verified a
// delivery, of uses.
func LastVerified(uses []SecretUse) map[string]time.Time {
	last := map[string]time.Time{}
	for _, u := range uses {
		if u.LastVerified.After(last[u.Source]) {
			last[u.Source] = u.LastVerified
		}
	}
	return last
}

// BrokenRotation is a source whose deliveries fail verification, none
// verified since the failures began: a secret rotated at the sender and
// not here, or the other way round, or a clock far off.
type BrokenRotation struct {
	Unverified
	// LastVerified is when a secret of the source last verified a
	// delivery; zero: never.
	LastVerified time.Time `json:"last_verified_at,omitzero"`
}

// BrokenRotations returns, by source, the runs of failed verifications
// with at least min failures and the last at or after since, of sources
// none of whose secrets (uses) has verified a delivery since the run's
// first failure. A source whose deliveries verify among a few forgeries
// is not one: its last verified delivery is after the run began.
func BrokenRotations(runs []Unverified, uses []SecretUse, since time.Time, min int64) []BrokenRotation {
	last := LastVerified(uses)
	var out []BrokenRotation
	for _, r := range runs {
		v := last[r.Source]
		if r.Count < min || r.Last.Before(since) || !v.Before(r.First) {
			continue
		}
		out = append(out, BrokenRotation{Unverified: r, LastVerified: v})
	}
	slices.SortFunc(out, func(a, b BrokenRotation) int { return cmp.Compare(a.Source, b.Source) })
	return out
}
