package admin

import (
	"inbox/config"

	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/sume"
)

// sendTimeout bounds one sample delivery, as the provider bounds each
// attempt.
const sendTimeout = 10 * time.Second

func sendCommand() *cli.Command {
	return &cli.Command{
		Name:  "send",
		Usage: "sign and post a sample delivery, the way the provider does",
		Description: `Signs a delivery with the signing secret and the current time and POSTs
it to --url, as Sume does. The body is --body-file's exact bytes, or a
realistic job event for --event and --job-id (a fresh job_<hex> id unless
given); --body-file with --event or --job-id is refused. Prints the status code; exits 1 unless it is 2xx.

Examples:
   SUME_COM_WEBHOOK_SIGNING_SECRET=... inbox send
   inbox send --event job.exploded --job-id job_test_1
   inbox send --url https://hooks.example.com/webhooks/sume --body-file delivery.json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:8080/webhooks/sume", Usage: "where to post", EnvVars: []string{"INBOX_SEND_URL"}},
			&cli.StringFlag{Name: "event", Value: "job.completed", Usage: "the event of the sample body", EnvVars: []string{"INBOX_SEND_EVENT"}},
			&cli.StringFlag{Name: "job-id", Usage: "the job_id of the sample body (default: a fresh job_<hex>)", EnvVars: []string{"INBOX_SEND_JOB_ID"}},
			&cli.StringFlag{Name: "body-file", Usage: "post this file's exact bytes instead of a sample body", EnvVars: []string{"INBOX_SEND_BODY_FILE"}},
			&cli.StringSliceFlag{Name: "secret", Usage: "signing secret; several sign with each (prefer the environment variable: flags show in ps)", EnvVars: []string{"SUME_COM_WEBHOOK_SIGNING_SECRET"}},
		},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			if c.String("body-file") != "" && (c.IsSet("event") || c.IsSet("job-id")) {
				return errors.New("--body-file sends the file's exact bytes: --event and --job-id do not apply")
			}
			secrets, err := config.SplitList(c.StringSlice("secret"))
			if err != nil {
				return fmt.Errorf("signing secret: %w", err)
			}
			if len(secrets) == 0 {
				return errors.New("no signing secret: set SUME_COM_WEBHOOK_SIGNING_SECRET (or --secret)")
			}
			body, err := sendBody(c)
			if err != nil {
				return err
			}
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			req, err := http.NewRequestWithContext(c.Context, http.MethodPost, c.String("url"), bytes.NewReader(body))
			if err != nil {
				return fmt.Errorf("send: %w", err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(sume.HeaderTimestamp, ts)
			req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, body, secrets...))
			resp, err := (&http.Client{Timeout: sendTimeout}).Do(req)
			if err != nil {
				return fmt.Errorf("send: %w", err)
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			fmt.Fprintln(c.App.Writer, resp.Status)
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				return fmt.Errorf("send: the receiver answered %s", resp.Status)
			}
			return nil
		},
	}
}

// sendBody returns --body-file's bytes, or a sample body shaped like a
// Sume job event.
func sendBody(c *cli.Context) ([]byte, error) {
	if f := c.String("body-file"); f != "" {
		body, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--body-file: %w", err)
		}
		return body, nil
	}
	jobID := c.String("job-id")
	if jobID == "" {
		b := make([]byte, 8)
		rand.Read(b) // never fails
		jobID = "job_" + hex.EncodeToString(b)
	}
	return sampleBody(c.String("event"), jobID, time.Now()), nil
}

// sampleBody is a realistic Sume job event: a completed job with its
// artifacts, or for a failed or canceled job the ERROR status and an error.
func sampleBody(event, jobID string, now time.Time) []byte {
	doc := map[string]any{
		"event":        event,
		"job_id":       jobID,
		"status":       "COMPLETED",
		"created_at":   now.Add(-2 * time.Minute).UTC().Format(time.RFC3339),
		"completed_at": now.UTC().Format(time.RFC3339),
		"payload": map[string]any{
			"duration_seconds": 12.5,
			"artifacts": []map[string]any{{
				"type":         "video",
				"content_type": "video/mp4",
				"size_bytes":   4718592,
				"url":          "https://cdn.sume.com/jobs/" + jobID + "/output.mp4",
			}},
		},
	}
	switch event {
	case "job.failed", "job.canceled":
		doc["status"] = "ERROR"
		doc["payload"] = nil
		doc["error"] = map[string]any{"code": "render_failed", "message": "the render failed"}
		if event == "job.canceled" {
			doc["error"] = map[string]any{"code": "canceled", "message": "the job was canceled"}
		}
	}
	body, _ := json.Marshal(doc) // cannot fail: plain values
	return body
}
