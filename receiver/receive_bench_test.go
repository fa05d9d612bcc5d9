package receiver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
	"inbox/sume"
)

// BenchmarkReceive drives signed deliveries over keep-alive connections at
// the real handler and store, in one process, so one CPU profile shows the
// whole path: about 1 KiB bodies, unique job ids, one in ten a repeat.
// Run: go test -run '^$' -bench Receive -cpu 32 -cpuprofile cpu.out ./receiver/
func BenchmarkReceive(b *testing.B) {
	store := sqlitetest.MustOpen(b, sqlite.Options{})
	h, err := NewHandler(store, Config{
		Keys:    keys(testSecret),
		Scheme:  scheme.Sume{Tolerance: 5 * time.Minute},
		Rules:   inbox.Rules{Events: []string{"job.completed"}, MaxBody: 1 << 20},
		HardCap: 4 << 20,
	}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	pad := strings.Repeat("x", 900)
	var n atomic.Int64
	b.SetBytes(1024)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		defer client.CloseIdleConnections()
		for pb.Next() {
			i := n.Add(1)
			if i%10 == 0 {
				i -= 5 // a repeat of an earlier job
			}
			body := `{"event":"job.completed","job_id":"job_` + strconv.FormatInt(i, 10) + `","status":"COMPLETED","payload":{"pad":"` + pad + `"}}`
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
			req.Header.Set(sume.HeaderTimestamp, ts)
			req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), testSecret))
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b.Fatal(fmt.Sprintf("status %d", resp.StatusCode))
			}
		}
	})
}

// BenchmarkReadBody reads a 1 KiB body of declared length, as most
// deliveries are. Run: go test -run '^$' -bench ReadBody -benchmem ./receiver
func BenchmarkReadBody(b *testing.B) {
	body := strings.Repeat("x", 1024)
	budget := NewBudget(DefaultBodyMemory)
	w := httptest.NewRecorder()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", strings.NewReader(body))
		held := reservation{budget: budget}
		if _, err := readBody(w, r, 4<<20, 0, &held); err != nil {
			b.Fatal(err)
		}
		held.release()
	}
}
