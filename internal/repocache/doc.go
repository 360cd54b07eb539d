// Package repocache materializes repositories from the write-ahead log
// into bare git repositories on local disk (docs/design.md §5, "The node cache").
//
// The cache is only ever a function of the log: before serving a read or
// validating a push, a caller asks Materialize to bring a repository
// forward. That reads the index, indexes each missing layer's pack in seq
// order with git index-pack, reconciles every ref to the index snapshot in
// one git update-ref transaction, points HEAD at the default branch and
// records the applied seq. Anything the cache holds that the log does not
// explain (a seq ahead of the log, a layer list that differs, a missing,
// truncated or overwritten pack, a missing or garbled state file), and a
// cache that looked sound but could not be brought forward, makes it
// rebuild the repository from scratch in a temporary directory and swap it
// in, so a wiped, stale, damaged or hand-edited cache heals itself and the
// cache is never ahead of the log.
package repocache
