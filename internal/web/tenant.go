package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/meta"
)

// The pages of tenants: the home page, explore, an owner's repositories
// and a new repository.

// ownerPageSize is how many repositories the owner page shows at a time.
const ownerPageSize = 50

// owner lists a page of the repositories of a tenant that the visitor may
// read, ?after=<name> the last of the previous page: one LIST, whatever
// the tenant owns (docs/adr/0027-listing-keys.md).
func (h *Handler) owner(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner := r.PathValue("owner")
	// Whether v sees the owner's private repositories is one decision.
	private, err := h.opts.Authz.CanRead(r.Context(), v.p, meta.Repo{Owner: owner})
	if err != nil {
		return classify("authorize", err)
	}
	after := strings.ToLower(r.URL.Query().Get("after"))
	repos, next, err := h.opts.Repos.ListRepoPage(r.Context(), owner, after, ownerPageSize, !private)
	if err != nil {
		return classify("list repositories", err)
	}
	nextURL := ""
	if next != "" {
		nextURL = "/" + urlSegment(owner) + "?after=" + url.QueryEscape(next)
	}
	canWrite := false
	if v.p != nil {
		if canWrite, err = h.opts.Authz.CanWrite(r.Context(), v.p, meta.Repo{Owner: owner}); err != nil {
			return classify("authorize", err)
		}
	}
	h.show(w, r, v, http.StatusOK, "owner", page{Title: owner, Data: struct {
		Owner    string
		Repos    []meta.Repo
		CanWrite bool
		Next     string
	}{owner, repos, canWrite, nextURL}})
	return nil
}

// ownerRepos is one owner's repositories on the home page: the first
// page of them, and where the owner page continues when there are more
// (More, "" when none).
type ownerRepos struct {
	Owner string
	Org   bool
	Repos []client.Repo
	More  string
}

// home is the front page: for a visitor, what ghost is and where to look;
// signed in, the visitor's repositories and those of their orgs.
func (h *Handler) home(w http.ResponseWriter, r *http.Request, v *visitor) error {
	if v.p == nil {
		h.show(w, r, v, http.StatusOK, "home", page{Title: "ghost"})
		return nil
	}
	ctx := r.Context()
	c := h.api(v)
	owners := []ownerRepos{{Owner: v.p.Tenant}}
	orgs, err := c.UserOrgs(ctx)
	if err != nil {
		return apiError(err)
	}
	for _, o := range orgs {
		owners = append(owners, ownerRepos{Owner: o.Name, Org: true})
	}
	// A page of each owner's, as long as the owner page's, which goes on
	// from where this one stops (docs/adr/0090-bounded-serving.md).
	for i := range owners {
		o := &owners[i]
		var next string
		if o.Repos, next, err = c.ListReposPage(ctx, o.Owner, "", ownerPageSize); err != nil {
			return apiError(err)
		}
		if next != "" {
			o.More = "/" + urlSegment(o.Owner) + "?after=" + url.QueryEscape(next)
		}
	}
	h.show(w, r, v, http.StatusOK, "dashboard", page{Title: "ghost", Data: owners})
	return nil
}

// explore lists the public repositories of every owner, a page at a time.
func (h *Handler) explore(w http.ResponseWriter, r *http.Request, v *visitor) error {
	p, err := h.api(v).PublicRepos(r.Context(), r.URL.Query().Get("page"), 0)
	if err != nil {
		return apiError(err)
	}
	h.show(w, r, v, http.StatusOK, "explore", page{Title: "Explore", Data: p})
	return nil
}

// newRepoPage is the form of a new repository, and its outcome.
type newRepoPage struct {
	Owners []string
	Owner  string
	Name   string
	Public bool
}

func (h *Handler) newRepoForm(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owners, err := h.owners(r.Context(), v)
	if err != nil {
		return err
	}
	h.show(w, r, v, http.StatusOK, "new", page{Title: "New repository", Data: newRepoPage{Owners: owners, Owner: r.URL.Query().Get("owner")}})
	return nil
}

// owners are where v may create repositories: itself and its orgs.
func (h *Handler) owners(ctx context.Context, v *visitor) ([]string, error) {
	orgs, err := h.api(v).UserOrgs(ctx)
	if err != nil {
		return nil, apiError(err)
	}
	out := []string{v.p.Tenant}
	for _, o := range orgs {
		out = append(out, o.Name)
	}
	return out, nil
}

func (h *Handler) newRepo(w http.ResponseWriter, r *http.Request, v *visitor) error {
	d := newRepoPage{Owner: r.PostFormValue("owner"), Name: strings.TrimSpace(r.PostFormValue("name")), Public: r.PostFormValue("visibility") == "public"}
	repo, err := h.api(v).CreateRepo(r.Context(), d.Owner, d.Name, d.Public)
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status > 0 && ce.Status < 500 {
			// The form again, with what was typed and why it failed.
			d.Owners, _ = h.owners(r.Context(), v)
			h.show(w, r, v, ce.Status, "new", page{Title: "New repository", Notice: ce.Message, Data: d})
			return nil
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: repository created", "repo", repo.FullName, "by", v.p.Tenant, "token_id", v.p.TokenID)
	http.Redirect(w, r, "/"+urlSegment(repo.Owner)+"/"+urlSegment(repo.Name), http.StatusSeeOther)
	return nil
}
