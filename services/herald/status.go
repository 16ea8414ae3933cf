package herald

import (
	"context"
	"errors"
)

// runStatus is `herald status`.
func runStatus(ctx context.Context, args []string, o IO) error {
	return errors.New("not yet")
}
