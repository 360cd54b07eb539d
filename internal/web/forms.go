package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/client"
)

// The pages that change things (docs/adr/0103-web-ui-forms.md): creating
// a repository, its settings and deletion, the visitor's tokens and SSH
// keys, a full-history scan; and the pages that find things: the signed-
// in home, the explore page of public repositories and a tenant's alerts
// across its repositories. Each is an HTML form that works without
// JavaScript, checked against the session's CSRF token, and each change
// is one call of the REST API, served in process (Options.API) with the
// visitor's own token: the same authorization, validation and messages
// as for git and the CLI, and no second copy of those rules here.

// api returns a client of the API acting as v (anonymous when v is).
func (h *Handler) api(v *visitor) *client.Client {
	c, err := client.New("http://ghost.invalid", v.token, client.WithHandler(h.opts.API), client.WithUserAgent("ghost-web"))
	if err != nil {
		panic(err) // a constant URL
	}
	return c
}

// apiError turns an API failure into a page: the API's message, which is
// written for people, with its status.
func apiError(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return classify("api", err)
	}
	status := ce.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	msg := ce.Message
	if status >= 500 {
		msg = "The service is unavailable; try again shortly."
	}
	if status == http.StatusNotFound {
		msg = "Not found."
	}
	return &httpError{status: status, msg: msg, err: err}
}

// form wraps a page that takes a POST form: the body is bounded at
// limit bytes and the CSRF token checked before the page runs; with
// signedIn, an anonymous visitor is sent to sign in instead.
func (h *Handler) form(limit int64, signedIn bool, p pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) error {
		limitBody(w, r, limit)
		if !h.keys.checkCSRF(r) {
			return errCSRF
		}
		if signedIn && v.p == nil {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.Path), http.StatusSeeOther)
			return nil
		}
		return p(w, r, v)
	}
}

// signedIn wraps a GET page for signed-in visitors only: anyone else is
// sent to sign in first, and back after.
func signedIn(p pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) error {
		if v.p == nil {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil
		}
		return p(w, r, v)
	}
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

// settingsPage is a repository's settings.
type settingsPage struct {
	Repo client.Repo
	// Head is the branch HEAD names now, shown while no default branch
	// is set; Branches the first page of branches, offered for the
	// default branch (docs/adr/0110-default-branch.md).
	Head     string
	Branches []ref
}

func (h *Handler) repoSettings(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	repo, err := h.api(v).Repo(r.Context(), rv.Owner, rv.Name)
	if err != nil {
		return apiError(err)
	}
	g, err := h.open(r, rv)
	if err != nil {
		return err
	}
	data := settingsPage{Repo: repo, Head: g.head()}
	if data.Branches, _, err = g.refPage(r.Context(), "refs/heads", "", refsPage, false); err != nil {
		return err
	}
	h.show(w, r, v, http.StatusOK, "settings", page{Title: "Settings · " + rv.FullName(), Repo: rv, Tab: "settings", Notice: noticeOf(r), Data: data})
	return nil
}

// notices are the messages a redirect after a change shows (?done=...):
// fixed texts, never the URL's own words, so a link cannot make the page
// say anything.
var notices = map[string]string{
	"saved":   "Settings saved.",
	"scan":    "A scan of the whole history was started; its progress is below.",
	"revoked": "The token was revoked; it stops working at once.",
	"removed": "The key was removed; it stops working at once.",
	"added":   "The key was added.",
}

func noticeOf(r *http.Request) string { return notices[r.URL.Query().Get("done")] }

func (h *Handler) saveSettings(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	public := r.PostFormValue("visibility") == "public"
	protect := r.PostFormValue("push_protection") == "on"
	replace := r.PostFormValue("allow_replace_refs") == "on"
	settings := client.RepoSettings{Public: &public, PushProtection: &protect, AllowReplaceRefs: &replace}
	// The default branch is sent only when changed, so that saving the
	// other settings never fails on a branch deleted meanwhile.
	if b := strings.TrimSpace(r.PostFormValue("default_branch")); b != "" && b != r.PostFormValue("default_branch_was") {
		settings.DefaultBranch = &b
	}
	if _, err := h.api(v).UpdateRepo(r.Context(), owner, name, settings); err != nil {
		return apiError(err)
	}
	http.Redirect(w, r, "/"+urlSegment(owner)+"/"+urlSegment(name)+"/-/settings?done=saved", http.StatusSeeOther)
	return nil
}

func (h *Handler) deleteRepo(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	c := h.api(v)
	repo, err := c.Repo(r.Context(), owner, name)
	if err != nil {
		return apiError(err)
	}
	// The typed confirmation, as GitHub asks: the full name, exactly.
	if strings.TrimSpace(r.PostFormValue("confirm")) != repo.FullName {
		return &httpError{status: http.StatusBadRequest, msg: "Type the repository's full name, " + repo.FullName + ", to delete it. Nothing was deleted."}
	}
	if err := c.DeleteRepo(r.Context(), owner, name); err != nil {
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: repository deleted", "repo", repo.FullName, "by", v.p.Tenant, "token_id", v.p.TokenID)
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

func (h *Handler) startScan(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	if _, _, err := h.api(v).StartScan(r.Context(), owner, name); err != nil {
		return apiError(err)
	}
	http.Redirect(w, r, "/"+urlSegment(owner)+"/"+urlSegment(name)+"/-/scans?done=scan", http.StatusSeeOther)
	return nil
}

// tokensPage is the visitor's tokens, and a token just made, shown once.
type tokensPage struct {
	Tokens  []client.Token
	Created *client.Token
	Current string // the id of the token this session uses
}

func (h *Handler) tokens(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showTokens(w, r, v, http.StatusOK, nil, noticeOf(r))
}

func (h *Handler) showTokens(w http.ResponseWriter, r *http.Request, v *visitor, status int, created *client.Token, notice string) error {
	toks, err := h.api(v).ListTokens(r.Context(), v.p.Tenant)
	if err != nil {
		return apiError(err)
	}
	h.show(w, r, v, status, "tokens", page{Title: "Access tokens", Notice: notice, Data: tokensPage{Tokens: toks, Created: created, Current: v.p.TokenID}})
	return nil
}

func (h *Handler) createToken(w http.ResponseWriter, r *http.Request, v *visitor) error {
	scope := r.PostFormValue("scope")
	if !slices.Contains([]string{"read", "write"}, scope) {
		return &httpError{status: http.StatusBadRequest, msg: "A token's scope is read or write here; admin tokens come from the command line."}
	}
	tok, err := h.api(v).CreateToken(r.Context(), v.p.Tenant, scope, strings.TrimSpace(r.PostFormValue("description")))
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status > 0 && ce.Status < 500 {
			return h.showTokens(w, r, v, ce.Status, nil, ce.Message)
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: token created", "tenant", tok.Tenant, "id", tok.ID, "scope", tok.Scope, "by_token", v.p.TokenID)
	// Shown on this answer only: not a redirect, and never cached.
	return h.showTokens(w, r, v, http.StatusCreated, &tok, "")
}

func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request, v *visitor) error {
	if err := h.api(v).RevokeToken(r.Context(), v.p.Tenant, r.PathValue("id")); err != nil {
		return apiError(err)
	}
	if r.PathValue("id") == v.p.TokenID {
		// The session's own token: the visitor is signed out with it.
		h.clearSession(w, r)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	http.Redirect(w, r, "/-/settings/tokens?done=revoked", http.StatusSeeOther)
	return nil
}

// keysPage is the visitor's SSH keys.
type keysPage struct {
	Keys  []client.SSHKey
	Title string
	Key   string
}

func (h *Handler) sshKeys(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showKeys(w, r, v, http.StatusOK, keysPage{}, noticeOf(r))
}

func (h *Handler) showKeys(w http.ResponseWriter, r *http.Request, v *visitor, status int, d keysPage, notice string) error {
	keys, err := h.api(v).ListSSHKeys(r.Context(), v.p.Tenant)
	if err != nil {
		return apiError(err)
	}
	d.Keys = keys
	h.show(w, r, v, status, "keys", page{Title: "SSH keys", Notice: notice, Data: d})
	return nil
}

func (h *Handler) addKey(w http.ResponseWriter, r *http.Request, v *visitor) error {
	d := keysPage{Title: strings.TrimSpace(r.PostFormValue("title")), Key: strings.TrimSpace(r.PostFormValue("key"))}
	if _, err := h.api(v).AddSSHKey(r.Context(), v.p.Tenant, d.Title, d.Key); err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status > 0 && ce.Status < 500 {
			return h.showKeys(w, r, v, ce.Status, d, ce.Message)
		}
		return apiError(err)
	}
	http.Redirect(w, r, "/-/settings/keys?done=added", http.StatusSeeOther)
	return nil
}

func (h *Handler) removeKey(w http.ResponseWriter, r *http.Request, v *visitor) error {
	if err := h.api(v).RemoveSSHKey(r.Context(), v.p.Tenant, r.PathValue("id")); err != nil {
		return apiError(err)
	}
	http.Redirect(w, r, "/-/settings/keys?done=removed", http.StatusSeeOther)
	return nil
}

// tenantAlertsPage is a tenant's alerts across its repositories.
type tenantAlertsPage struct {
	Owner  string
	State  string
	Rule   string
	Repo   string
	States []string
	Repos  []client.Repo
	Alerts []client.Alert
	Next   string
}

// tenantAlerts lists the alerts of every repository of an owner the
// visitor may write, with filters: state, rule, repository.
func (h *Handler) tenantAlerts(w http.ResponseWriter, r *http.Request, v *visitor) error {
	if v.p == nil || h.opts.Alerts == nil {
		return errNotFound
	}
	q := r.URL.Query()
	d := tenantAlertsPage{Owner: r.PathValue("owner"), State: q.Get("state"), Rule: strings.TrimSpace(q.Get("rule")), Repo: q.Get("repo"), States: alertStates()}
	if !slices.Contains(d.States, d.State) {
		d.State = "open"
	}
	c := h.api(v)
	p, err := c.ListTenantAlerts(r.Context(), d.Owner, client.AlertFilter{State: d.State, Rule: d.Rule, Repo: d.Repo, Page: q.Get("page")})
	if err != nil {
		return apiError(err)
	}
	d.Alerts, d.Next = p.Alerts, p.NextPage
	if d.Repos, err = c.ListRepos(r.Context(), d.Owner); err != nil {
		return apiError(err)
	}
	h.show(w, r, v, http.StatusOK, "tenantalerts", page{Title: "Secret alerts · " + d.Owner, Data: d})
	return nil
}
