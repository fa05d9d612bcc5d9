package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"inbox/inbox"
)

// Rules are the rules the suite classifies Sume deliveries by, for a
// store's own tests.
var Rules = rules

// Job is a job.completed delivery of the job id, as Sume sends one.
func Job(id string) inbox.Delivery { return job(id) }

// Failed is a job.failed delivery of the job id.
func Failed(id string) inbox.Delivery { return failed(id) }

// BenchPut measures Puts into s from parallelism goroutines a core at
// once, as the receiver makes them: about 1 KiB bodies, unique job ids,
// one in ten a repeat.
func BenchPut(b *testing.B, s inbox.Store, parallelism int) {
	pad := strings.Repeat("x", 900)
	var n atomic.Int64
	b.SetBytes(1024)
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if i%10 == 0 {
				i -= 5 // a repeat of an earlier job
			}
			body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_%d","status":"COMPLETED","payload":{"pad":%q}}`, i, pad)
			if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), deliveryTS, rules)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
