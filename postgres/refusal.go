package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// explainRefusal adds to err, a writable Open's failure, what to do when
// the server refused a write: the bare "permission denied for table probe"
// does not say that the command needs the role that writes.
func explainRefusal(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "42501": // insufficient_privilege
		if up := (*upgradeError)(nil); errors.As(err, &up) {
			return fmt.Errorf("%w: the schema is at version %d and this inbox needs %d, and upgrading it takes a role with CREATE on the schema that owns its tables, which the role it connected as is not: run inbox migrate once as that role (the one that made them); then a role with only SELECT, INSERT, UPDATE and DELETE on the tables serves every command", err, up.from, up.to)
		}
		return fmt.Errorf("%w: this command writes, and the role it connected as may not: connect as the role that writes the schema's tables (SELECT, INSERT, UPDATE and DELETE on them); a read-only role serves only the commands that read", err)
	case "25006": // read_only_sql_transaction
		return fmt.Errorf("%w: this command writes, and the database takes none (a standby, or default_transaction_read_only on for the role, the database or the server): connect to the primary as the role that writes", err)
	}
	return err
}

// parseProblem says what of a connection string pgx refused, without the
// string itself, which may hold a password: pgx's own text quotes it,
// redacted only as far as it can tell where the password is.
func parseProblem(err error) string {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return "not a postgres:// URL or key=value string pgx takes"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "not a valid URL"
	}
	bare := *pce
	bare.ConnString = ""
	return strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
}
