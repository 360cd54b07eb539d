package pulls_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/pulls"
)

// forgetfulLog is a PushLog that, once told to, knows no push: the log
// after compaction folded the head's entry. It wraps the real log; the
// fault is the forgetting.
type forgetfulLog struct {
	inner  pulls.PushLog
	forget atomic.Bool
}

func (f *forgetfulLog) PushedBy(ctx context.Context, repoID, ref, commit string) (string, error) {
	if f.forget.Load() {
		return "", nil
	}
	return f.inner.PushedBy(ctx, repoID, ref, commit)
}

// The attack of issue 43: a writer pushes a commit to the head of
// someone else's pull request, approves it and merges. With approvals
// required, the rule holds the merge until someone other than the head's
// last pusher approves, unless it says otherwise; a pusher that cannot be
// told holds it too (fail closed).
func TestLastPushApproval(t *testing.T) {
	t.Parallel()
	off := false
	cases := []struct {
		name      string
		rule      access.BranchRule
		pusher    string   // who pushes the head's last commit
		approvers []string // writers who approve, in order
		noHook    bool     // merge before the push hook ran
		noLog     bool     // a service without a push log
		forget    bool     // the log forgets the push before the merge
		held      string   // "" : merges; else a part of the reason
	}{
		{name: "the pusher approves", pusher: "bob", approvers: []string{"bob"}, held: "most recent push, by bob"},
		{name: "another writer approves", pusher: "bob", approvers: []string{"bob", "carol"}},
		{name: "the author pushed", pusher: "alice", approvers: []string{"bob"}},
		{name: "the option off", rule: access.BranchRule{RequireLastPushApproval: &off}, pusher: "bob", approvers: []string{"bob"}},
		{name: "two required, the pusher one of them", rule: access.BranchRule{RequiredApprovals: 2}, pusher: "bob", approvers: []string{"bob", "carol"}, held: "1 other approving review"},
		{name: "merged before the push hook ran", pusher: "bob", approvers: []string{"bob"}, noHook: true, held: "most recent push, by bob"},
		{name: "merged before the push hook ran, another approves", pusher: "bob", approvers: []string{"carol"}, noHook: true},
		{name: "compacted: the record tells", pusher: "bob", approvers: []string{"bob"}, forget: true, held: "most recent push, by bob"},
		{name: "compacted: the record lets another's approval count", pusher: "bob", approvers: []string{"carol"}, forget: true},
		{name: "nobody can tell", pusher: "bob", approvers: []string{"carol"}, noHook: true, forget: true, held: "cannot tell who pushed"},
		{name: "no push log", pusher: "bob", approvers: []string{"carol"}, noLog: true, held: "cannot tell who pushed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var fl *forgetfulLog
			e := newEnv(t, false, func(o *pulls.Options) {
				fl = &forgetfulLog{inner: o.Pushes}
				o.Pushes = fl
				if tc.noLog {
					o.Pushes = nil
				}
			})
			pr := e.topic()
			rule := tc.rule
			rule.Pattern = "main"
			if rule.RequiredApprovals == 0 {
				rule.RequiredApprovals = 1
			}
			e.protect(rule)

			e.as, e.noHook = tc.pusher, tc.noHook
			e.gitc("checkout", "-q", "topic")
			tip := e.commit("more by "+tc.pusher, "b.txt", "b\nmore\n")
			e.push(e.repo, "topic")
			e.gitc("checkout", "-q", "main")
			e.as, e.noHook = "", false
			fl.forget.Store(tc.forget)

			cur, err := e.pulls.Get(ctx, e.repo, pr.Number)
			if err != nil {
				t.Fatal(err)
			}
			recorded := cur.HeadPush != nil && *cur.HeadPush == pulls.HeadPush{Commit: tip, By: tc.pusher}
			if want := !tc.noHook && !tc.noLog; recorded != want {
				t.Fatalf("head push recorded %+v, want it recorded: %v", cur.HeadPush, want)
			}
			for _, who := range tc.approvers {
				e.review(pr, who, true, pulls.EventApprove)
			}
			_, err = e.pulls.Merge(ctx, e.repo, pr.Number, pulls.MergeOptions{By: tc.pusher})
			if tc.held == "" {
				if err != nil {
					t.Fatalf("merge: %v", err)
				}
				return
			}
			var me *pulls.MergeError
			if !errors.Is(err, pulls.ErrReviewRequired) || !errors.As(err, &me) || len(me.Message) != 1 || !strings.Contains(me.Message[0], tc.held) {
				t.Fatalf("merge %v, want held: %q", err, tc.held)
			}
			if got := e.refs(e.repo)["refs/heads/main"]; e.isAncestor(tip, got) {
				t.Fatal("the held merge landed")
			}
			cur, _ = e.pulls.Get(ctx, e.repo, pr.Number)
			st, err := e.pulls.Status(ctx, e.repo, cur)
			if err != nil || st.MergeableState != "blocked" || st.Reviews.Satisfied() || !strings.Contains(st.Reviews.Reason(), tc.held) {
				t.Fatalf("status %+v (%q), %v", st, st.Reviews.Reason(), err)
			}
		})
	}
}

// A rule stored before the option existed requires approval of the most
// recent push, and the API shows it so; a rule without required approvals
// does not.
func TestLastPushApprovalDefault(t *testing.T) {
	t.Parallel()
	off, on := false, true
	for _, tc := range []struct {
		rule access.BranchRule
		want bool
	}{
		{access.BranchRule{RequiredApprovals: 1}, true},
		{access.BranchRule{RequiredApprovals: 1, RequireLastPushApproval: &on}, true},
		{access.BranchRule{RequiredApprovals: 1, RequireLastPushApproval: &off}, false},
		{access.BranchRule{RequireLastPushApproval: &on}, false},
	} {
		if got := tc.rule.LastPushApproval(); got != tc.want {
			t.Errorf("%+v: LastPushApproval %v, want %v", tc.rule, got, tc.want)
		}
	}
	var stored access.BranchRule
	if err := json.Unmarshal([]byte(`{"pattern":"main","required_approvals":1,"dismiss_stale_approvals":true}`), &stored); err != nil || !stored.LastPushApproval() {
		t.Fatalf("a rule stored before the option: %+v, %v", stored, err)
	}
}
