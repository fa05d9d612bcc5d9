package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// replica is one `inbox serve` of several on one database, restarted in
// place: url is always the running process's.
type replica struct {
	t   *testing.T
	dsn string

	mu  sync.Mutex
	srv *server
}

func (r *replica) url() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv.url
}

// restart kills the replica with SIGKILL and starts it again.
func (r *replica) restart() {
	r.mu.Lock()
	old := r.srv
	r.mu.Unlock()
	old.signal(syscall.SIGKILL)
	<-old.done
	srv := startInbox(r.t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0", "--db", r.dsn)
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

// sent counts, per key, the deliveries sent and those answered 2xx.
type sent struct {
	mu       sync.Mutex
	tries    map[string]int
	acks     map[string]int
	statuses map[int]int
}

// try counts a delivery of key about to be sent: it may land even if its
// answer is never read.
func (s *sent) try(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[key]++
}

func (s *sent) record(key string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[status]++
	if status >= 200 && status < 300 {
		s.acks[key]++
	}
}

// TestReplicasCrash runs two `inbox serve` on one PostgreSQL schema under
// load from many senders, each job sent to both replicas (at once for
// half of them, one after the other for the rest), and kills one replica
// or the other with SIGKILL mid-load four times, restarting it. Every key
// answered 2xx is then one row, new, with its deliveries counted: at least
// the 2xx answers it got, at most the deliveries sent.
func TestReplicasCrash(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	replicas := make([]*replica, 2)
	for i := range replicas {
		replicas[i] = &replica{t: t, dsn: dsn, srv: startInbox(t, env, "serve", "--addr", "127.0.0.1:0", "--db", dsn)}
	}
	s := &sent{tries: map[string]int{}, acks: map[string]int{}, statuses: map[int]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	const senders = 12
	for c := range senders {
		wg.Go(func() {
			clients := [2]*http.Client{}
			for i := range clients {
				clients[i] = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
				defer clients[i].CloseIdleConnections()
			}
			deliver := func(r int, key, body string) {
				s.try(key)
				status, _ := post(ctx, clients[r], replicas[r].url(), body)
				if ctx.Err() == nil {
					s.record(key, status)
				}
				if status == 0 {
					time.Sleep(5 * time.Millisecond) // do not spin on a dead replica
				}
			}
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("rep_%d_%d", c, i)
				body := fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":{"pad":%q}}`, key, strings.Repeat("x", 256))
				first := rand.IntN(2)
				if i%2 == 0 {
					var both sync.WaitGroup
					both.Go(func() { deliver(0, key, body) })
					both.Go(func() { deliver(1, key, body) })
					both.Wait()
				} else {
					deliver(first, key, body)
					deliver(1-first, key, body)
				}
			}
		})
	}
	for round := range 4 {
		time.Sleep(time.Duration(400+150*round) * time.Millisecond)
		replicas[round%2].restart()
	}
	time.Sleep(400 * time.Millisecond)
	cancel()
	wg.Wait()
	for _, r := range replicas {
		r.srv.signal(syscall.SIGKILL)
		<-r.srv.done
	}

	type row struct {
		status     string
		deliveries int
	}
	rows := map[string]row{}
	perJob := map[string]int{}
	conn := pgConnect(t, dsn)
	res, err := conn.Query(context.Background(), `SELECT id, coalesce(job_id, ''), status, deliveries FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for res.Next() {
		var id, job string
		var r row
		if err := res.Scan(&id, &job, &r.status, &r.deliveries); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
		perJob[job]++
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	duplicates := 0
	for job, n := range perJob {
		if n > 1 {
			duplicates += n - 1
			t.Errorf("job %s: %d rows, want one", job, n)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	acknowledged, found := 0, 0
	var lost, miscounted []string
	for key, acks := range s.acks {
		acknowledged++
		r, ok := rows[key]
		if !ok || r.status != "new" {
			lost = append(lost, key)
			continue
		}
		found++
		if r.deliveries < acks || r.deliveries > s.tries[key] {
			miscounted = append(miscounted, fmt.Sprintf("%s: %d deliveries, %d answered 2xx of %d sent", key, r.deliveries, acks, s.tries[key]))
		}
	}
	t.Logf("statuses: %v; rows: %d", s.statuses, len(rows))
	t.Logf("acknowledged=%d found=%d lost=%d duplicate_rows=%d", acknowledged, found, len(lost), duplicates)
	if len(lost) > 0 {
		t.Errorf("acknowledged but not stored: %v", lost[:min(len(lost), 10)])
	}
	if len(miscounted) > 0 {
		t.Errorf("%d rows with their deliveries miscounted: %v", len(miscounted), miscounted[:min(len(miscounted), 10)])
	}
	if acknowledged < 100 {
		t.Errorf("only %d keys acknowledged: not enough load to prove anything", acknowledged)
	}
	for code, n := range s.statuses {
		if code != 0 && code != http.StatusNoContent {
			t.Errorf("answered %d %d times; want 204, or no answer from a killed replica", code, n)
		}
	}
}
