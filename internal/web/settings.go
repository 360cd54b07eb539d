package web

import (
	"net/http"
	"strings"

	"github.com/ghost-scm/ghost/internal/client"
)

// A repository's settings: visibility, protections, the default branch,
// a full-history scan and deletion.

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
