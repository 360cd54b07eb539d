package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

func TestError(t *testing.T) {
	cause := fmt.Errorf("%w: %w", objstore.ErrPreconditionFailed, errors.New("412 from the server"))
	var err error = &objstore.Error{Op: "PutIfMatch", Key: "repos/r/index", Err: cause}
	if got, want := err.Error(), `PutIfMatch "repos/r/index": precondition failed: 412 from the server`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, objstore.ErrPreconditionFailed) || errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("errors.Is does not follow Err: %v", err)
	}
	// A key no backend accepts is quoted, so a log line stays one line.
	err = &objstore.Error{Op: "Get", Key: "a\nb", Err: objstore.ErrInvalidKey}
	if got, want := err.Error(), `Get "a\nb": invalid object key`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func ExampleError() {
	s := memstore.New()
	_, _, err := s.Get(context.Background(), "repos/r/index")
	var e *objstore.Error
	if errors.As(err, &e) {
		fmt.Println(e.Op, e.Key, errors.Is(err, objstore.ErrNotFound))
	}
	fmt.Println(err)
	// Output:
	// Get repos/r/index true
	// Get "repos/r/index": object not found
}
