package web

import (
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/meta"
)

// A repository's front page and its lists of branches and tags, and how
// every repository page resolves {owner}/{repo} for its visitor.

// repoView is the repository header.
type repoView struct {
	meta.Repo
	Ref      string // the ref shown, for tabs
	CanWrite bool
	// Alerts and Scans: the visitor may see the repository's alerts and
	// scan runs (write access, and the server keeps them).
	Alerts bool
	Scans  bool
	// Pulls: the server keeps pull requests, so the tab shows.
	Pulls bool
	// Switch, when set, is the branch and tag switcher of a code or log
	// page.
	Switch *switcher
}

// Base is the repository's URL path.
func (rv *repoView) Base() string { return repoURL(rv.Repo) }

// switcher lists the refs a code or log page may be switched to: the
// same view (Kind: tree, blob or commits) of Path at another branch or
// tag, the first page of each (docs/adr/0090-bounded-serving.md).
type switcher struct {
	Current                string
	Tag                    bool
	Kind, Path             string
	Branches, Tags         []ref
	MoreBranches, MoreTags bool
}

// readable resolves {owner}/{repo} for v: 404 when it does not exist or
// v may not read it, the same answer for both.
func (h *Handler) readable(r *http.Request, v *visitor) (*repoView, error) {
	ctx := r.Context()
	repo, err := h.opts.Repos.Repo(ctx, r.PathValue("owner"), r.PathValue("repo"))
	if err != nil {
		return nil, classify("resolve repository", err)
	}
	ok, err := h.opts.Authz.CanRead(ctx, v.p, repo)
	if err != nil {
		return nil, classify("authorize read", err)
	}
	if !ok {
		return nil, errNotFound
	}
	rv := &repoView{Repo: repo}
	if v.p != nil {
		if rv.CanWrite, err = h.opts.Authz.CanWrite(ctx, v.p, repo); err != nil {
			return nil, classify("authorize write", err)
		}
	}
	// Secret-scanning alerts and scan runs are for those who can act on
	// them: the tabs show, and the pages open, with write access only
	// (security).
	rv.Alerts = h.opts.Alerts != nil && rv.CanWrite
	rv.Scans = h.opts.Scans != nil && rv.CanWrite
	rv.Pulls = h.opts.Pulls != nil
	return rv, nil
}

// security resolves {owner}/{repo} for a page of its secret scanning:
// alerts and scan runs are shown to those who may write the repository,
// and anyone else gets the page of a missing one, the same 404 as for a
// repository they may not read. The caller checks repoView.Alerts or
// Scans, which are set only with write access.
func (h *Handler) security(r *http.Request, v *visitor) (*repoView, error) {
	rv, err := h.readable(r, v)
	if err != nil {
		return nil, err
	}
	if !rv.CanWrite {
		return nil, errNotFound
	}
	return rv, nil
}

// openReadable resolves {owner}/{repo} for v (readable) and materializes
// it (open).
func (h *Handler) openReadable(r *http.Request, v *visitor) (*repoView, gitRepo, error) {
	rv, err := h.readable(r, v)
	if err != nil {
		return nil, gitRepo{}, err
	}
	g, err := h.open(r, rv)
	if err != nil {
		return nil, gitRepo{}, err
	}
	return rv, g, nil
}

// open materializes a readable repository.
func (h *Handler) open(r *http.Request, rv *repoView) (gitRepo, error) {
	dir, err := h.opts.Cache.Materialize(r.Context(), rv.ID)
	if err != nil {
		return gitRepo{}, classify("materialize", err)
	}
	return gitRepo{run: h.git, dir: dir, timeout: h.opts.GitTimeout}, nil
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
	rv, g, err := h.openReadable(r, v)
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
	rv, g, err := h.openReadable(r, v)
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

func repoURL(repo meta.Repo) string {
	return "/" + urlSegment(repo.Owner) + "/" + urlSegment(repo.Name)
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
