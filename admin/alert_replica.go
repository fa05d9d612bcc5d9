package admin

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/dbaddr"
	"inbox/inbox"
	"inbox/replica"
)

// replicaFinding is what alert --replica-lag --json prints of a replica
// behind.
type replicaFinding struct {
	Replica     string    `json:"replica"`
	LagSeconds  float64   `json:"lag_seconds"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	Unreachable bool      `json:"unreachable"`
}

// replicaCheck is alert --replica-lag: the replica of the SQLite file
// (serve --replica) behind by more than d, or not reached for that long.
func replicaCheck(c *cli.Context) (check, error) {
	d, err := age(c, "replica-lag")
	if err != nil {
		return check{}, err
	}
	if d <= 0 {
		return check{}, errors.New("--replica-lag must be more than 0")
	}
	for _, other := range []string{"max-age", "parked-every-hour", "max-parked", "quiet-for", "failing-for", "down-for", "source"} {
		if c.IsSet(other) {
			return check{}, fmt.Errorf("--replica-lag and --%s (or its INBOX_ALERT_ variable) are two alerts: run one command for each", other)
		}
	}
	if dbaddr.IsPostgres(c.String("db")) {
		return check{}, errors.New("--replica-lag applies to a SQLite file replicated by serve --replica: PostgreSQL keeps its copies with its own replication (watch that with the server's tools)")
	}
	return check{"replica_lag", fmt.Sprintf("replica_lag %s", d), func(c *cli.Context, _ inbox.Store, rep *report) error {
		return alertReplica(c, d, rep)
	}}, nil
}

// alertReplica reads what serve saved of its replica beside the database:
// the lag then, grown by the time since (a serve that stopped or hangs
// syncs no more), unless serve stopped with everything sent.
func alertReplica(c *cli.Context, d time.Duration, rep *report) error {
	st, err := replica.ReadStatus(c.String("db"))
	if errors.Is(err, replica.ErrNoStatus) {
		// Asked to watch a replica there is none of: that is the finding.
		line := "replica\tnone: serve has not replicated this database\tstart it with --replica (or [replica] url in --config)\t(inbox stats)"
		return rep.add("replica", 1, replicaFinding{Replica: "", Unreachable: true}, line)
	}
	if err != nil {
		return err
	}
	lag := st.LagAt(time.Now())
	if lag <= d {
		return nil
	}
	last := "no sync has reached it since serve started"
	if !st.LastSuccess.IsZero() {
		last = "last reached " + formatTime(st.LastSuccess)
	}
	state := "syncs go on but fall behind"
	if st.Error != "" {
		state = "it cannot be reached (serve's log says why)"
	} else if time.Since(st.At) > 10*time.Second {
		state = "serve saved no status since " + formatTime(st.At) + ": is it running?"
	}
	line := fmt.Sprintf("replica %s\tbehind by %s, %s\t%s\t(inbox stats)", cell(st.URL), formatDuration(lag.Round(time.Second)), last, state)
	return rep.add("replica "+idCell(st.URL), 1, replicaFinding{st.URL, lag.Seconds(), st.LastSuccess, st.Error != ""}, line)
}
