package inbox_test

import (
	"testing"

	"inbox/inbox"
	"inbox/inbox/inboxtest"
	"inbox/inbox/storetest"
)

// TestStoreContract runs the store suite against the SQLite store, each
// test on a fresh file in its own t.TempDir().
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts storetest.Options) storetest.Store {
		return inboxtest.MustOpen(t, inbox.Options{Now: opts.Now})
	})
}
