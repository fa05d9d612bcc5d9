package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/process"
	"inbox/reconcile"
	"inbox/sume"
)

// reconcileFlags are the flags of the loop that polls expected jobs.
func reconcileFlags() []cli.Flag {
	return inCategory(catPolling,
		&cli.StringFlag{Name: "api-key", Usage: "Sume API key (jobs:read and jobs:write): poll overdue expected jobs and ask for their redelivery; empty: no polling (prefer the environment variable)", EnvVars: []string{"SUME_API_KEY"}},
		&cli.StringFlag{Name: "api-url", Value: sume.DefaultAPIURL, Usage: "the Sume API's base URL (https, or http to a loopback host)", EnvVars: []string{"SUME_API_URL"}},
		// Zero is a default to reconcile.New; on the command line it is a mistake.
		config.DurationFlag("poll-every", reconcile.DefaultPollEvery, "how often expected jobs past their window are looked for", "INBOX_POLL_EVERY", config.Positive),
		config.DurationFlag("poll-backoff", reconcile.DefaultBackoff, "the wait after a poll finds a job running (or a redelivery has not arrived), doubling up to 1h", "INBOX_POLL_BACKOFF", config.Positive),
		&cli.IntFlag{Name: "api-concurrency", Value: reconcile.DefaultConcurrency, Usage: "requests to the Sume API at once", EnvVars: []string{"INBOX_API_CONCURRENCY"}},
		&cli.Float64Flag{Name: "api-rate", Value: reconcile.DefaultRate, Usage: "requests to the Sume API per second, at most", EnvVars: []string{"INBOX_API_RATE"}},
	)
}

// parseReconcile reads the polling flags. It fails on a flag out of range,
// the placeholder key, or an API URL the key must not go to.
func parseReconcile(c *cli.Context) (process.Reconcile, error) {
	if c.Int("api-concurrency") < 1 || c.Float64("api-rate") <= 0 {
		return process.Reconcile{}, fmt.Errorf("--api-concurrency %d and --api-rate %g: want at least 1 request at once, and a rate above 0 a second", c.Int("api-concurrency"), c.Float64("api-rate"))
	}
	rc := process.Reconcile{APIURL: c.String("api-url"), Loop: reconcile.Config{
		PollEvery:   config.DurationOf(c, "poll-every").Get(),
		Backoff:     config.DurationOf(c, "poll-backoff").Get(),
		MaxBackoff:  max(reconcile.DefaultMaxBackoff, config.DurationOf(c, "poll-backoff").Get()),
		Concurrency: c.Int("api-concurrency"),
		Rate:        c.Float64("api-rate"),
		// A stop waits no longer for the store than a delivery does.
		WriteTimeout: config.DurationOf(c, "busy-timeout").Get() + lastWriteMargin,
	}}
	if key := c.String("api-key"); key != "" {
		if strings.HasPrefix(key, "replace-with") {
			return process.Reconcile{}, errors.New("SUME_API_KEY (--api-key) is the placeholder of deploy/inbox.env: set your key, or leave it unset")
		}
		client, err := apiClient(c)
		if err != nil {
			return process.Reconcile{}, err
		}
		rc.API = client
	}
	return rc, nil
}

// lastWriteMargin is what a write of the refusals may take beyond the busy
// timeout, as a delivery's answer may (see the contract's 503 row).
const lastWriteMargin = 500 * time.Millisecond

// apiClient is the Sume client the flags describe. Its requests are not
// retried in place: the loop polls again later, as Retry-After says.
func apiClient(c *cli.Context) (*sume.Client, error) {
	client := &sume.Client{BaseURL: c.String("api-url"), APIKey: c.String("api-key"), Retries: -1,
		HTTP: &http.Client{Timeout: 10 * time.Second}}
	if err := client.Check(); err != nil {
		return nil, fmt.Errorf("--api-url: %w", err)
	}
	return client, nil
}
