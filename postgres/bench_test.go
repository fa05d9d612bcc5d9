package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"inbox/inbox"
	"inbox/postgres"
)

// BenchmarkPut measures group-committed Puts from 16 goroutines a core at
// once (32 on this project's machine), as the receiver makes them: about
// 1 KiB bodies, unique job ids, one in ten a repeat. Run:
//
//	INBOX_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench Put ./postgres/
func BenchmarkPut(b *testing.B) {
	s := mustOpen(b, testURL(b), postgres.Options{})
	pad := strings.Repeat("x", 900)
	var n atomic.Int64
	b.SetBytes(1024)
	b.SetParallelism(16)
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
