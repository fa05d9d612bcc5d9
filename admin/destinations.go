package admin

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
)

// DestinationRow is one line of inbox destinations: a destination a
// running dispatcher hands rows to, never its secret, URL or command.
type DestinationRow struct {
	Name          string   `json:"name"`
	Kind          string   `json:"kind"` // forward, exec, nats, redis, bullmq, amqp: config.Destination.Kind
	Sources       []string `json:"sources,omitempty"`
	Events        []string `json:"events,omitempty"`
	Workers       int      `json:"workers"`
	Timeout       string   `json:"timeout"`
	RetrySchedule string   `json:"retry_schedule"`
	Rate          float64  `json:"rate,omitempty"` // attempts a second; 0: no bound
	Signed        bool     `json:"signed,omitempty"`
	State         string   `json:"state"`
}

func destinationsCommand() *cli.Command {
	return &cli.Command{
		Name:  "destinations",
		Usage: "list the destinations a running serve or dispatch hands rows to now",
		Description: `Asks the admin address of a running inbox serve or inbox dispatch (--admin,
its --admin-addr) which destinations it hands rows to now, after any reload
(SIGHUP): for each its name, kind (forward, exec, nats, redis, bullmq or amqp), filters (sources
and events; none: every row), workers, timeout, retry schedule, rate (in
attempts a second; - for no bound), whether a forward destination signs,
and its state (dispatching, paused by an operator, unreachable: paused,
down for a while (its rows wait, no attempt counted, while one row at a
time probes it: see docs/dispatch.md), or starting while a reload restarts
it). It never shows a secret, a URL or a
command.

Without --admin it asks INBOX_ADMIN_ADDR, serve's own variable (host:port,
as deploy/inbox.env sets it), or else http://127.0.0.1:8081, the admin
address the shipped inbox.env gives serve. --admin takes a URL or a
host:port.

Examples:
   inbox destinations
   inbox destinations --admin http://127.0.0.1:8082
   inbox destinations --admin http://127.0.0.1:8081 --json | jq -r 'select(.state != "dispatching") | .name'`,
		Flags: []cli.Flag{jsonFlag(), wideFlag(),
			&cli.StringFlag{Name: "admin", Value: defaultAdmin, Usage: "the URL (or host:port) of serve's or dispatch's --admin-addr", EnvVars: []string{"INBOX_ADMIN_URL", "INBOX_ADMIN_ADDR"}}},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			admin := c.String("admin")
			if admin == "" { // INBOX_ADMIN_URL set, but empty
				admin = cmp.Or(os.Getenv("INBOX_ADMIN_ADDR"), defaultAdmin)
			}
			rows, err := adminLines[DestinationRow](c.Context, admin, "/destinations")
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				return errors.New("--admin: it hands rows to no destination")
			}
			return printRows(c, rows, "NAME\tKIND\tSOURCES\tEVENTS\tWORKERS\tTIMEOUT\tRETRY SCHEDULE\tRATE\tSTATE", func(r DestinationRow) []string {
				rate := "-"
				if r.Rate > 0 {
					rate = strconv.FormatFloat(r.Rate, 'g', -1, 64) + "/s"
				}
				return []string{r.Name, r.Kind, allOr(r.Sources), allOr(r.Events), strconv.Itoa(r.Workers), r.Timeout, r.RetrySchedule, rate, r.State}
			})
		},
	}
}

// defaultAdmin is where inbox destinations asks without --admin: serve's
// --admin-addr has no default (without it the probes share the webhook
// port and there is no /destinations), so this is the address the shipped
// deploy/inbox.env gives it (INBOX_ADMIN_ADDR).
const defaultAdmin = "http://127.0.0.1:8081"

// adminURL is the URL of an admin address given as a URL or, as
// --admin-addr takes it, as host:port (an empty or unspecified host is
// this machine's loopback).
func adminURL(s string) string {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "://") {
		return s
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "http://" + s // the request says what is wrong with it
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// allOr lists a filter, or says it takes all.
func allOr(list []string) string {
	if len(list) == 0 {
		return "all"
	}
	return strings.Join(list, ",")
}

// adminLines reads the JSON lines GET path answers with on admin (the
// admin address of serve or dispatch, a URL or host:port), one T each.
func adminLines[T any](ctx context.Context, admin, path string) ([]T, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	base := strings.TrimSuffix(adminURL(admin), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("--admin %s: %w", admin, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL said once already
		}
		return nil, fmt.Errorf("--admin %s: GET %s: %w: give --admin the URL of a running serve's or dispatch's --admin-addr", strings.TrimSuffix(req.URL.Redacted(), path), path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("--admin: GET %s: %s (is it the --admin-addr of serve or dispatch?)", req.URL.Redacted(), resp.Status)
	}
	var rows []T
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("--admin: GET %s: %w", req.URL.Redacted(), err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--admin: GET %s: %w", req.URL.Redacted(), err)
	}
	return rows, nil
}
