package sshd

import (
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
)

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Command // zero: refused
	}{
		// What git sends: ssh://host/alice/x.git and alice/x (scp-like).
		{"git-upload-pack '/alice/x.git'", Command{UploadPack, "alice", "x", ""}},
		{"git-upload-pack 'alice/x.git'", Command{UploadPack, "alice", "x", ""}},
		{"git-receive-pack '/Alice/X'", Command{ReceivePack, "Alice", "X", ""}},
		{"git-upload-archive 'alice/x.git'", Command{UploadArchive, "alice", "x", ""}},
		{"git-upload-pack '/alice/x.git/'", Command{UploadPack, "alice", "x", ""}},
		{"git upload-pack 'alice/x.git'", Command{UploadPack, "alice", "x", ""}},
		{"git receive-pack '/alice/x.git'", Command{ReceivePack, "alice", "x", ""}},
		{"git-upload-pack alice/x.git", Command{UploadPack, "alice", "x", ""}},
		{"git-upload-pack '/alice/'x.git", Command{UploadPack, "alice", "x", ""}},
		{`git-upload-pack /alice/x\.git`, Command{UploadPack, "alice", "x", ""}},
		{"git-upload-pack '/alice/x.GIT'", Command{UploadPack, "alice", "x", ""}},
		{"git-upload-pack '/alice/x.git.git'", Command{}}, // one suffix stripped; "x.git" is no name
		// Git LFS over SSH: the path as git's, then the operation.
		{"git-lfs-authenticate 'alice/x.git' download", Command{LFSAuthenticate, "alice", "x", "download"}},
		{"git-lfs-authenticate alice/x.git upload", Command{LFSAuthenticate, "alice", "x", "upload"}},
		{"git-lfs-authenticate '/alice/x.git'  upload", Command{LFSAuthenticate, "alice", "x", "upload"}},
		{"git-lfs-authenticate 'alice/x.git'", Command{}},
		{"git-lfs-authenticate 'alice/x.git' delete", Command{}},
		{"git-lfs-authenticate 'alice/x.git' upload extra", Command{}},
		{"git-lfs-authenticate download", Command{}},
		// git-lfs 3.x's pure SSH transfer: the path bare, as git-lfs sends it.
		{"git-lfs-transfer /alice/x.git upload", Command{LFSTransfer, "alice", "x", "upload"}},
		{"git-lfs-transfer 'alice/x.git' download", Command{LFSTransfer, "alice", "x", "download"}},
		{"git-lfs-transfer alice/x.git lock", Command{}},
		{"git-lfs-transfer alice/x.git", Command{}},
		{"git-lfs-transfer /alice/x.git upload; rm -rf /", Command{}},
		{"git-upload-pack 'alice/x.git' download", Command{}},

		{"", Command{}},
		{"ls", Command{}},
		{"sh -c 'git-upload-pack alice/x'", Command{}},
		{"git-upload-pack", Command{}},
		{"git-upload-pack ", Command{}},
		{"git-upload-pack ''", Command{}},
		{"git-upload-pack '/alice/x.git' extra", Command{}},
		{"git-upload-pack '/alice/x.git", Command{}},
		{`git-upload-pack /alice/x\`, Command{}},
		{"git-upload-pack '/alice'", Command{}},
		{"git-upload-pack '/alice/x/y'", Command{}},
		{"git-upload-pack '/alice/../x'", Command{}},
		{"git-upload-pack '../alice/x'", Command{}},
		{"git-upload-pack '//alice/x'", Command{}},
		{"git-upload-pack '~alice/x'", Command{}},
		{"git-upload-pack ~alice/x", Command{}},
		{"git-upload-pack '/alice/.x'", Command{}},
		{"git-upload-pack '/alice/-x'", Command{}},
		{"git-upload-pack '/al ice/x'", Command{}},
		{"git-upload-pack /alice/x;rm", Command{}},
		{"git-upload-pack $(id)/x", Command{}},
		{"git-upload-pack '/alice/x.git'\n", Command{}},
		{"git-upload-pack  '/alice/x.git'", Command{}},
		{"git upload-pack", Command{}},
		{"git status '/alice/x.git'", Command{}},
		{"git-upload-pack '/alice/x\x00.git'", Command{}},
		{"git-upload-pack '/" + strings.Repeat("a", 5000) + "/x'", Command{}},
	} {
		got, err := ParseCommand(tc.line)
		if tc.want == (Command{}) {
			if !errors.Is(err, ErrBadCommand) {
				t.Errorf("ParseCommand(%q) = %+v, %v; want ErrBadCommand", tc.line, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseCommand(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
}

// TestParseCommandRefusalNamesCommand: the refusal says what ghost runs
// and which command it refused, without echoing a long line.
func TestParseCommandRefusalNamesCommand(t *testing.T) {
	_, err := ParseCommand("rm -rf /")
	if err == nil || !strings.Contains(err.Error(), `"rm"`) || !strings.Contains(err.Error(), "git-upload-pack") {
		t.Fatalf("refusal = %v", err)
	}
	_, err = ParseCommand(strings.Repeat("x", 1000))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("refusal of a long command is %d bytes: %v", len(err.Error()), err)
	}
}

// sqQuote quotes s as git's sq_quote_buf does.
func sqQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '!':
			b.WriteString(`'\` + s[i:i+1] + `'`)
		default:
			b.WriteByte(s[i])
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"git-upload-pack '/alice/x.git'", "git receive-pack 'a/b'", "git-upload-archive a/b.git",
		"git-lfs-transfer /a/b.git upload", "git-lfs-authenticate a/b download",
		`git-upload-pack '/a'\''b/x'`, "ls", "git-upload-pack '/a/b/c'", `git-upload-pack /a/b\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := ParseCommand(line)
		if err != nil {
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("ParseCommand(%q) = %v, not ErrBadCommand", line, err)
			}
			return
		}
		op := ""
		switch c.Service {
		case UploadPack, ReceivePack, UploadArchive:
		case LFSAuthenticate, LFSTransfer:
			if c.Operation != "download" && c.Operation != "upload" {
				t.Fatalf("ParseCommand(%q): operation %q", line, c.Operation)
			}
			op = " " + c.Operation
		default:
			t.Fatalf("ParseCommand(%q): service %q", line, c.Service)
		}
		if meta.ValidateName(c.Owner) != nil || meta.ValidateName(c.Repo) != nil {
			t.Fatalf("ParseCommand(%q) = %+v: invalid names accepted", line, c)
		}
		// What git would send for the parsed repository parses the same.
		for _, path := range []string{"/" + c.Owner + "/" + c.Repo + ".git", c.Owner + "/" + c.Repo} {
			again, err := ParseCommand(string(c.Service) + " " + sqQuote(path) + op)
			if err != nil || again != c {
				t.Fatalf("round trip of %+v via %q: %+v, %v", c, path, again, err)
			}
		}
	})
}
