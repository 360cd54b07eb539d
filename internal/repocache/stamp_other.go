//go:build !linux

package repocache

import "os"

// stampOf returns the file's size and modification time: without the
// change time, a write that restores the modification time goes unseen
// until a serving failure marks the repository (Cache.Suspect).
func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{size: fi.Size(), ctime: fi.ModTime().UnixNano()}, nil
}
