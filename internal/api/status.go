package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/wal"
)

// status maps an error to the one HTTP status that reports it
// (docs/design.md §9). Each layer keeps its own sentinels and the API,
// the HTTP edge, maps them here: 400 invalid name or argument, 401
// unauthenticated, 403 forbidden, 404 not found, 409 exists, not empty
// or a ref conflict, 503 unavailable or contention (retry); 500 for
// anything else, a corrupt log among them. Alert and scan errors arrive
// already given a kind by alertError and scanError.
func status(err error) int {
	var nff *wal.NonFastForwardError
	var rc *wal.RefConflictError
	var mbe *http.MaxBytesError
	var se interface{ HTTPStatus() int }
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &se):
		return se.HTTPStatus()
	case errors.Is(err, meta.ErrInvalidName), errors.Is(err, meta.ErrInvalidArgument), errors.Is(err, wal.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, meta.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, meta.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, meta.ErrNotFound), errors.Is(err, wal.ErrRepoDeleted):
		return http.StatusNotFound
	case errors.Is(err, meta.ErrExists), errors.Is(err, meta.ErrNotEmpty), errors.Is(err, wal.ErrRepoExists),
		errors.As(err, &nff), errors.As(err, &rc):
		return http.StatusConflict
	case errors.Is(err, meta.ErrUnavailable), errors.Is(err, meta.ErrContention), errors.Is(err, wal.ErrContention):
		return http.StatusServiceUnavailable
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errors.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, context.Canceled):
		return 499 // client went away; nobody reads the body
	}
	return http.StatusInternalServerError
}
