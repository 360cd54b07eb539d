package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/meta"
)

func requireAuth(p *meta.Principal) error {
	if p == nil {
		return errNoCredentials
	}
	return nil
}

func requireAdmin(p *meta.Principal) error {
	if err := requireAuth(p); err != nil {
		return err
	}
	if !p.IsAdmin() {
		return fmt.Errorf("%w: needs an admin-scope token", meta.ErrForbidden)
	}
	return nil
}

// repoNotFound is the one answer for absent and unreadable repositories.
func repoNotFound(owner, name string) error {
	return fmt.Errorf("repository %s/%s: %w", owner, name, meta.ErrNotFound)
}

// userJSON is who the request's credentials are (GET /api/user).
type userJSON struct {
	Tenant  string     `json:"tenant"`
	Kind    string     `json:"kind,omitempty"`
	Scope   meta.Scope `json:"scope"`
	TokenID string     `json:"token_id,omitempty"`
}

// user answers who the credentials are, so that a client ("ghost login")
// can check a token and say whose it is.
func (h *handler) user(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	out := userJSON{Tenant: p.Tenant, Scope: p.Scope, TokenID: p.TokenID}
	if h.operator == nil {
		t, err := h.store.Tenant(r.Context(), p.Tenant)
		if err != nil {
			return 0, nil, err
		}
		out.Kind = t.Kind
	}
	return http.StatusOK, out, nil
}

func (h *handler) createTenant(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAdmin(p); err != nil {
		return 0, nil, err
	}
	var req struct {
		Name string `json:"name"`
		Kind string `json:"kind"` // default "user"
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	if req.Kind == "" {
		req.Kind = meta.KindUser
	}
	t, err := h.store.CreateTenant(r.Context(), req.Name, req.Kind)
	if err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "tenant created", "tenant", t.Name, "kind", t.Kind, "by", p.Tenant, "token_id", p.TokenID)
	h.forgetHooks(r.Context(), hooks.Scope{Tenant: t.Name}) // a deleted namesake's, if any were left
	return http.StatusCreated, toTenant(t), nil
}

// listTenants answers a page of the tenants (?per_page=, at most
// meta.MaxPageSize, default meta.DefaultPageSize; ?after=<name>), with a
// Link header naming the next page when there is one.
func (h *handler) listTenants(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAdmin(p); err != nil {
		return 0, nil, err
	}
	after, limit, err := pageQuery(r)
	if err != nil {
		return 0, nil, err
	}
	ts, next, err := h.store.ListTenantPage(r.Context(), after, limit)
	if err != nil {
		return 0, nil, err
	}
	linkNext(w, r, next)
	out := make([]tenantJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTenant(t))
	}
	return http.StatusOK, out, nil
}

// pageQuery reads a list's paging parameters: ?after=<name> (the last
// name of the previous page, any case) and ?per_page=.
func pageQuery(r *http.Request) (string, int, error) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > meta.MaxPageSize {
			return "", 0, fmt.Errorf("%w: per_page=%q: want a whole number from 1 to %d", meta.ErrInvalidArgument, v, meta.MaxPageSize)
		}
		limit = n
	}
	return strings.ToLower(q.Get("after")), limit, nil
}

// linkNext sets the Link header to the next page, as GitHub's API does,
// when there is one: the same request with ?after= the cursor.
func linkNext(w http.ResponseWriter, r *http.Request, next string) {
	if next == "" {
		return
	}
	q := r.URL.Query()
	q.Set("after", next)
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	w.Header().Set("Link", "<"+u.String()+`>; rel="next"`)
}

func (h *handler) addMember(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAdmin(p); err != nil {
		return 0, nil, err
	}
	var req struct {
		User string `json:"user"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	org := r.PathValue("tenant")
	if err := h.store.AddMember(r.Context(), org, req.User); err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "member added", "org", org, "user", req.User, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusNoContent, nil, nil
}

// removeMember takes a user's membership of an org away.
func (h *handler) removeMember(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAdmin(p); err != nil {
		return 0, nil, err
	}
	org, user := r.PathValue("tenant"), r.PathValue("user")
	if err := h.store.RemoveMember(r.Context(), org, user); err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "member removed", "org", org, "user", user, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusNoContent, nil, nil
}

// deleteTenant deletes a tenant; "?force=true" also deletes the
// repositories it owns, which are otherwise a 409.
func (h *handler) deleteTenant(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAdmin(p); err != nil {
		return 0, nil, err
	}
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		var err error
		if force, err = strconv.ParseBool(v); err != nil {
			return 0, nil, fmt.Errorf("%w: force=%q: want true or false", meta.ErrInvalidArgument, v)
		}
	}
	tenant := r.PathValue("tenant")
	if err := h.store.DeleteTenant(r.Context(), tenant, force); err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "tenant deleted", "tenant", tenant, "force", force, "by", p.Tenant, "token_id", p.TokenID)
	h.forgetHooks(r.Context(), hooks.Scope{Tenant: tenant})
	return http.StatusNoContent, nil, nil
}

// createToken mints a token. An admin mints any tenant's tokens of any
// scope. A tenant mints its own with a write token, of read or write
// scope, never above the token it uses (self-service, as the web UI's
// token page needs: docs/adr/0026-self-service-credentials.md). A read
// token mints nothing: it could otherwise outlive its own revocation.
func (h *handler) createToken(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	var req struct {
		Scope       string `json:"scope"` // default "read"
		Description string `json:"description"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	scope := meta.ScopeRead
	if req.Scope != "" {
		var err error
		if scope, err = meta.ParseScope(req.Scope); err != nil {
			return 0, nil, err
		}
	}
	tenant := r.PathValue("tenant")
	if err := canMint(p, tenant, scope); err != nil {
		return 0, nil, err
	}
	plain, tok, err := h.store.CreateToken(r.Context(), tenant, scope, req.Description)
	if err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "token created", "tenant", tok.Tenant, "id", tok.ID, "scope", tok.Scope.String(), "by", p.Tenant, "token_id", p.TokenID)
	out := toToken(tok)
	out.Token = plain
	return http.StatusCreated, out, nil
}

// canMint decides whether p may create a credential of scope for tenant
// (a token, or an SSH key, which acts as a write token).
func canMint(p *meta.Principal, tenant string, scope meta.Scope) error {
	switch {
	case p.IsAdmin():
		return nil
	case !sameTenant(p, tenant):
		return fmt.Errorf("%w: only the tenant itself or an admin may create its credentials", meta.ErrForbidden)
	case p.Scope < meta.ScopeWrite:
		return fmt.Errorf("%w: creating credentials needs a write token; this one is read-only", meta.ErrForbidden)
	case scope > p.Scope:
		return fmt.Errorf("%w: a %s token cannot create credentials of %s scope", meta.ErrForbidden, p.Scope, scope)
	}
	return nil
}

func (h *handler) listTokens(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	tenant := r.PathValue("tenant")
	if !p.IsAdmin() && !sameTenant(p, tenant) {
		return 0, nil, fmt.Errorf("%w: only the tenant itself or an admin may list its tokens", meta.ErrForbidden)
	}
	toks, err := h.store.ListTokens(r.Context(), tenant)
	if err != nil {
		return 0, nil, err
	}
	out := make([]tokenJSON, 0, len(toks))
	for _, t := range toks {
		out = append(out, toToken(t))
	}
	return http.StatusOK, out, nil
}

// revokeToken lets an admin revoke any token, a tenant's write token any
// of the tenant's tokens (self-service), and any token revoke itself (the
// first thing to do with a leaked one, whatever its scope).
func (h *handler) revokeToken(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	tenant, id := r.PathValue("tenant"), r.PathValue("id")
	self := sameTenant(p, tenant) && (strings.EqualFold(p.TokenID, id) || p.Scope >= meta.ScopeWrite)
	if !p.IsAdmin() && !self {
		return 0, nil, fmt.Errorf("%w: only an admin, or a write token of the tenant, may revoke other tokens", meta.ErrForbidden)
	}
	if err := h.store.RevokeToken(r.Context(), tenant, id); err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "token revoked", "tenant", tenant, "id", id, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusNoContent, nil, nil
}

func sameTenant(p *meta.Principal, tenant string) bool {
	return p != nil && p.Tenant != "" && strings.EqualFold(p.Tenant, tenant)
}

// listRepos answers a page of owner's repositories that the caller may
// read (?per_page=, ?after=<name>), with a Link header naming the next.
// A caller who may not read the owner's private repositories pages
// through the public ones only.
func (h *handler) listRepos(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	owner := r.PathValue("owner")
	after, limit, err := pageQuery(r)
	if err != nil {
		return 0, nil, err
	}
	// Whether p sees owner's private repositories is one decision per
	// owner, not per repository. (A missing owner is ListRepoPage's 404.)
	private, err := h.store.CanRead(r.Context(), p, meta.Repo{Owner: owner})
	if err != nil {
		return 0, nil, err
	}
	repos, next, err := h.store.ListRepoPage(r.Context(), owner, after, limit, !private)
	if err != nil {
		return 0, nil, err
	}
	linkNext(w, r, next)
	out := make([]repoJSON, 0, len(repos))
	for _, repo := range repos {
		out = append(out, toRepo(repo))
	}
	return http.StatusOK, out, nil
}

func (h *handler) createRepo(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	var req struct {
		Name   string `json:"name"`
		Public bool   `json:"public"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	owner := r.PathValue("owner")
	if _, err := h.store.Tenant(r.Context(), owner); err != nil {
		return 0, nil, err
	}
	if ok, err := h.store.CanWriteOwner(r.Context(), p, owner); err != nil {
		return 0, nil, err
	} else if !ok {
		return 0, nil, fmt.Errorf("%w: creating repositories under %s needs a write token of %s or of a member", meta.ErrForbidden, owner, owner)
	}
	repo, err := h.store.CreateRepo(r.Context(), owner, req.Name, req.Public)
	if err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "repository created", "repo", repo.FullName(), "id", repo.ID, "public", repo.Public, "by", p.Tenant, "token_id", p.TokenID)
	h.repoEvent(r.Context(), repo, "created", p)
	return http.StatusCreated, toRepo(repo), nil
}

// readable resolves the path's repository for p: 404 if it is absent or p
// may not read it.
func (h *handler) readable(r *http.Request, p *meta.Principal) (meta.Repo, error) {
	owner, name := r.PathValue("owner"), r.PathValue("name")
	repo, err := h.store.Repo(r.Context(), owner, name)
	if err != nil {
		return meta.Repo{}, err
	}
	if ok, err := h.store.CanRead(r.Context(), p, repo); err != nil {
		return meta.Repo{}, err
	} else if !ok {
		return meta.Repo{}, repoNotFound(owner, name)
	}
	return repo, nil
}

// writable is readable plus write permission: 403 for a caller who may
// see the repository but not change it.
func (h *handler) writable(r *http.Request, p *meta.Principal) (meta.Repo, error) {
	if err := requireAuth(p); err != nil {
		return meta.Repo{}, err
	}
	repo, err := h.readable(r, p)
	if err != nil {
		return meta.Repo{}, err
	}
	if ok, err := h.store.CanWrite(r.Context(), p, repo); err != nil {
		return meta.Repo{}, err
	} else if !ok {
		return meta.Repo{}, fmt.Errorf("%w: %s needs a write token of its owner or an owning-org member", meta.ErrForbidden, repo.FullName())
	}
	return repo, nil
}

func (h *handler) getRepo(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	repo, err := h.readable(r, p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, withSettings(repo), nil
}

func (h *handler) deleteRepo(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	repo, err := h.writable(r, p)
	if err != nil {
		return 0, nil, err
	}
	if err := h.store.DeleteRepo(r.Context(), repo.Owner, repo.Name); err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "repository deleted", "repo", repo.FullName(), "id", repo.ID, "by", p.Tenant, "token_id", p.TokenID)
	h.repoEvent(r.Context(), repo, "deleted", p)
	h.forgetHooks(r.Context(), hooks.Scope{Tenant: repo.Owner, Repo: repo.ID, Name: repo.Name})
	return http.StatusNoContent, nil, nil
}

// patchRepo changes a repository's settings: "public" (visibility),
// "push_protection" and "allow_replace_refs"
// (docs/adr/0031-push-protection.md), and "default_branch", an existing
// branch (docs/adr/0110-default-branch.md). Each is applied by its own
// compare-and-swap; a failure after the first leaves the first applied,
// and sending the same request again is the remedy, since all are
// idempotent.
func (h *handler) patchRepo(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	repo, err := h.writable(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Public           *bool   `json:"public"`
		PushProtection   *bool   `json:"push_protection"`
		AllowReplaceRefs *bool   `json:"allow_replace_refs"`
		AllowMissingLFS  *bool   `json:"allow_missing_lfs"`
		LFSScanAfterPush *bool   `json:"lfs_scan_after_push"`
		DefaultBranch    *string `json:"default_branch"`
		AllowMergeCommit *bool   `json:"allow_merge_commit"`
		AllowSquashMerge *bool   `json:"allow_squash_merge"`
		AllowRebaseMerge *bool   `json:"allow_rebase_merge"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	merges := req.AllowMergeCommit != nil || req.AllowSquashMerge != nil || req.AllowRebaseMerge != nil
	if req.Public == nil && req.PushProtection == nil && req.AllowReplaceRefs == nil && req.AllowMissingLFS == nil && req.LFSScanAfterPush == nil && req.DefaultBranch == nil && !merges {
		return 0, nil, fmt.Errorf("%w: nothing to change: want any of {\"public\": true|false}, {\"push_protection\": true|false}, {\"allow_replace_refs\": true|false}, {\"allow_missing_lfs\": true|false}, {\"lfs_scan_after_push\": true|false}, {\"default_branch\": \"<branch>\"}, {\"allow_merge_commit\", \"allow_squash_merge\", \"allow_rebase_merge\": true|false}", meta.ErrInvalidArgument)
	}
	// The default branch goes first: a request naming a branch that is
	// malformed or missing changes nothing.
	if req.DefaultBranch != nil {
		if err := h.store.SetDefaultBranch(r.Context(), repo.Owner, repo.Name, *req.DefaultBranch); err != nil {
			return 0, nil, err
		}
		h.log.InfoContext(r.Context(), "repository default branch changed", "repo", repo.FullName(), "default_branch", *req.DefaultBranch, "by", p.Tenant, "token_id", p.TokenID)
	}
	if req.Public != nil {
		if err := h.store.SetVisibility(r.Context(), repo.Owner, repo.Name, *req.Public); err != nil {
			return 0, nil, err
		}
		h.log.InfoContext(r.Context(), "repository visibility changed", "repo", repo.FullName(), "public", *req.Public, "by", p.Tenant, "token_id", p.TokenID)
		if *req.Public != repo.Public {
			now := repo
			now.Public = *req.Public
			action := "privatized"
			if now.Public {
				action = "publicized"
			}
			h.repoEvent(r.Context(), now, action, p)
		}
	}
	if req.PushProtection != nil {
		if err := h.store.SetPushProtection(r.Context(), repo.Owner, repo.Name, *req.PushProtection); err != nil {
			return 0, nil, err
		}
		h.log.InfoContext(r.Context(), "repository push protection changed", "repo", repo.FullName(), "push_protection", *req.PushProtection, "by", p.Tenant, "token_id", p.TokenID)
	}
	if req.AllowReplaceRefs != nil {
		if err := h.store.SetAllowReplaceRefs(r.Context(), repo.Owner, repo.Name, *req.AllowReplaceRefs); err != nil {
			return 0, nil, err
		}
		h.log.InfoContext(r.Context(), "repository replace refs setting changed", "repo", repo.FullName(), "allow_replace_refs", *req.AllowReplaceRefs, "by", p.Tenant, "token_id", p.TokenID)
	}
	if req.AllowMissingLFS != nil {
		if err := h.store.SetAllowMissingLFS(r.Context(), repo.Owner, repo.Name, *req.AllowMissingLFS); err != nil {
			return 0, nil, err
		}
		h.log.InfoContext(r.Context(), "repository missing LFS objects setting changed", "repo", repo.FullName(), "allow_missing_lfs", *req.AllowMissingLFS, "by", p.Tenant, "token_id", p.TokenID)
	}
	if req.LFSScanAfterPush != nil {
		if err := h.store.SetLFSScanAfterPush(r.Context(), repo.Owner, repo.Name, *req.LFSScanAfterPush); err != nil {
			return 0, nil, err
		}
		h.log.InfoContext(r.Context(), "repository LFS scan after push setting changed", "repo", repo.FullName(), "lfs_scan_after_push", *req.LFSScanAfterPush, "by", p.Tenant, "token_id", p.TokenID)
	}
	if merges {
		if err := h.store.SetMergeMethods(r.Context(), repo.Owner, repo.Name, meta.MergeMethods{Merge: req.AllowMergeCommit, Squash: req.AllowSquashMerge, Rebase: req.AllowRebaseMerge}); err != nil {
			return 0, nil, err
		}
		h.log.InfoContext(r.Context(), "repository merge methods changed", "repo", repo.FullName(), "by", p.Tenant, "token_id", p.TokenID)
	}
	repo, err = h.store.Repo(r.Context(), repo.Owner, repo.Name)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, withSettings(repo), nil
}

// forkRepo forks the path's repository to {owner, name}; owner defaults to
// the caller's tenant and name to the source's name.
func (h *handler) forkRepo(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	var req struct {
		Owner string `json:"owner"`
		Name  string `json:"name"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	src, err := h.readable(r, p)
	if err != nil {
		return 0, nil, err
	}
	if req.Owner == "" {
		req.Owner = p.Tenant
	}
	if req.Name == "" {
		req.Name = src.Name
	}
	if _, err := h.store.Tenant(r.Context(), req.Owner); err != nil {
		return 0, nil, err
	}
	if ok, err := h.store.CanWriteOwner(r.Context(), p, req.Owner); err != nil {
		return 0, nil, err
	} else if !ok {
		return 0, nil, fmt.Errorf("%w: forking into %s needs a write token of %s or of a member", meta.ErrForbidden, req.Owner, req.Owner)
	}
	repo, err := h.store.ForkRepo(r.Context(), src.Owner, src.Name, req.Owner, req.Name)
	if err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "repository forked", "from", src.FullName(), "repo", repo.FullName(), "id", repo.ID, "by", p.Tenant, "token_id", p.TokenID)
	h.repoEvent(r.Context(), repo, "created", p)
	return http.StatusCreated, toRepo(repo), nil
}
