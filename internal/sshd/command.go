package sshd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ghost-scm/ghost/internal/meta"
)

// Service is a git service a client may run over SSH.
type Service string

// The services ghost runs. Their names are the commands git sends.
const (
	UploadPack    Service = "git-upload-pack"    // fetch and clone
	ReceivePack   Service = "git-receive-pack"   // push
	UploadArchive Service = "git-upload-archive" // git archive --remote
	// LFSAuthenticate is Git LFS's "git-lfs-authenticate <repo>
	// <operation>": it answers the Batch API's URL and a token for it
	// (docs/adr/0124-lfs-over-ssh.md).
	LFSAuthenticate Service = "git-lfs-authenticate"
	// LFSTransfer is Git LFS's pure SSH transfer, "git-lfs-transfer
	// <repo> <operation>": the objects and locks themselves, over the
	// session (docs/adr/0125-lfs-transfer-over-ssh.md).
	LFSTransfer Service = "git-lfs-transfer"
)

// Command is a parsed exec request: which service, on which repository.
type Command struct {
	Service Service
	Owner   string // as the client wrote it; meta lookups ignore case
	Repo    string // without a ".git" suffix
	// Operation is git-lfs-authenticate's and git-lfs-transfer's:
	// "download" or "upload".
	Operation string
}

// ErrBadCommand reports an exec request that is not one of the git
// commands ghost serves, or names no valid repository. Its message is
// meant for the client.
var ErrBadCommand = errors.New("bad command")

// maxCommand bounds the command line parsed: a git command and a path of
// two names is far shorter.
const maxCommand = 4096

// ParseCommand parses the command line of an SSH exec request as git
// sends it: the service, a space, and the repository path quoted for a
// POSIX shell. git quotes with single quotes, and closes the quote around
// a quote or "!" in the path, writing it backslash-escaped
// (sq_quote_buf in git's quote.c); a bare path is accepted too, for
// people typing by hand. "git upload-pack" (with a space) is accepted as
// "git-upload-pack", as other servers do.
//
// The path is "owner/name" with an optional ".git" suffix, a leading "/"
// (ssh://host/owner/name.git sends "/owner/name.git"; the scp-like
// host:owner/name.git sends "owner/name.git") and a trailing "/". Both
// names must pass meta.ValidateName. Anything else is ErrBadCommand.
func ParseCommand(line string) (Command, error) {
	if len(line) > maxCommand {
		return Command{}, fmt.Errorf("%w: command is %d bytes, at most %d", ErrBadCommand, len(line), maxCommand)
	}
	name, arg, _ := strings.Cut(line, " ")
	if name == "git" {
		// "git upload-pack '<path>'"
		var sub string
		sub, arg, _ = strings.Cut(arg, " ")
		name = "git-" + sub
	}
	svc := Service(name)
	op := ""
	switch svc {
	case UploadPack, ReceivePack, UploadArchive:
	case LFSAuthenticate, LFSTransfer:
		// "<path> <operation>": the path as the others', quoted or bare.
		i := strings.LastIndexByte(arg, ' ')
		if i < 0 {
			return Command{}, fmt.Errorf("%w: %s: want a repository and download or upload", ErrBadCommand, svc)
		}
		arg, op = strings.TrimRight(arg[:i], " "), arg[i+1:]
		if op != "download" && op != "upload" {
			return Command{}, fmt.Errorf("%w: %s: operation %q, want download or upload", ErrBadCommand, svc, firstWord(op))
		}
	default:
		return Command{}, fmt.Errorf("%w: ghost runs only git-upload-pack, git-receive-pack, git-upload-archive, git-lfs-authenticate and git-lfs-transfer, not %q", ErrBadCommand, firstWord(line))
	}
	path, err := unquote(arg)
	if err != nil {
		return Command{}, fmt.Errorf("%w: %s: %v", ErrBadCommand, svc, err)
	}
	owner, repo, err := splitPath(path)
	if err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	return Command{Service: svc, Owner: owner, Repo: repo, Operation: op}, nil
}

// firstWord names the refused command without echoing a whole line.
func firstWord(line string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	if len(w) > 64 {
		w = w[:64] + "..."
	}
	return w
}

// unquote undoes POSIX-shell single quoting and backslash escapes for
// exactly one word: the repository path.
func unquote(s string) (string, error) {
	if s == "" {
		return "", errors.New("no repository path; want '<owner>/<name>.git'")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", errors.New("unterminated quote in the repository path")
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '\\':
			if i+1 == len(s) {
				return "", errors.New("trailing backslash in the repository path")
			}
			i++
			b.WriteByte(s[i])
		case c == ' ' || c == '\t' || c == '\n':
			return "", errors.New("more than one argument; want one repository path")
		case c == '"' || c == '`' || c == '$' || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '(' || c == ')' || c == '*' || c == '?' || c == '[' || c == '~' || c == '#' || c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("unquoted %q in the repository path", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// splitPath turns "/owner/name.git" and its variants into owner and name.
func splitPath(p string) (owner, repo string, err error) {
	orig := p
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	owner, repo, ok := strings.Cut(p, "/")
	if !ok || strings.Contains(repo, "/") {
		return "", "", fmt.Errorf("repository path %q: want <owner>/<name>.git", orig)
	}
	if len(repo) > 4 && strings.EqualFold(repo[len(repo)-4:], ".git") {
		repo = repo[:len(repo)-4]
	}
	if err := meta.ValidateName(owner); err != nil {
		return "", "", fmt.Errorf("repository path %q: owner: %w", orig, err)
	}
	if err := meta.ValidateName(repo); err != nil {
		return "", "", fmt.Errorf("repository path %q: name: %w", orig, err)
	}
	return owner, repo, nil
}
