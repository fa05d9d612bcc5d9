package postgres_test

import (
	"testing"

	"inbox/inbox/storetest"
	"inbox/postgres"
)

// BenchmarkPut measures group-committed Puts from 16 goroutines a core at
// once (32 on this project's machine), as the receiver makes them: about
// 1 KiB bodies, unique job ids, one in ten a repeat. Run:
//
//	INBOX_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench Put ./postgres/
func BenchmarkPut(b *testing.B) {
	storetest.BenchPut(b, mustOpen(b, testURL(b), postgres.Options{}), 16)
}
