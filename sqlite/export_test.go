package sqlite

import (
	"context"
	"database/sql"
	"math"
	"slices"

	"inbox/inbox"
)

// Pragmas are the settings one connection reports.
type Pragmas struct {
	JournalMode string
	Synchronous int
	BusyTimeout int
	QueryOnly   bool
}

// PragmasForTest holds every connection of each pool at once, so each is a
// distinct connection, and reads its pragmas.
func PragmasForTest(s *Store) map[string][]Pragmas {
	out := map[string][]Pragmas{}
	for name, pool := range map[string]struct {
		db *sql.DB
		n  int
	}{"write": {s.write, 1}, "read": {s.read, readConns}} {
		var conns []*sql.Conn
		for range pool.n {
			c, err := pool.db.Conn(context.Background())
			if err != nil {
				panic(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			var p Pragmas
			for q, dst := range map[string]any{
				"PRAGMA journal_mode": &p.JournalMode, "PRAGMA synchronous": &p.Synchronous,
				"PRAGMA busy_timeout": &p.BusyTimeout, "PRAGMA query_only": &p.QueryOnly,
			} {
				if err := c.QueryRowContext(context.Background(), q).Scan(dst); err != nil {
					panic(err)
				}
			}
			out[name] = append(out[name], p)
			c.Close()
		}
	}
	return out
}

// WriteOpForTest runs op through the store's writer, as the dispatcher's
// writes go.
func WriteOpForTest(s *Store, op func(context.Context, *sql.Tx) error) error {
	return s.writeOp(context.Background(), op)
}

// ReprocessForTest reprocesses sel as Reprocess does, in one batch, and
// calls between after the rows were read and classified and before the
// transaction that applies them.
func ReprocessForTest(ctx context.Context, s *Store, sel inbox.Selection, rules inbox.Rules, between func()) (inbox.ReprocessReport, error) {
	sr := inbox.SourceRules{inbox.DefaultSource: rules}
	rows, err := s.selectParked(ctx, sel, sr)
	if err != nil {
		return inbox.ReprocessReport{}, err
	}
	// One batch of every job.
	plans, err := s.planJobs(ctx, slices.Concat(inbox.Batches(rows, math.MaxInt, math.MaxInt64)...), sr)
	if err != nil {
		return inbox.ReprocessReport{}, err
	}
	between()
	return s.applyJobs(ctx, plans, false)
}

// Query texts the plan test checks, as the store builds them.
var (
	PurgeWhereForTest    = purgeWhere
	BesideRemainsForTest = besideRemains
)

// WhereForTest is the WHERE clause List and ParkedByReason use for f.
func WhereForTest(f inbox.Filter) (string, []any) { return where(f) }

// ParsedForTest returns how many statements the write connection has run
// from their text rather than prepared.
func ParsedForTest(s *Store) int64 { return s.parsed.n.Load() }
