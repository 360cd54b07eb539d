package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// The code pages of a repository: directories, files, raw downloads,
// history, single commits and comparisons, each at a ref or commit.

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
	rv, g, err := h.openReadable(r, v)
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
		LFS      *lfsFile
	}{At: loc, Size: o.Size}
	if data.LFS, err = h.lfsFile(r.Context(), rv, cf, obj, o.Size); err != nil {
		return err
	}
	if data.LFS != nil {
		h.show(w, r, v, http.StatusOK, "blob", page{Title: joinPath(rv.FullName(), loc.Path), Repo: rv, Tab: "code", Data: data})
		return nil
	}
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
	rv, g, loc, err := h.locate(r, v)
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
	name := path.Base(loc.Path)
	if served, err := h.rawLFS(w, r, rv, cf, obj, o.Size, name); served || err != nil {
		return err
	}
	hd.Set("Content-Length", strconv.FormatInt(o.Size, 10))
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

// diffLine is one line of a patch with its class and, inside a hunk of
// a two-way diff, its numbers in the old and the new file (0: none): a
// deleted line has Old, an added one New, a context line both.
type diffLine struct {
	Class, Text string
	Old, New    int
}

// diffLines classes each line of patch (a commit's whole diff, or a
// file's hunks). Inside a hunk a line is what its first character says,
// so a deleted "-- x" is a deletion, not a header; the hunks of a
// combined diff (a merge's "@@@") are classed by prefix and not numbered.
func diffLines(patch string) []diffLine {
	lines := strings.Split(strings.TrimSuffix(patch, "\n"), "\n")
	out := make([]diffLine, 0, len(lines))
	inHunk := false
	var old, new int
	for _, l := range lines {
		d := diffLine{Text: l}
		switch {
		case strings.HasPrefix(l, "diff --"):
			d.Class, inHunk = "file", false
		case strings.HasPrefix(l, "@@"):
			d.Class = "hunk"
			old, new, inHunk = hunkStart(l)
		case inHunk && strings.HasPrefix(l, "+"):
			d.Class, d.New = "add", new
			new++
		case inHunk && strings.HasPrefix(l, "-"):
			d.Class, d.Old = "del", old
			old++
		case inHunk && strings.HasPrefix(l, "\\"):
			d.Class = "meta" // "\ No newline at end of file"
		case inHunk:
			d.Old, d.New = old, new
			old++
			new++
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "index "),
			strings.HasPrefix(l, "new file"), strings.HasPrefix(l, "deleted file"), strings.HasPrefix(l, "similarity"),
			strings.HasPrefix(l, "rename "), strings.HasPrefix(l, "Binary files"):
			d.Class = "meta"
		case strings.HasPrefix(l, "+"):
			d.Class = "add"
		case strings.HasPrefix(l, "-"):
			d.Class = "del"
		}
		out = append(out, d)
	}
	return out
}

// hunkStart reads a two-way hunk header, "@@ -a[,b] +c[,d] @@ ...", and
// returns the first old and new line numbers; ok is false for anything
// else (a combined diff's "@@@ ...").
func hunkStart(l string) (old, new int, ok bool) {
	f := strings.Fields(l)
	if len(f) < 4 || f[0] != "@@" || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0, false
	}
	num := func(s string) (int, bool) {
		s, _, _ = strings.Cut(s, ",")
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0
	}
	o, ok1 := num(f[1][1:])
	n, ok2 := num(f[2][1:])
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	// A side with no lines ("-0,0") starts its count at 1 for the lines
	// the other side numbers.
	return max(o, 1), max(n, 1), true
}

func (h *Handler) commit(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, g, err := h.openReadable(r, v)
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

// compareSide is one side of a compare page's "base...head": a branch, a
// tag or a commit id, and the commit it names. An all-zero id (the
// "before" of a push that created the branch, the "after" of one that
// deleted it) is no commit: id is "". A commit id must be reachable from
// a ref (docs/adr/0091-reachable-objects.md), except a base's: the
// "before" of a force push is what the push left behind, and a base only
// keeps its commits off the list, which shows what the head reaches.
type compareSide struct {
	Name, ID string
}

// compareSideOf resolves s, one side of a compare spec.
func (g gitRepo) compareSideOf(ctx context.Context, s string, base bool) (compareSide, error) {
	if len(s) >= 40 && isHex(s) && strings.Trim(s, "0") == "" {
		return compareSide{Name: s}, nil
	}
	name, id, p, err := g.locate(ctx, s)
	if err == nil && p != "" {
		err = errNoObject
	}
	if errors.Is(err, errNoObject) && base && isHex(s) {
		var ids []string
		if ids, err = g.batchCheck(ctx, []string{s + "^{commit}"}); err == nil && ids[0] == "" {
			err = errNoObject
		} else if err == nil {
			name, id = s, ids[0]
		}
	}
	if err != nil {
		return compareSide{}, err
	}
	return compareSide{Name: name, ID: id}, nil
}

// compare is the page of "/-/compare/base...head", the link of a push
// webhook payload (GitHub's): the commits the head reaches and the base
// does not, newest first, a page at a time like the log. A created
// branch's (no base) lists the head's history; a deleted one's (no head)
// none.
func (h *Handler) compare(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, g, err := h.openReadable(r, v)
	if err != nil {
		return err
	}
	bs, hs, ok := strings.Cut(strings.Trim(r.PathValue("rest"), "/"), "...")
	if !ok || bs == "" || hs == "" {
		return errNotFound
	}
	ctx := r.Context()
	base, err := g.compareSideOf(ctx, bs, true)
	if err != nil {
		return err
	}
	head, err := g.compareSideOf(ctx, hs, false)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 {
		n = 1
	}
	var cs []commit
	if head.ID != "" {
		rev := head.ID
		if base.ID != "" {
			rev = base.ID + ".." + head.ID
		}
		if cs, err = g.log(ctx, rev, "", (n-1)*logPage, logPage+1); err != nil {
			return err
		}
		rv.Ref = head.Name
	}
	more := len(cs) > logPage
	if more {
		cs = cs[:logPage]
	}
	h.show(w, r, v, http.StatusOK, "compare", page{Title: "Comparing " + bs + "..." + hs + " · " + rv.FullName(), Repo: rv, Tab: "commits", Data: struct {
		Base, Head compareSide
		Commits    []commit
		Page       int
		More       bool
	}{base, head, cs, n, more}})
	return nil
}
