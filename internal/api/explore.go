package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/ghost-scm/ghost/internal/meta"
)

// The explore endpoints: what a visitor can discover without knowing a
// name, and the organizations a signed-in user belongs to
// (docs/adr/0103-web-ui-forms.md).

// Bounds of GET /api/repos: a page shows up to exploreMax public
// repositories and reads at most exploreRead repository records, so a
// page costs the same however many private repositories the
// installation holds; next_page continues where it stopped.
const (
	exploreDefault = 50
	exploreMax     = 100
	exploreRead    = 500
)

type repoPageJSON struct {
	Repos    []repoJSON `json:"repos"`
	NextPage string     `json:"next_page,omitempty"`
}

// publicRepos lists the public repositories of every owner in name order,
// a page at a time (?page=, ?per_page=). A page may hold fewer than
// per_page while next_page is set.
func (h *handler) publicRepos(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	limit := exploreDefault
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("%w: per_page=%q: want a positive whole number", meta.ErrInvalidArgument, v)
		}
		limit = min(n, exploreMax)
	}
	after := r.URL.Query().Get("page")
	out := repoPageJSON{Repos: []repoJSON{}}
	for read := 0; read < exploreRead; {
		rs, next, err := h.store.ReposPage(r.Context(), after, min(exploreMax, exploreRead-read))
		if err != nil {
			return 0, nil, err
		}
		read += max(len(rs), 1)
		for i, repo := range rs {
			if !repo.Public {
				continue
			}
			out.Repos = append(out.Repos, toRepo(repo))
			if len(out.Repos) == limit {
				if i < len(rs)-1 || next != "" {
					out.NextPage = meta.RepoCursor(repo)
				}
				return http.StatusOK, out, nil
			}
		}
		if after = next; after == "" {
			return http.StatusOK, out, nil
		}
	}
	out.NextPage = after
	return http.StatusOK, out, nil
}

// userOrgs lists the organizations the caller is a member of.
//
// Memberships are kept by org (meta/members/<org>/<user>, docs/design.md
// §7.3), so this reads every tenant record and one membership record per
// org: its cost grows with the installation's tenants until the metadata
// store keeps an index by user (docs/design.md §10.7).
func (h *handler) userOrgs(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	out := []tenantJSON{}
	if h.operator != nil {
		return http.StatusOK, out, nil
	}
	ts, err := h.store.ListTenants(r.Context())
	if err != nil {
		return 0, nil, err
	}
	for _, t := range ts {
		if t.Kind != meta.KindOrg {
			continue
		}
		member, err := h.store.IsMember(r.Context(), t.Name, p.Tenant)
		if err != nil {
			return 0, nil, err
		}
		if member {
			out = append(out, toTenant(t))
		}
	}
	return http.StatusOK, out, nil
}
