package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// badURL is Open's error for a connection string that does not parse:
// pgx's names the URL, password included, so it says only what failed
// (see parseProblem).
func badURL(err error) error {
	return fmt.Errorf("open store: the PostgreSQL connection string does not parse: %s", parseProblem(err))
}

// CheckURL fails as Open does on a connection string that does not parse,
// without connecting.
func CheckURL(url string) error {
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return badURL(err)
	}
	return nil
}

// Unreachable reports whether err, from Open, says the database could not
// be reached or could not take a session yet: an outage to wait out, which
// a later Open may get past without anything changed. That is a failure
// to connect (connection refused, no route, a name that does not resolve,
// a reset), a connect or a statement timed out (a database or network
// that hangs), and the server's own "not now": shutting down (57P01,
// 57P02), starting up or in recovery (57P03), too many connections
// (53300) or a connection exception (class 08).
//
// Anything else is a configuration to fix, and waiting would only hide it:
// a connection string that does not parse, a password or role the server
// refuses (28P01, 28000), a database that does not exist (3D000), TLS the
// server or the client refuses, a missing privilege, a database that takes
// no writes (25006: a standby or default_transaction_read_only; several
// hosts with target_session_attrs=read-write follow a failover instead),
// synchronous_commit off or local, a migration that fails, a schema of
// another version.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	// A TLS alert the server sent (a certificate it refuses) comes as a
	// network error, but it is an answer.
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "remote error" {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
