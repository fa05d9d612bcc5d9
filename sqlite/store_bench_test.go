package sqlite_test

import (
	"testing"

	"inbox/inbox/storetest"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// BenchmarkPut measures group-committed Puts from many goroutines at once,
// as the receiver makes them: about 1 KiB bodies, unique job ids, one in ten
// a repeat. Run: go test -run '^$' -bench Put -cpu 32 ./inbox/
func BenchmarkPut(b *testing.B) {
	storetest.BenchPut(b, sqlitetest.MustOpen(b, sqlite.Options{}), 1)
}
