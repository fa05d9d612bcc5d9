package sqlite_test

import (
	"testing"

	"inbox/inbox"
	"inbox/inbox/storetest"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestStoreContract runs the store suite against the SQLite store, each
// test on a fresh file in its own t.TempDir().
func TestStoreContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, opts storetest.Options) inbox.Store {
		return sqlitetest.MustOpen(t, sqlite.Options{Now: opts.Now})
	})
}
