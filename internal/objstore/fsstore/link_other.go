//go:build !linux

package fsstore

import (
	"errors"
	"os"
)

// linkOpen is not available here: Copy copies the bytes.
func linkOpen(*os.File, string) error { return errors.ErrUnsupported }
