package meta

import "context"

// RepoCursor is the ReposPage cursor that continues right after r, for a
// caller that stops in the middle of a page (the explore page shows the
// public repositories of a page, up to a count).
func RepoCursor(r Repo) string { return repoKey(lower(r.Owner), lower(r.Name)) }

// IsMember reports whether user is a member of org. A storage failure is
// an error wrapping ErrUnavailable, never a "no".
func (s *Store) IsMember(ctx context.Context, org, user string) (bool, error) {
	return s.isMember(ctx, org, user)
}
