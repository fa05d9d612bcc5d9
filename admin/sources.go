package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/deploy"
	"inbox/inbox"
	"inbox/scheme"
)

// SourceSecret is one line of inbox sources: a secret of a source.
type SourceSecret struct {
	Source       string    `json:"source"`
	Path         string    `json:"path"`
	Scheme       string    `json:"scheme"`
	Secret       int       `json:"secret"`
	Fingerprint  string    `json:"fingerprint,omitempty"`
	State        string    `json:"state"`
	Expires      time.Time `json:"expires,omitzero"`
	LastVerified time.Time `json:"last_verified_at,omitzero"`
}

func sourcesCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "sources",
		Usage: "list the configured sources and when each secret last verified a delivery",
		Description: `Lists each source of --config with its path and scheme, and per secret its
position in the file (without --config: the one Sume source serve runs
without it, its secrets read from SUME_COM_WEBHOOK_SIGNING_SECRET as serve
reads them, comma-separated, and its path from INBOX_PATH), its state (live; expired; invalid when its value is
not in its scheme's form or is a placeholder of the shipped files; or unset when its variable
is not in this environment), a fingerprint (the first 8 hex of the sha256 of
its key; never the secret), its expiry and when it last verified a delivery,
as serve records it (at most a minute late). Below them, for each source
with requests that failed verification (401), how many since when, and
whether a delivery verified since they began: if none did, the sender may
sign with a secret serve does not have (inbox alert --failing-for). It runs
without the secrets: an unset one shows no fingerprint, and so no last use;
run it with serve's environment to see them all. A retired secret that has not verified
anything since the rotation can be removed.

With --admin URL (serve's --admin-addr) it lists what that serve answers
with now, after any reload (SIGHUP), rather than what a file says: every
secret as serve read it from its own environment, its last use the later
of the saved one and the one serve holds unsaved. It needs no --db then.

Examples:
   SUME_COM_WEBHOOK_SIGNING_SECRET=whsec_new,whsec_old inbox sources --db /var/lib/inbox/inbox.db
   inbox sources --config /etc/inbox/inbox.toml --db /var/lib/inbox/inbox.db
   inbox sources --admin http://127.0.0.1:8081
   inbox sources --config inbox.toml --json | jq 'select(.state == "live" and .last_verified_at == null)'`,
		Flags: []cli.Flag{config.DBFlag(), config.FileFlag("the TOML file of [[source]] tables serve reads; without it, the Sume source of SUME_COM_WEBHOOK_SIGNING_SECRET"), jsonFlag(), wideFlag(),
			&cli.StringFlag{Name: "admin", Usage: "the URL of serve's --admin-addr: list the sources serve answers with now (since its last reload), with their secrets' last uses, rather than a file's (--config and --db are not read then)", EnvVars: []string{"INBOX_ADMIN_URL"}}},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			if url := c.String("admin"); url != "" {
				rows, err := liveSourceSecrets(c.Context, url)
				if err != nil {
					return err
				}
				return printSourceSecrets(c, rows)
			}
			sources := []config.Source{envSumeSource(os.Getenv)}
			if file := c.String("config"); file != "" {
				var err error
				if sources, err = config.DescribeSources(file, os.Getenv); err != nil {
					return err
				}
			}
			store, err := openRead(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			uses, err := store.SecretUses(c.Context)
			if err != nil {
				return err
			}
			if err := printSourceSecrets(c, SourceSecrets(sources, uses, time.Now())); err != nil || c.Bool("json") {
				return err
			}
			runs, err := store.Unverified(c.Context)
			if err != nil {
				return err
			}
			return printUnverified(c.App.Writer, sources, runs, uses)
		},
	}
}

// printSourceSecrets prints rows as inbox sources does.
func printSourceSecrets(c *cli.Context, rows []SourceSecret) error {
	return printRows(c, rows, "SOURCE\tPATH\tSCHEME\tSECRET\tSTATE\tFINGERPRINT\tEXPIRES\tLAST VERIFIED", func(r SourceSecret) []string {
		return []string{r.Source, r.Path, r.Scheme, strconv.Itoa(r.Secret), r.State,
			dash(r.Fingerprint), timeOrDash(r.Expires), timeOrDash(r.LastVerified)}
	})
}

// printUnverified prints, below the secrets, each source's run of
// requests that failed verification, and whether a delivery verified
// since it began; nothing when no source listed has one.
func printUnverified(w io.Writer, sources []config.Source, runs []inbox.Unverified, uses []inbox.SecretUse) error {
	runs = slices.DeleteFunc(runs, func(r inbox.Unverified) bool {
		return !slices.ContainsFunc(sources, func(s config.Source) bool { return s.Name == r.Source })
	})
	if len(runs) == 0 {
		return nil
	}
	broken := map[string]bool{}
	for _, b := range inbox.BrokenRotations(runs, uses, time.Time{}, 1) {
		broken[b.Source] = true
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSOURCE\tFAILED VERIFICATION\tFIRST\tLAST\tVERIFIED SINCE")
	for _, r := range runs {
		since := "yes"
		if broken[r.Source] {
			since = "no: a broken rotation? (inbox alert --failing-for)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", cell(r.Source), r.Count, formatTime(r.First), formatTime(r.Last), since)
	}
	return tw.Flush()
}

// SecretUseReader is what GET /sources reads of the store.
type SecretUseReader interface {
	SecretUses(ctx context.Context) ([]inbox.SecretUse, error)
}

// SourceSecrets describes each secret of sources, with the latest of uses
// for its source and fingerprint. It never holds a secret.
func SourceSecrets(sources []config.Source, uses []inbox.SecretUse, now time.Time) []SourceSecret {
	last := map[[2]string]time.Time{}
	for _, u := range uses {
		k := [2]string{u.Source, u.Fingerprint}
		if u.LastVerified.After(last[k]) {
			last[k] = u.LastVerified
		}
	}
	var rows []SourceSecret
	for _, src := range sources {
		for i, e := range src.Secrets {
			r := SourceSecret{Source: src.Name, Path: src.Path, Scheme: src.Scheme.Name(),
				Secret: i + 1, State: "live", Expires: e.Expires}
			if e.Key != nil {
				r.Fingerprint = scheme.Secret{Key: e.Key}.Fingerprint()
				r.LastVerified = last[[2]string{src.Name, r.Fingerprint}]
			} else if e.Invalid {
				r.State = "invalid"
			} else {
				r.State = "unset"
			}
			if !e.Expires.IsZero() && !now.Before(e.Expires) {
				r.State = "expired"
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// liveSourceSecrets reads the sources a running serve answers with from
// GET /sources on its admin address.
func liveSourceSecrets(ctx context.Context, adminURL string) ([]SourceSecret, error) {
	rows, err := adminLines[SourceSecret](ctx, adminURL, "/sources")
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("--admin: serve listed no source")
	}
	return rows, nil
}

// sumeSecretEnv is the variable serve reads the Sume source's secrets
// from when it runs without --config.
const sumeSecretEnv = "SUME_COM_WEBHOOK_SIGNING_SECRET"

// envSumeSource describes the one Sume source serve runs without --config:
// its path from INBOX_PATH (serve's --path), its secrets from
// SUME_COM_WEBHOOK_SIGNING_SECRET split at commas and trimmed, as serve's
// flag reads them. An empty one among them, or a placeholder of the
// shipped files, both of which serve refuses, is invalid; with the
// variable unset there is one secret, unset.
func envSumeSource(getenv func(string) string) config.Source {
	src := config.Source{Name: inbox.DefaultSource, Path: getenv("INBOX_PATH"), Scheme: scheme.Sume{}}
	if src.Path == "" {
		src.Path = "/webhooks/" + inbox.DefaultSource
	}
	val := getenv(sumeSecretEnv)
	if val == "" {
		src.Secrets = []config.SecretEntry{{Env: sumeSecretEnv}}
		return src
	}
	for _, v := range strings.Split(val, ",") {
		e := config.SecretEntry{Env: sumeSecretEnv}
		if v = strings.TrimSpace(v); v == "" || deploy.Placeholder(v) {
			e.Invalid = true
		} else {
			e.Key = []byte(v)
		}
		src.Secrets = append(src.Secrets, e)
	}
	return src
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return formatTime(t)
}
