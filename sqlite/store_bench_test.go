package sqlite_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// BenchmarkPut measures group-committed Puts from many goroutines at once,
// as the receiver makes them: about 1 KiB bodies, unique job ids, one in ten
// a repeat. Run: go test -run '^$' -bench Put -cpu 32 ./inbox/
func BenchmarkPut(b *testing.B) {
	s := sqlitetest.MustOpen(b, sqlite.Options{})
	pad := strings.Repeat("x", 900)
	var n atomic.Int64
	b.SetBytes(1024)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if i%10 == 0 {
				i -= 5 // a repeat of an earlier job
			}
			body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_%d","status":"COMPLETED","payload":{"pad":%q}}`, i, pad)
			if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), 1_800_000_000, rules)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
