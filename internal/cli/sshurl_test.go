package cli

import "testing"

func TestSSHCloneURL(t *testing.T) {
	for _, c := range []struct{ flag, listen, want string }{
		{"ssh://git@git.example.com", "127.0.0.1:2222", "ssh://git@git.example.com"},
		{"", "127.0.0.1:2222", "ssh://git@127.0.0.1:2222"},
		{"", "git.example.com:22", "ssh://git@git.example.com:22"},
		{"", "[::1]:2222", "ssh://git@[::1]:2222"},
		{"", "0.0.0.0:2222", ""},
		{"", ":2222", ""},
		{"", "127.0.0.1:0", ""},
		{"", "", ""},
	} {
		if got := sshCloneURL(c.flag, c.listen); got != c.want {
			t.Errorf("sshCloneURL(%q, %q) = %q, want %q", c.flag, c.listen, got, c.want)
		}
	}
}
