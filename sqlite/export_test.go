package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"inbox/inbox"
)

// Pragmas are the settings one connection reports.
type Pragmas struct {
	JournalMode string
	Synchronous int
	BusyTimeout int
	QueryOnly   bool
	// AutoCheckpoint is wal_autocheckpoint, in frames.
	AutoCheckpoint int
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
				"PRAGMA wal_autocheckpoint": &p.AutoCheckpoint,
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

// ReprocessForTest reprocesses sel as Reprocess does, and calls between
// after the rows of the first batch were read and classified and before
// the transaction that applies them.
func ReprocessForTest(ctx context.Context, s *Store, sel inbox.Selection, rules inbox.Rules, between func()) (inbox.ReprocessReport, error) {
	return inbox.Reprocess(ctx, &reprocessBetween{reprocessing{s}, between}, sel, inbox.SourceRules{inbox.DefaultSource: rules}, false)
}

// reprocessBetween calls between once, before its first transaction.
type reprocessBetween struct {
	reprocessing
	between func()
}

func (r *reprocessBetween) InReprocessTx(ctx context.Context, dryRun bool, fn func(inbox.ReprocessTx) error) error {
	if r.between != nil {
		r.between()
		r.between = nil
	}
	return r.reprocessing.InReprocessTx(ctx, dryRun, fn)
}

// Query texts the plan test checks, as the store builds them.
var (
	PurgeWhereForTest    = purgeWhere
	BesideRemainsForTest = besideRemains
)

// WhereForTest is the WHERE clause List and ParkedByReason use for f.
func WhereForTest(f inbox.Filter) (string, []any) { return dialect.Where(f) }

// ParsedForTest returns how many statements the write connection has run
// from their text rather than prepared.
func ParsedForTest(s *Store) int64 { return s.parsed.n.Load() }

// GuardChecksForTest returns how many times the store's guard has checked
// its files.
func GuardChecksForTest(s *Store) int64 { return s.guard.checks.Load() }

// InsertOpsForTest counts, by opcode, the instructions SQLite compiles the
// writer's insert of a delivery into.
func InsertOpsForTest(s *Store) (map[string]int, error) { return OpsForTest(s, insertSQL) }

// QueueOpsForTest counts the instructions of the queue's statements that
// add pairs and mark them done.
func QueueOpsForTest(s *Store) (addPairs, settleDone map[string]int, err error) {
	if addPairs, err = OpsForTest(s, addPairsSQL); err != nil {
		return nil, nil, err
	}
	settleDone, err = OpsForTest(s, settleDoneSQL)
	return addPairs, settleDone, err
}

// OpsForTest counts, by opcode, the instructions SQLite compiles query into.
func OpsForTest(s *Store, query string) (map[string]int, error) {
	params := strings.Count(query, "?")
	for n := 1; strings.Contains(query, fmt.Sprintf("?%d", n)); n++ {
		params = n // numbered: each bound once, however often it is named
	}
	rows, err := s.read.Query(`EXPLAIN `+query, make([]any, params)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	ops := map[string]int{}
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(any)
	}
	for rows.Next() {
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		ops[fmt.Sprint(*vals[1].(*any))]++
	}
	return ops, rows.Err()
}
