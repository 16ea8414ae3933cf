package herald

import (
	"context"
	"errors"
)

// runConfig is `herald config check [FILE]`.
func runConfig(ctx context.Context, args []string, o IO) error {
	return errors.New("not yet")
}
