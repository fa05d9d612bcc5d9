package postgres

import (
	"context"
	"errors"
	"fmt"

	"inbox/inbox"
)

// Reprocess is not supported on PostgreSQL yet: it fails with an error
// that wraps errors.ErrUnsupported, changing nothing.
func (s *Store) Reprocess(ctx context.Context, sel inbox.Selection, rules inbox.SourceRules, dryRun bool) (inbox.ReprocessReport, error) {
	return inbox.ReprocessReport{Parked: map[inbox.Reason]int{}, DryRun: dryRun},
		fmt.Errorf("reprocess: not supported on postgres yet: %w", errors.ErrUnsupported)
}
