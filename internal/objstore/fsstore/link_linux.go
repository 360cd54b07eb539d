package fsstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// linkOpen links the file f has open to a new name: through
// /proc/self/fd, following the magic link, so that the name is for the
// open file itself rather than for whatever its path names now.
func linkOpen(f *os.File, name string) error {
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
}
