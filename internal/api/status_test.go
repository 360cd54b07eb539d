package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/wal"
)

func TestStatus(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 200},
		{fmt.Errorf("x: %w", meta.ErrInvalidName), 400},
		{fmt.Errorf("x: %w", meta.ErrInvalidArgument), 400},
		{fmt.Errorf("x: %w", wal.ErrInvalid), 400},
		{fmt.Errorf("x: %w", meta.ErrUnauthenticated), 401},
		{fmt.Errorf("x: %w", meta.ErrForbidden), 403},
		{fmt.Errorf("x: %w", meta.ErrNotFound), 404},
		{fmt.Errorf("x: %w", wal.ErrRepoDeleted), 404},
		{fmt.Errorf("x: %w", meta.ErrExists), 409},
		{fmt.Errorf("x: %w", meta.ErrNotEmpty), 409},
		{fmt.Errorf("x: %w", wal.ErrRepoExists), 409},
		{fmt.Errorf("x: %w", &wal.NonFastForwardError{Ref: "refs/heads/main"}), 409},
		{fmt.Errorf("x: %w", &wal.RefConflictError{Ref: "a/b", Conflict: "a"}), 409},
		{fmt.Errorf("x: %w", meta.ErrUnavailable), 503},
		{fmt.Errorf("x: %w", meta.ErrContention), 503},
		{fmt.Errorf("x: %w", wal.ErrContention), 503},
		{fmt.Errorf("x: %w", &http.MaxBytesError{Limit: 1}), 413},
		{fmt.Errorf("x: %w", errors.ErrUnsupported), 501},
		{fmt.Errorf("x: %w", context.Canceled), 499},
		{fmt.Errorf("x: %w", wal.ErrCorrupt), 500},
		{errors.New("disk on fire"), 500},
	} {
		if got := status(tt.err); got != tt.want {
			t.Errorf("status(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
