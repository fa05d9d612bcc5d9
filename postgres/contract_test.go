package postgres_test

import (
	"testing"

	"inbox/inbox"
	"inbox/inbox/storetest"
	"inbox/postgres"
)

// TestStoreContract runs the store suite against PostgreSQL, each test in
// a schema of its own.
func TestStoreContract(t *testing.T) {
	t.Parallel()
	databaseURL(t)
	storetest.Run(t, func(t *testing.T, opts storetest.Options) inbox.Store {
		return mustOpen(t, testURL(t), postgres.Options{Now: opts.Now})
	})
}
