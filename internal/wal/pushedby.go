package wal

import (
	"context"
	"errors"
	"fmt"
)

// PushedByLookback bounds how many of a log's newest entries PushedBy
// reads; PushedByBatch is how many it reads at once. The newest entry is
// nearly always the one asked for (the lookup follows the push), so the
// usual cost is the index GET and one ranged GET, and the worst is the
// index and PushedByLookback/PushedByBatch rounds of ranged GETs.
const (
	PushedByLookback = 64
	PushedByBatch    = 8
)

// PushedBy returns the pushed-by field of the newest of repo's entries
// that set ref to commit, among the log's PushedByLookback newest
// entries; "" and a nil error when none of them did (the push is older
// or was folded into a checkpoint, whose entries are no longer listed).
// It is how a pull request learns who pushed its head's last commit
// (docs/adr/0134-last-push-approval.md).
func (l *Log) PushedBy(ctx context.Context, repo, ref, commit string) (string, error) {
	x, err := l.Head(ctx, repo)
	if err != nil {
		return "", err
	}
	layers := x.Layers
	if len(layers) > PushedByLookback {
		layers = layers[len(layers)-PushedByLookback:]
	}
	for end := len(layers); end > 0; end -= PushedByBatch {
		start := max(0, end-PushedByBatch)
		batch := layers[start:end]
		heads := make([]*EntryHeader, len(batch))
		errs := make([]error, len(batch))
		done := make(chan int, len(batch))
		for i, ly := range batch {
			go func() {
				heads[i], errs[i] = l.ReadEntryHeader(ctx, repo, ly.ULID)
				done <- i
			}()
		}
		for range batch {
			<-done
		}
		if err := errors.Join(errs...); err != nil {
			return "", fmt.Errorf("who pushed %s to %s: %w", commit, ref, err)
		}
		for i := len(heads) - 1; i >= 0; i-- {
			for _, t := range heads[i].Transitions {
				if t.Ref == ref && t.New == commit {
					return heads[i].PushedBy, nil
				}
			}
		}
	}
	return "", nil
}
