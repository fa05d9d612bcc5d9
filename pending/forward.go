package pending

import (
	"context"
	"time"

	"inbox/inbox"
)

// The operations of inbox.Store: each goes to the open store, or fails as
// get does.

func (s *Store) Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.Result, error) { return st.Put(ctx, d) })
}

func (s *Store) Settle(ctx context.Context, owner string, settled []inbox.Settlement, claim inbox.Claim) ([]inbox.Job, int, error) {
	return do2(ctx, s, func(st inbox.Store) ([]inbox.Job, int, error) { return st.Settle(ctx, owner, settled, claim) })
}

func (s *Store) Start(ctx context.Context, owner string, jobs []inbox.Job, now, until time.Time) ([]inbox.Job, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Job, error) { return st.Start(ctx, owner, jobs, now, until) })
}

func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	return do2(ctx, s, func(st inbox.Store) (time.Time, bool, error) { return st.NextDue(ctx) })
}

func (s *Store) Queue(ctx context.Context, now time.Time) (inbox.Queue, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.Queue, error) { return st.Queue(ctx, now) })
}

func (s *Store) Deliveries(ctx context.Context, id string) ([]inbox.Pairing, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Pairing, error) { return st.Deliveries(ctx, id) })
}

func (s *Store) Destinations(ctx context.Context, now time.Time) ([]inbox.DestinationStats, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.DestinationStats, error) { return st.Destinations(ctx, now) })
}

func (s *Store) PausedDestinations(ctx context.Context) ([]string, error) {
	return do(ctx, s, func(st inbox.Store) ([]string, error) { return st.PausedDestinations(ctx) })
}

func (s *Store) SetPaused(ctx context.Context, name string, paused bool) error {
	_, err := do(ctx, s, func(st inbox.Store) (struct{}, error) { return struct{}{}, st.SetPaused(ctx, name, paused) })
	return err
}

func (s *Store) DownDestinations(ctx context.Context) ([]inbox.DownDestination, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.DownDestination, error) { return st.DownDestinations(ctx) })
}

func (s *Store) SetDown(ctx context.Context, name string, since time.Time, cause string) error {
	_, err := do(ctx, s, func(st inbox.Store) (struct{}, error) { return struct{}{}, st.SetDown(ctx, name, since, cause) })
	return err
}

func (s *Store) RecordRouting(ctx context.Context, owner string, routes []inbox.Route, now time.Time) error {
	_, err := do(ctx, s, func(st inbox.Store) (struct{}, error) {
		return struct{}{}, st.RecordRouting(ctx, owner, routes, now)
	})
	return err
}

func (s *Store) Routings(ctx context.Context, since time.Time) ([]inbox.Routing, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Routing, error) { return st.Routings(ctx, since) })
}

func (s *Store) Get(ctx context.Context, id string) (inbox.Event, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.Event, error) { return st.Get(ctx, id) })
}

func (s *Store) List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Event, error) { return st.List(ctx, f) })
}

func (s *Store) Each(ctx context.Context, f inbox.Filter, fn func(inbox.Event) error) error {
	_, err := do(ctx, s, func(st inbox.Store) (struct{}, error) { return struct{}{}, st.Each(ctx, f, fn) })
	return err
}

func (s *Store) Count(ctx context.Context, f inbox.Filter) (int64, error) {
	return do(ctx, s, func(st inbox.Store) (int64, error) { return st.Count(ctx, f) })
}

func (s *Store) Stats(ctx context.Context) (inbox.Stats, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.Stats, error) { return st.Stats(ctx) })
}

func (s *Store) CountByStatus(ctx context.Context) (map[inbox.Status]int64, error) {
	return do(ctx, s, func(st inbox.Store) (map[inbox.Status]int64, error) { return st.CountByStatus(ctx) })
}

func (s *Store) ParkedByReason(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.ReasonCount, error) { return st.ParkedByReason(ctx, f) })
}

func (s *Store) ParkedPerHour(ctx context.Context, f inbox.Filter, end time.Time, hours int) ([]inbox.HourCount, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.HourCount, error) { return st.ParkedPerHour(ctx, f, end, hours) })
}

func (s *Store) Purgeable(ctx context.Context, sel inbox.PurgeSelection) (inbox.PurgeReport, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.PurgeReport, error) { return st.Purgeable(ctx, sel) })
}

func (s *Store) Purge(ctx context.Context, sel inbox.PurgeSelection) (inbox.PurgeReport, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.PurgeReport, error) { return st.Purge(ctx, sel) })
}

func (s *Store) Reprocess(ctx context.Context, sel inbox.Selection, rules inbox.SourceRules, dryRun bool) (inbox.ReprocessReport, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.ReprocessReport, error) { return st.Reprocess(ctx, sel, rules, dryRun) })
}

func (s *Store) Replay(ctx context.Context, sel inbox.ReplaySelection, opts inbox.ReplayOptions) (inbox.ReplayReport, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.ReplayReport, error) { return st.Replay(ctx, sel, opts) })
}

func (s *Store) Dismiss(ctx context.Context, sel inbox.DismissSelection, opts inbox.DismissOptions) (inbox.DismissReport, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.DismissReport, error) { return st.Dismiss(ctx, sel, opts) })
}

func (s *Store) RecordSecretUses(ctx context.Context, uses []inbox.SecretUse) error {
	_, err := do(ctx, s, func(st inbox.Store) (struct{}, error) { return struct{}{}, st.RecordSecretUses(ctx, uses) })
	return err
}

func (s *Store) SecretUses(ctx context.Context) ([]inbox.SecretUse, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.SecretUse, error) { return st.SecretUses(ctx) })
}

func (s *Store) RecordUnverified(ctx context.Context, runs []inbox.Unverified) error {
	_, err := do(ctx, s, func(st inbox.Store) (struct{}, error) { return struct{}{}, st.RecordUnverified(ctx, runs) })
	return err
}

func (s *Store) Unverified(ctx context.Context) ([]inbox.Unverified, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Unverified, error) { return st.Unverified(ctx) })
}

func (s *Store) RecordRefusals(ctx context.Context, refusals []inbox.Refusal) error {
	_, err := do(ctx, s, func(st inbox.Store) (struct{}, error) { return struct{}{}, st.RecordRefusals(ctx, refusals) })
	return err
}

func (s *Store) Missed(ctx context.Context, before time.Time) ([]inbox.Refusal, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Refusal, error) { return st.Missed(ctx, before) })
}

func (s *Store) Expect(ctx context.Context, jobs []string, statusURL string, due time.Time) ([]inbox.Expectation, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Expectation, error) { return st.Expect(ctx, jobs, statusURL, due) })
}

func (s *Store) Expected(ctx context.Context, now time.Time, overdue bool) ([]inbox.Expectation, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Expectation, error) { return st.Expected(ctx, now, overdue) })
}

func (s *Store) ClaimPolls(ctx context.Context, owner string, now, until time.Time, max int) ([]inbox.Poll, error) {
	return do(ctx, s, func(st inbox.Store) ([]inbox.Poll, error) { return st.ClaimPolls(ctx, owner, now, until, max) })
}

func (s *Store) SettlePolls(ctx context.Context, owner string, results []inbox.PollResult) (int, error) {
	return do(ctx, s, func(st inbox.Store) (int, error) { return st.SettlePolls(ctx, owner, results) })
}

func (s *Store) NextPoll(ctx context.Context) (time.Time, bool, error) {
	return do2(ctx, s, func(st inbox.Store) (time.Time, bool, error) { return st.NextPoll(ctx) })
}

func (s *Store) Reconciliation(ctx context.Context, now time.Time) (inbox.Reconciliation, error) {
	return do(ctx, s, func(st inbox.Store) (inbox.Reconciliation, error) { return st.Reconciliation(ctx, now) })
}

var _ inbox.Store = (*Store)(nil)
