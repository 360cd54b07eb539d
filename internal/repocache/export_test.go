package repocache

// Restamp records every pack of the repository in dir as verified as it
// is now, as if its bytes had changed without any write the cache could
// notice (bit rot): only a verification after Suspect then finds it.
func Restamp(dir string) {
	st, err := readState(dir)
	if err != nil {
		panic(err)
	}
	(&Cache{}).trustAll(dir, st)
}

// SetTestHook makes c call hook at the steps of a background
// consolidation ("planned", "packed").
func SetTestHook(c *Cache, hook func(step string)) { c.testHook = hook }

// RecordedPacks lists the packs the state of the repository in dir
// records.
func RecordedPacks(dir string) []string {
	st, err := readState(dir)
	if err != nil {
		panic(err)
	}
	return recordedNames(st)
}

// BitmapDue is c.bitmapDue.
func BitmapDue(c *Cache, repo string) bool { return c.bitmapDue(repo) }

// WantsBitmap is c.wantsBitmap.
func WantsBitmap(c *Cache, dir string) bool { return c.wantsBitmap(dir) }
