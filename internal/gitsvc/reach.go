package gitsvc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
)

// A fetch serves only objects that the repository's refs reach
// (docs/adr/0091-reachable-objects.md). git enforces it for commits in
// protocol v0 only: v2's fetch serves any object the repository holds,
// v0 serves any blob or tree by id, and v2's object-info tells the size of
// any object. Objects of deleted branches and force-pushed history stay
// in the cache's packs until a compaction drops them, so ghost checks
// every fetch request itself before git sees it: each wanted object must
// be a ref's tip, a commit that a ref reaches, or an object that a ref
// reaches, else the request is refused as git refuses a wrong want in v0
// ("not our ref").

// maxWants bounds the distinct objects one fetch request may ask for:
// a clone asks for one per distinct ref tip.
const maxWants = 256 << 10

// errNotOurRef is a want that no ref reaches; errNotOffered a v2 command
// ghost does not offer. Their messages are git's.
var (
	errNotOurRef  = errors.New("upload-pack: not our ref")
	errNotOffered = errors.New("upload-pack: command not offered")
)

// refusal is why a fetch request is refused: what the client is told.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// section is one request of a fetch: protocol v0's wants (up to its first
// flush) or one protocol v2 command (up to its flush).
type section struct {
	command string   // v2: "fetch", "ls-refs", ...; v0: "fetch"
	wants   []string // object ids, lowercase hex
}

// wantOf returns the object id a "want" line asks for.
func wantOf(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("want "))
	if !ok {
		return "", false
	}
	id, _, _ := bytes.Cut(bytes.TrimRight(rest, "\n"), []byte(" "))
	if len(id) != 40 && len(id) != 64 {
		return "", true // git refuses it itself
	}
	return strings.ToLower(string(id)), true
}

// commandOf returns the command a v2 "command=" line names.
func commandOf(line []byte) (string, bool) {
	c, ok := bytes.CutPrefix(line, []byte("command="))
	return string(bytes.TrimRight(c, "\n")), ok
}

// checkSection refuses a v2 command ghost does not offer and a section
// whose wants a ref does not reach.
func (s *Service) checkSection(ctx context.Context, co *LocalCopy, sec section) error {
	switch sec.command {
	case "", "fetch", "ls-refs":
	default:
		// object-info answers the size of any object, reachable or not;
		// ghost does not advertise it (nor anything else git adds).
		return &refusal{fmt.Errorf("%w: %s", errNotOffered, sec.command)}
	}
	if len(sec.wants) > maxWants {
		return &refusal{fmt.Errorf("%w: more than %d objects wanted", errNotOffered, maxWants)}
	}
	if id, err := s.unreachable(ctx, co, sec.wants); err != nil || id != "" {
		if err != nil {
			return err
		}
		return &refusal{fmt.Errorf("%w %s", errNotOurRef, id)}
	}
	return nil
}

// scanRequest reads a stateless fetch request (v2 when v2) and returns
// its section: v0's wants, or v2's command and its wants.
func scanRequest(r io.Reader, v2 bool) (section, error) {
	pr := pktline.NewReader(r)
	var sec section
	if !v2 {
		sec.command = "fetch"
	}
	seen := map[string]bool{}
	for {
		kind, line, err := pr.Next()
		if err == io.EOF || kind == pktline.Flush || (err == nil && !v2 && kind != pktline.Data) {
			return sec, nil
		}
		if err != nil {
			return sec, err
		}
		if c, ok := commandOf(line); ok && v2 && sec.command == "" {
			sec.command = c
			continue
		}
		if id, ok := wantOf(line); ok && id != "" && !seen[id] {
			seen[id] = true
			sec.wants = append(sec.wants, id)
		}
	}
}

// unreachable returns the first of wants that no ref of co reaches, or
// "" when a ref reaches them all. Ref tips cost nothing (the log's refs
// are at hand); other commits cost one rev-list, walking until a ref
// reaches them; other objects (blobs and trees a partial clone asks
// for by id, or a tag only another tag names) cost a walk of the objects
// the refs reach, stopped once all are found, at most what a clone costs.
func (s *Service) unreachable(ctx context.Context, co *LocalCopy, wants []string) (string, error) {
	tips := make(map[string]bool, len(co.Refs))
	for _, r := range co.Refs {
		tips[strings.ToLower(r.ID)] = true
	}
	var rest []string
	for _, w := range wants {
		if !tips[w] {
			rest = append(rest, w)
		}
	}
	if len(rest) == 0 {
		return "", nil
	}
	types, err := s.objectTypes(ctx, co.Dir, rest)
	if err != nil {
		return "", err
	}
	var commits, others []string
	for _, w := range rest {
		switch types[w] {
		case "":
			return w, nil // missing: git would refuse it too
		case "commit":
			commits = append(commits, w)
		default:
			others = append(others, w)
		}
	}
	if len(commits) > 0 {
		// rev-list prints what the wants reach and no ref does: a want is
		// unreachable exactly when it is printed itself.
		bad := map[string]bool{}
		want := make(map[string]bool, len(commits))
		for _, c := range commits {
			want[c] = true
		}
		err := s.gitLines(ctx, co.Dir, strings.NewReader(strings.Join(commits, "\n")+"\n"), func(line string) bool {
			if want[line] {
				bad[line] = true
			}
			return true
		}, "rev-list", "--stdin", "--not", "--all")
		if err != nil {
			return "", err
		}
		for _, c := range commits {
			if bad[c] {
				return c, nil
			}
		}
	}
	if len(others) > 0 {
		left := make(map[string]bool, len(others))
		for _, o := range others {
			left[o] = true
		}
		err := s.gitLines(ctx, co.Dir, nil, func(line string) bool {
			delete(left, line)
			return len(left) > 0
		}, "rev-list", "--objects", "--no-object-names", "--use-bitmap-index", "--all")
		if err != nil {
			return "", err
		}
		for _, o := range others {
			if left[o] {
				return o, nil
			}
		}
	}
	return "", nil
}

// objectTypes returns the type of each of ids ("" when missing), from one
// cat-file --batch-check.
func (s *Service) objectTypes(ctx context.Context, dir string, ids []string) (map[string]string, error) {
	types := make(map[string]string, len(ids))
	i := 0
	err := s.gitLines(ctx, dir, strings.NewReader(strings.Join(ids, "\n")+"\n"), func(line string) bool {
		if id, typ, ok := strings.Cut(line, " "); ok && i < len(ids) && id == ids[i] && typ != "missing" && typ != "ambiguous" {
			types[id] = typ
		}
		i++
		return true
	}, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	return types, err
}

// gitLines runs git with stdin and hands each line of its output to fn,
// whose false stops git. Lines longer than an object id and a word are
// skipped.
func (s *Service) gitLines(ctx context.Context, dir string, stdin io.Reader, fn func(string) bool, args ...string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := s.opts.Git.Command(ctx, dir, nil, args...)
	cmd.Stdin = stdin
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("git %s: %w", args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git %s: %w", args[0], err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 4096), 4096)
	stopped := false
	for sc.Scan() {
		if !fn(sc.Text()) {
			stopped = true
			break
		}
	}
	if stopped {
		cancel()
	}
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil && !stopped:
		return fmt.Errorf("git %s: %w", args[0], ctx.Err())
	case stopped:
		return nil
	case sc.Err() != nil:
		return fmt.Errorf("git %s: %w", args[0], sc.Err())
	}
	return cmd.Wrap(werr)
}

// errPacket is git's error packet, which clients print as "remote error:
// <msg>" in every protocol version.
func errPacket(w io.Writer, err error) error {
	if e := pktline.WriteString(w, "ERR "+err.Error()+"\n"); e != nil {
		return e
	}
	return flush(w)
}

// wantFilter passes a client's stream to git upload-pack, one request
// section at a time, holding back each section's wants until the section
// ends and its wants are known to be reachable. In protocol v2 only the
// want lines are held and the others pass at once (git reads a whole
// command before acting on it, whatever the order of its arguments). In
// v0 the capabilities ride on the first want, and git reads a "filter"
// line only after them, so everything from the first want to the flush
// is held, in order. A refused section is answered with an error packet
// and ends the stream.
type wantFilter struct {
	s   *Service
	ctx context.Context
	co  *LocalCopy
	v2  bool
	in  *pktline.Reader
	out io.Writer // the client, for the error packet

	buf       bytes.Buffer // what git may read next
	sec       section
	held      bytes.Buffer    // the section's packets held back, framed
	checked   map[string]bool // wants already found reachable
	v0holding bool            // v0: a want was seen, hold until the flush
	v0done    bool            // v0's wants are past: the rest passes as is
	refused   error
}

// maxHeld bounds what a section holds back: a want line is about 50
// bytes, so this is room for maxWants of them and their shallow lines.
const maxHeld = 16 << 20

func newWantFilter(ctx context.Context, s *Service, co *LocalCopy, v2 bool, in io.Reader, out io.Writer) *wantFilter {
	return &wantFilter{s: s, ctx: ctx, co: co, v2: v2, in: pktline.NewReader(in), out: out, checked: map[string]bool{}}
}

// Read gives git the client's stream, section by section.
func (f *wantFilter) Read(p []byte) (int, error) {
	for f.buf.Len() == 0 {
		if f.refused != nil {
			return 0, f.refused
		}
		if err := f.step(); err != nil {
			return 0, err
		}
	}
	return f.buf.Read(p)
}

// refuse ends the stream with err, telling the client.
func (f *wantFilter) refuse(err error) {
	f.refused = err
	_ = errPacket(f.out, err)
}

// step reads one packet and queues what git may read.
func (f *wantFilter) step() error {
	kind, line, err := f.in.Next()
	if err != nil {
		return err // io.EOF: the client closed its side
	}
	if f.v0done {
		return writePacket(&f.buf, kind, line)
	}
	if kind == pktline.Flush {
		return f.endSection()
	}
	if kind == pktline.Data {
		if c, ok := commandOf(line); ok && f.v2 && f.sec.command == "" {
			f.sec.command = c
		}
		id, isWant := wantOf(line)
		if isWant && id != "" && !f.checked[id] {
			f.sec.wants = append(f.sec.wants, id)
		}
		if isWant || f.v0holding {
			f.v0holding = !f.v2
			if f.held.Len() > maxHeld {
				f.refuse(&refusal{fmt.Errorf("%w: a fetch request of more than %d bytes of wants", errNotOffered, maxHeld)})
				return nil
			}
			return writePacket(&f.held, kind, line)
		}
	}
	return writePacket(&f.buf, kind, line)
}

// endSection checks the section that a flush ends and releases it.
func (f *wantFilter) endSection() error {
	if !f.v2 {
		f.sec.command = "fetch"
	}
	if len(f.sec.wants) > 0 || f.sec.command != "fetch" && f.sec.command != "" {
		if err := f.s.checkSection(f.ctx, f.co, f.sec); err != nil {
			if r, ok := errors.AsType[*refusal](err); ok {
				f.refuse(r)
				return nil
			}
			return err
		}
	}
	if len(f.checked)+len(f.sec.wants) > maxWants {
		clear(f.checked) // a cache of the rounds of one negotiation, not a record
	}
	for _, w := range f.sec.wants {
		f.checked[w] = true
	}
	f.buf.Write(f.held.Bytes())
	f.held.Reset()
	f.sec, f.v0holding = section{}, false
	f.v0done = !f.v2
	f.buf.WriteString("0000")
	return nil
}

// writePacket writes a packet of kind back in pkt-line framing.
func writePacket(w *bytes.Buffer, kind pktline.Kind, line []byte) error {
	switch kind {
	case pktline.Flush:
		w.WriteString("0000")
	case pktline.Delim:
		w.WriteString("0001")
	case pktline.ResponseEnd:
		w.WriteString("0002")
	default:
		return pktline.Write(w, line)
	}
	return nil
}
