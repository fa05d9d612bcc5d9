package admin

import (
	"inbox/config"

	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/urfave/cli/v2"
)

// secretBytes is the length of a key inbox secret makes: HMAC-SHA256's
// block is 64 bytes and its output 32; the Standard Webhooks specification
// asks for 24 to 64.
const secretBytes = 32

// SecretCommand is inbox secret: it prints a fresh Standard Webhooks
// secret. It fails only when the system's random source does.
func SecretCommand() *cli.Command {
	return &cli.Command{
		Name:  "secret",
		Usage: "print a fresh Standard Webhooks secret: whsec_ and the base64 of 32 random bytes",
		Description: `Prints a new secret in the one form Standard Webhooks libraries verify with
their defaults, whsec_ and the base64 of the key: for INBOX_FORWARD_SECRET
(give the same value to the application, which verifies with, for example,
standardwebhooks.NewWebhook(secret)), or for a standard-webhooks source
when you pick the secret yourself. It prints the secret and nothing else,
so it can be captured; keep it out of shell history and flags.

Examples:
   inbox secret
   sudo sh -c 'printf "INBOX_FORWARD_SECRET=%s\n" "$(inbox secret)" >> /etc/inbox/inbox.env'`,
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			key := make([]byte, secretBytes)
			if _, err := rand.Read(key); err != nil {
				return fmt.Errorf("secret: read random bytes: %w", err)
			}
			_, err := fmt.Fprintf(c.App.Writer, "whsec_%s\n", base64.StdEncoding.EncodeToString(key))
			return err
		},
	}
}
