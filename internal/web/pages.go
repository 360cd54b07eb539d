package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/scanner"
)

func urlSegment(s string) string { return url.PathEscape(s) }

// safeNext returns where to go after signing in: a local path only.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return ""
	}
	// Browsers drop tabs and newlines from URLs: "/\t/evil.example" is
	// "//evil.example" to them.
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return ""
		}
	}
	return next
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request, v *visitor) error {
	h.show(w, r, v, http.StatusOK, "login", page{Title: "Sign in", Data: safeNext(r.URL.Query().Get("next"))})
	return nil
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request, v *visitor) error {
	next := safeNext(r.PostFormValue("next"))
	token := strings.TrimSpace(r.PostFormValue("token"))
	p, err := h.opts.Auth.Authenticate(r.Context(), token)
	if errors.Is(err, meta.ErrUnauthenticated) {
		h.show(w, r, v, http.StatusUnauthorized, "login", page{Title: "Sign in", Notice: "That token is not valid.", Data: next})
		return nil
	}
	if err != nil {
		return classify("authenticate", err)
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: h.keys.seal(token, h.opts.Now().Add(sessionLifetime)), Path: "/",
		MaxAge: int(sessionLifetime.Seconds()), HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode,
	})
	h.opts.Logger.InfoContext(r.Context(), "web: signed in", "tenant", p.Tenant, "token_id", p.TokenID)
	if next == "" {
		next = "/" // the dashboard: the visitor's repositories and their orgs'
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, v *visitor) error {
	h.clearSession(w, r)
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

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

type cloneURLs struct{ HTTP, SSH string }

func (h *Handler) cloneURLs(r *http.Request, repo meta.Repo) cloneURLs {
	scheme := "http"
	if secure(r) {
		scheme = "https"
	}
	p := "/" + urlSegment(repo.Owner) + "/" + urlSegment(repo.Name) + ".git"
	c := cloneURLs{HTTP: scheme + "://" + r.Host + p}
	if h.opts.SSHURL != "" {
		c.SSH = h.opts.SSHURL + p
	}
	return c
}

func (h *Handler) repoHome(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.readable(r, v)
	if err != nil {
		return err
	}
	g, err := h.open(r, rv)
	if err != nil {
		return err
	}
	ctx := r.Context()
	data := struct {
		Clone                  cloneURLs
		Default                string
		Head                   *ref
		Branches, Tags         []ref
		MoreBranches, MoreTags bool
		Entries                []entry
		MoreEntries            bool
		MaxEntries             int
		ReadmeName             string
		Readme                 any
	}{Clone: h.cloneURLs(r, rv.Repo), Default: g.head(), MaxEntries: h.opts.MaxTreeEntries}
	// A page of each, never the whole list: the first branches by name,
	// the newest tags (docs/adr/0090-bounded-serving.md).
	if data.Branches, data.MoreBranches, err = g.refPage(ctx, "refs/heads", "", refsPage, false); err != nil {
		return err
	}
	if data.Tags, data.MoreTags, err = g.refPage(ctx, "refs/tags", "", refsPage, true); err != nil {
		return err
	}
	// The repository's default branch when it has one and the branch
	// exists, else what HEAD names (docs/adr/0110-default-branch.md).
	candidates := []string{data.Default}
	if set := rv.DefaultBranch; set != "" && set != data.Default {
		candidates = []string{set, data.Default}
	}
	candidates = slices.DeleteFunc(candidates, func(b string) bool { return b == "" || !refNameOK(b) })
	if len(candidates) > 0 {
		specs := make([]string, len(candidates))
		for i, b := range candidates {
			specs[i] = "refs/heads/" + b + "^{commit}"
		}
		ids, err := g.batchCheck(ctx, specs)
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(ids, func(id string) bool { return id != "" }); i >= 0 {
			data.Default = candidates[i]
			cs, err := g.log(ctx, ids[i], "", 0, 1)
			if err != nil {
				return err
			}
			data.Head = &ref{Name: data.Default, Full: "refs/heads/" + data.Default, Commit: ids[i]}
			if len(cs) == 1 {
				data.Head.When, data.Head.Subject = cs[0].When, cs[0].Subject
			}
			data.Branches = defaultFirst(data.Branches, *data.Head)
		}
	}
	if data.Head != nil {
		rv.Ref = data.Head.Name
		rv.Switch = &switcher{Current: data.Head.Name, Kind: "tree", Branches: data.Branches, Tags: data.Tags, MoreBranches: data.MoreBranches, MoreTags: data.MoreTags}
		entries, more, err := g.lsTree(ctx, data.Head.Commit, h.opts.MaxTreeEntries)
		if err != nil {
			return err
		}
		data.Entries, data.MoreEntries = sortEntries(entries), more
		if readme := findReadme(entries); readme != nil && readme.Size <= h.opts.MaxBlobBytes {
			data.ReadmeName = readme.Name
			cf, err := g.catFile(ctx)
			if err != nil {
				return err
			}
			_, b, err := cf.contents(readme.ID, h.opts.MaxBlobBytes)
			cf.Close()
			if err != nil {
				return err
			}
			switch {
			case isBinary(b):
			case isMarkdown(readme.Name):
				at := "/" + pathURL(data.Head.Name) + "/"
				data.Readme = h.render.markdown(ctx, readme.ID, b, repoURL(rv.Repo)+"/-/blob"+at, repoURL(rv.Repo)+"/-/raw"+at)
			default:
				data.Readme = string(b)
			}
		}
	}
	h.show(w, r, v, http.StatusOK, "repo", page{Title: rv.FullName(), Repo: rv, Tab: "code", Data: data})
	return nil
}

// refs lists a page of the repository's branches or tags in name order,
// after the name in ?after=.
func (h *Handler) refs(w http.ResponseWriter, r *http.Request, v *visitor, tags bool) error {
	rv, err := h.readable(r, v)
	if err != nil {
		return err
	}
	g, err := h.open(r, rv)
	if err != nil {
		return err
	}
	prefix, title := "refs/heads", "Branches"
	if tags {
		prefix, title = "refs/tags", "Tags"
	}
	after := r.URL.Query().Get("after")
	if after != "" && !refNameOK(after) {
		after = ""
	}
	refs, more, err := g.refPage(r.Context(), prefix, after, refsPage, false)
	if err != nil {
		return err
	}
	next := ""
	if more && len(refs) > 0 {
		next = refs[len(refs)-1].Name
	}
	h.show(w, r, v, http.StatusOK, "refs", page{Title: title + " · " + rv.FullName(), Repo: rv, Tab: "code", Data: struct {
		Title string
		Refs  []ref
		After string
		Next  string
	}{title, refs, after, next}})
	return nil
}

func (h *Handler) branches(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.refs(w, r, v, false)
}

func (h *Handler) tags(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.refs(w, r, v, true)
}

func isMarkdown(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown", ".mdown":
		return true
	}
	return false
}

// findReadme picks README.md, README, README.txt, ... in that order.
func findReadme(es []entry) *entry {
	var best *entry
	rank := func(n string) int {
		switch strings.ToLower(n) {
		case "readme.md":
			return 1
		case "readme.markdown":
			return 2
		case "readme":
			return 3
		case "readme.txt":
			return 4
		}
		if strings.HasPrefix(strings.ToLower(n), "readme.") {
			return 5
		}
		return 0
	}
	for i := range es {
		if es[i].Type != "blob" {
			continue
		}
		if k := rank(es[i].Name); k > 0 && (best == nil || k < rank(best.Name)) {
			best = &es[i]
		}
	}
	return best
}

// sortEntries puts directories first, as people expect.
func sortEntries(es []entry) []entry {
	slices.SortStableFunc(es, func(a, b entry) int {
		at, bt := a.Type == "tree", b.Type == "tree"
		switch {
		case at && !bt:
			return -1
		case bt && !at:
			return 1
		}
		return 0
	})
	return es
}

// crumb is one step of a path.
type crumb struct{ Name, Path string }

func crumbs(p string) []crumb {
	if p == "" {
		return nil
	}
	var cs []crumb
	segs := strings.Split(p, "/")
	for i, s := range segs {
		cs = append(cs, crumb{Name: s, Path: strings.Join(segs[:i+1], "/")})
	}
	return cs
}

// at is a resolved "{ref}/{path}".
type at struct {
	Ref    string
	Commit string
	Path   string
	Crumbs []crumb
}

// locate opens a readable repository and resolves the rest of the path
// to a ref (or a commit id that a ref reaches) and a path in it. A path
// with an empty, "." or ".." segment names nothing (git would read
// "./x" and "../x" relative to a working tree a bare repository does not
// have): 404.
func (h *Handler) locate(r *http.Request, v *visitor) (*repoView, gitRepo, at, error) {
	rv, err := h.readable(r, v)
	if err != nil {
		return nil, gitRepo{}, at{}, err
	}
	g, err := h.open(r, rv)
	if err != nil {
		return nil, gitRepo{}, at{}, err
	}
	name, commit, p, err := g.locate(r.Context(), strings.Trim(r.PathValue("rest"), "/"))
	if err != nil {
		return nil, gitRepo{}, at{}, err
	}
	p = strings.Trim(p, "/")
	if !cleanPath(p) {
		return nil, gitRepo{}, at{}, errNotFound
	}
	rv.Ref = name
	return rv, g, at{Ref: name, Commit: commit, Path: p, Crumbs: crumbs(p)}, nil
}

// switchRefs fills the page's branch and tag switcher: two for-each-ref,
// a page of each.
func (h *Handler) switchRefs(ctx context.Context, g gitRepo, rv *repoView, kind string, loc at) error {
	sw := &switcher{Current: loc.Ref, Kind: kind, Path: loc.Path}
	var err error
	if sw.Branches, sw.MoreBranches, err = g.refPage(ctx, "refs/heads", "", refsPage, false); err != nil {
		return err
	}
	if sw.Tags, sw.MoreTags, err = g.refPage(ctx, "refs/tags", "", refsPage, true); err != nil {
		return err
	}
	for _, t := range sw.Tags {
		if t.Name == loc.Ref {
			sw.Tag = true
		}
	}
	rv.Switch = sw
	return nil
}

// cleanPath reports whether p ("" for the root) is a path in a tree as
// git stores it: no empty, "." or ".." segment.
func cleanPath(p string) bool {
	if p == "" {
		return true
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func repoURL(repo meta.Repo) string {
	return "/" + urlSegment(repo.Owner) + "/" + urlSegment(repo.Name)
}

func (h *Handler) tree(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, g, loc, err := h.locate(r, v)
	if err != nil {
		return err
	}
	entries, more, err := g.lsTree(r.Context(), loc.Commit+":"+loc.Path, h.opts.MaxTreeEntries)
	if err == nil {
		err = h.switchRefs(r.Context(), g, rv, "tree", loc)
	}
	if err != nil {
		// A file's path under /tree/ goes to its page.
		if cf, cerr := g.catFile(r.Context()); cerr == nil {
			o, ierr := cf.info(loc.Commit + ":" + loc.Path)
			cf.Close()
			if ierr == nil && o.Type == "blob" {
				http.Redirect(w, r, repoURL(rv.Repo)+"/-/blob/"+pathURL(loc.Ref)+"/"+pathURL(loc.Path), http.StatusSeeOther)
				return nil
			}
		}
		return err
	}
	h.show(w, r, v, http.StatusOK, "tree", page{Title: joinPath(rv.FullName(), loc.Path), Repo: rv, Tab: "code", Data: struct {
		At          at
		Entries     []entry
		MoreEntries bool
		MaxEntries  int
	}{loc, sortEntries(entries), more, h.opts.MaxTreeEntries}})
	return nil
}

func (h *Handler) blob(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, g, loc, err := h.locate(r, v)
	if err != nil {
		return err
	}
	if loc.Path == "" {
		http.Redirect(w, r, repoURL(rv.Repo)+"/-/tree/"+pathURL(loc.Ref), http.StatusSeeOther)
		return nil
	}
	cf, err := g.catFile(r.Context())
	if err != nil {
		return err
	}
	defer cf.Close()
	obj := loc.Commit + ":" + loc.Path
	o, err := cf.info(obj)
	if err != nil {
		return err
	}
	if o.Type == "tree" {
		http.Redirect(w, r, repoURL(rv.Repo)+"/-/tree/"+pathURL(loc.Ref)+"/"+pathURL(loc.Path), http.StatusSeeOther)
		return nil
	}
	if o.Type != "blob" {
		return errNotFound
	}
	if err := h.switchRefs(r.Context(), g, rv, "blob", loc); err != nil {
		return err
	}
	data := struct {
		At       at
		Size     int64
		TooLarge bool
		Binary   bool
		Code     any
	}{At: loc, Size: o.Size}
	if o.Size > h.opts.MaxBlobBytes {
		data.TooLarge = true
	} else {
		_, b, err := cf.contents(obj, h.opts.MaxBlobBytes)
		if err != nil {
			return err
		}
		switch {
		case isBinary(b):
			data.Binary = true
		case o.Size > h.opts.MaxHighlightBytes:
			data.Code = plain(b)
		default:
			data.Code = h.render.highlight(path.Base(loc.Path), b)
		}
	}
	h.show(w, r, v, http.StatusOK, "blob", page{Title: joinPath(rv.FullName(), loc.Path), Repo: rv, Tab: "code", Data: data})
	return nil
}

// raw serves a file's bytes. Text is text/plain, anything else a
// download; the sandbox CSP keeps a served file from running as a page
// of this origin.
func (h *Handler) raw(w http.ResponseWriter, r *http.Request, v *visitor) error {
	_, g, loc, err := h.locate(r, v)
	if err != nil {
		return err
	}
	cf, err := g.catFile(r.Context())
	if err != nil {
		return err
	}
	defer cf.Close()
	obj := loc.Commit + ":" + loc.Path
	o, err := cf.info(obj)
	if err == nil && o.Type != "blob" {
		err = errNotFound
	}
	if err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Cache-Control", "private, no-cache")
	hd.Set("Content-Length", strconv.FormatInt(o.Size, 10))
	name := path.Base(loc.Path)
	if o.Size <= h.opts.MaxBlobBytes {
		_, b, err := cf.contents(obj, h.opts.MaxBlobBytes)
		if err != nil {
			return err
		}
		if !isBinary(b) {
			hd.Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write(b)
			return nil
		}
		if ct, ok := imageTypes()[strings.ToLower(path.Ext(name))]; ok {
			hd.Set("Content-Type", ct) // shown inline, for READMEs' images
		} else {
			hd.Set("Content-Type", "application/octet-stream")
			hd.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
		}
		_, _ = w.Write(b)
		return nil
	}
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	if _, err := cf.stream(obj, w); err != nil {
		h.opts.Logger.WarnContext(r.Context(), "web: raw download cut", "path", r.URL.Path, "err", err)
	}
	return nil
}

// imageTypes are the raster images raw serves inline. Not SVG: it is a
// document that can hold script.
func imageTypes() map[string]string {
	return map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
}

// logPage is the number of commits on a log page.
const logPage = 50

func (h *Handler) commits(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, g, loc, err := h.locate(r, v)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 {
		n = 1
	}
	cs, err := g.log(r.Context(), loc.Commit, loc.Path, (n-1)*logPage, logPage+1)
	if err != nil {
		return err
	}
	more := len(cs) > logPage
	if more {
		cs = cs[:logPage]
	}
	if err := h.switchRefs(r.Context(), g, rv, "commits", loc); err != nil {
		return err
	}
	h.show(w, r, v, http.StatusOK, "commits", page{Title: "Commits · " + rv.FullName(), Repo: rv, Tab: "commits", Data: struct {
		At      at
		Commits []commit
		Page    int
		More    bool
	}{loc, cs, n, more}})
	return nil
}

// diffLine is one line of a patch with its class.
type diffLine struct{ Class, Text string }

func diffLines(patch string) []diffLine {
	lines := strings.Split(strings.TrimSuffix(patch, "\n"), "\n")
	out := make([]diffLine, 0, len(lines))
	for _, l := range lines {
		c := ""
		switch {
		case strings.HasPrefix(l, "diff --"):
			c = "file"
		case strings.HasPrefix(l, "@@"):
			c = "hunk"
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "index "),
			strings.HasPrefix(l, "new file"), strings.HasPrefix(l, "deleted file"), strings.HasPrefix(l, "similarity"),
			strings.HasPrefix(l, "rename "), strings.HasPrefix(l, "Binary files"):
			c = "meta"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		}
		out = append(out, diffLine{c, l})
	}
	return out
}

func (h *Handler) commit(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.readable(r, v)
	if err != nil {
		return err
	}
	g, err := h.open(r, rv)
	if err != nil {
		return err
	}
	id, err := g.commitID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	d, err := g.show(r.Context(), id, h.opts.MaxDiffBytes)
	if err != nil {
		return err
	}
	rv.Ref = d.Commit.ID
	var parents []string
	if d.Commit.Parents != "" {
		parents = strings.Fields(d.Commit.Parents)
	}
	h.show(w, r, v, http.StatusOK, "commit", page{Title: d.Commit.Subject + " · " + rv.FullName(), Repo: rv, Tab: "commits", Data: struct {
		Commit    commit
		Parents   []string
		Stat      string
		Lines     []diffLine
		Truncated bool
		Limit     int64
	}{d.Commit, parents, d.Stat, diffLines(d.Patch), d.Truncated, h.opts.MaxDiffBytes}})
	return nil
}

// alertStates are the filters of the alerts page.
func alertStates() []string { return []string{"open", "resolved", "all"} }

func (h *Handler) alerts(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	if !rv.Alerts {
		return errNotFound
	}
	state := r.URL.Query().Get("state")
	if !slices.Contains(alertStates(), state) {
		state = "open"
	}
	f := alerts.Filter{Tenant: rv.Owner, RepoID: rv.ID}
	if state != "all" {
		f.State = alerts.State(state)
	}
	pg, err := h.opts.Alerts.List(r.Context(), f, r.URL.Query().Get("after"), alerts.DefaultPageSize)
	if err != nil {
		return alertError(err)
	}
	h.show(w, r, v, http.StatusOK, "alerts", page{Title: "Alerts · " + rv.FullName(), Repo: rv, Tab: "alerts", Data: struct {
		State       string
		States      []string
		Alerts      []alerts.Alert
		Next        string
		Resolutions []alerts.Resolution
	}{state, alertStates(), pg.Alerts, pg.Next, []alerts.Resolution{alerts.ResolutionRevoked, alerts.ResolutionFalsePositive, alerts.ResolutionUsedInTests, alerts.ResolutionWontFix}}})
	return nil
}

// alertError maps the alert store's errors: absent is 404, bad input
// 400, anything else (contention, storage) 503.
func alertError(err error) error {
	switch {
	case errors.Is(err, alerts.ErrNotFound):
		return &httpError{status: http.StatusNotFound, msg: "Not found.", err: err}
	case errors.Is(err, alerts.ErrInvalidArgument):
		return &httpError{status: http.StatusBadRequest, msg: "Invalid request: " + err.Error(), err: err}
	case errors.Is(err, alerts.ErrCorrupt):
		return &httpError{status: http.StatusInternalServerError, msg: "Internal error.", err: err}
	}
	return &httpError{status: http.StatusServiceUnavailable, msg: "The service is unavailable; try again shortly.", err: err}
}

func (h *Handler) resolveAlert(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	if !rv.Alerts {
		return errNotFound
	}
	c := alerts.Change{
		State:      alerts.StateResolved,
		Resolution: alerts.Resolution(r.PostFormValue("resolution")),
		By:         v.p.Tenant,
		Comment:    strings.TrimSpace(r.PostFormValue("comment")),
	}
	a, err := h.opts.Alerts.SetState(r.Context(), rv.Owner, rv.ID, r.PathValue("id"), c)
	if err != nil {
		return alertError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "alert state changed", "repo", rv.FullName(), "alert", a.Fingerprint, "state", a.State, "resolution", a.Resolution, "by", v.p.Tenant, "token_id", v.p.TokenID, "via", "web")
	http.Redirect(w, r, repoURL(rv.Repo)+"/-/alerts?state=all", http.StatusSeeOther)
	return nil
}

// scanRunsShown bounds the runs on the scan-runs page.
const scanRunsShown = 50

// scans lists the repository's secret-scanning runs with their progress.
func (h *Handler) scans(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	if !rv.Scans {
		return errNotFound
	}
	runs, err := h.opts.Scans.Runs(r.Context(), rv.ID, scanRunsShown)
	if err != nil {
		return &httpError{status: http.StatusServiceUnavailable, msg: "The scan runs are unavailable; try again shortly.", err: err}
	}
	lag, err := h.opts.Scans.Lag(r.Context(), rv.ID)
	if err != nil {
		return &httpError{status: http.StatusServiceUnavailable, msg: "The scan runs are unavailable; try again shortly.", err: err}
	}
	h.show(w, r, v, http.StatusOK, "scans", page{Title: "Scan runs · " + rv.FullName(), Repo: rv, Tab: "scans", Notice: noticeOf(r), Data: scansPage{Runs: runs, Lag: lag}})
	return nil
}

// scansPage is what the scan-runs page shows: how far scans trail the
// pushes (docs/adr/0033-scan-coverage.md), then the newest runs.
type scansPage struct {
	Runs []scanner.Status
	Lag  scanner.Lag
}

// defaultFirst lists the default branch first, then the page's other
// branches in their order: the default branch leads wherever its name
// sorts, on this page or not.
func defaultFirst(branches []ref, def ref) []ref {
	out := make([]ref, 0, len(branches)+1)
	if i := slices.IndexFunc(branches, func(b ref) bool { return b.Full == def.Full }); i >= 0 {
		out = append(out, branches[i])
	} else {
		out = append(out, ref{Name: def.Name, Full: def.Full, Commit: def.Commit, When: def.When})
	}
	for _, b := range branches {
		if b.Full != def.Full {
			out = append(out, b)
		}
	}
	return out
}
