package admin

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/scheme"
)

// sourceSecret is one line of inbox sources: a secret of a source.
type sourceSecret struct {
	Source       string    `json:"source"`
	Path         string    `json:"path"`
	Scheme       string    `json:"scheme"`
	Secret       int       `json:"secret"`
	Fingerprint  string    `json:"fingerprint,omitempty"`
	State        string    `json:"state"`
	Expires      time.Time `json:"expires,omitzero"`
	LastVerified time.Time `json:"last_verified_at,omitzero"`
}

func sourcesCommand() *cli.Command {
	return &cli.Command{
		Name:  "sources",
		Usage: "list the configured sources and when each secret last verified a delivery",
		Description: `Lists each source of --config with its path and scheme, and per secret its
position in the file, its state (live; expired; invalid when its value is
not in its scheme's form; or unset when its variable
is not in this environment), a fingerprint (the first 8 hex of the sha256 of
its key; never the secret), its expiry and when it last verified a delivery,
as serve records it (at most a minute late). It runs without the secrets:
an unset one shows no fingerprint, and so no last use; run it with serve's
environment to see them all. A retired secret that has not verified
anything since the rotation can be removed.

Examples:
   inbox sources --config /etc/inbox/inbox.toml --db /var/lib/inbox/inbox.db
   inbox sources --config inbox.toml --json | jq 'select(.state == "live" and .last_verified_at == null)'`,
		Flags: []cli.Flag{DBFlag(), ConfigFlag("required: the TOML file of [[source]] tables serve reads"), jsonFlag()},
		Action: func(c *cli.Context) error {
			if err := NoArgs(c); err != nil {
				return err
			}
			if c.String("config") == "" {
				return fmt.Errorf("--config is required")
			}
			sources, err := DescribeSources(c.String("config"), os.Getenv)
			if err != nil {
				return err
			}
			store, err := openRead(c)
			if err != nil {
				return err
			}
			defer store.Close()
			uses, err := store.SecretUses(c.Context)
			if err != nil {
				return err
			}
			last := map[[2]string]time.Time{}
			for _, u := range uses {
				last[[2]string{u.Source, u.Fingerprint}] = u.LastVerified
			}
			now := time.Now()
			var rows []sourceSecret
			for _, src := range sources {
				for i, e := range src.Secrets {
					r := sourceSecret{Source: src.Name, Path: src.Path, Scheme: src.Scheme.Name(),
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
			return printRows(c, rows, "SOURCE\tPATH\tSCHEME\tSECRET\tSTATE\tFINGERPRINT\tEXPIRES\tLAST VERIFIED", func(r sourceSecret) string {
				return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s", r.Source, r.Path, r.Scheme, r.Secret, r.State,
					dash(r.Fingerprint), timeOrDash(r.Expires), timeOrDash(r.LastVerified))
			})
		},
	}
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return formatTime(t)
}
