package repocache

import (
	"os"
	"syscall"
)

// stampOf returns the file's size, change time and inode.
func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return stamp{size: fi.Size(), ctime: st.Ctim.Nano(), ino: st.Ino}, nil
	}
	return stamp{size: fi.Size(), ctime: fi.ModTime().UnixNano()}, nil
}
