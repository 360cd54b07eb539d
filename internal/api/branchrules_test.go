package api

import (
	"context"
	"fmt"
	"testing"
)

// TestBranchRulesAccess: a repository's writers read its branch rules;
// only its owning user or an admin changes them: an org's members are its
// writers, and the rules guard the branches against writers
// (docs/adr/0123-protected-branches.md). Bad rules change nothing.
func TestBranchRulesAccess(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.s.CreateRepo(ctx, "alice", "app", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CreateRepo(ctx, "acme", "lib", false); err != nil {
		t.Fatal(err)
	}
	const rules = `{"rules":[{"pattern":"main","require_pull_request":true},{"pattern":"release/*","pushers":["bob"]}]}`
	f.run([]step{
		{"anonymous reads", "GET", "/api/repos/alice/app/branch-protections", "", "", 401},
		{"a reader reads", "GET", "/api/repos/alice/app/branch-protections", f.aliceR, "", 403},
		{"another tenant reads", "GET", "/api/repos/alice/app/branch-protections", f.bobW, "", 404},
		{"the owner reads none", "GET", "/api/repos/alice/app/branch-protections", f.aliceW, "", 200},
		{"a reader sets", "PUT", "/api/repos/alice/app/branch-protections", f.aliceR, rules, 403},
		{"another tenant sets", "PUT", "/api/repos/alice/app/branch-protections", f.carolW, rules, 404},
		{"the owner sets", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, rules, 200},
		{"an org member reads", "GET", "/api/repos/acme/lib/branch-protections", f.bobW, "", 200},
		{"an org member sets", "PUT", "/api/repos/acme/lib/branch-protections", f.bobW, rules, 403},
		{"an admin sets", "PUT", "/api/repos/acme/lib/branch-protections", f.admin, rules, 200},
		{"no rules field", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, `{}`, 400},
		{"a bad pattern", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, `{"rules":[{"pattern":"[x"}]}`, 400},
		{"no pattern", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, `{"rules":[{"pattern":""}]}`, 400},
		{"a pattern twice", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, `{"rules":[{"pattern":"a"},{"pattern":"a"}]}`, 400},
		{"a pattern no branch matches", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, `{"rules":[{"pattern":"a..b"}]}`, 400},
		{"a bad pusher", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, `{"rules":[{"pattern":"a","pushers":["no/such"]}]}`, 400},
	})
	var got branchRulesJSON
	f.do("GET", "/api/repos/alice/app/branch-protections", f.aliceW, "").json(t, &got)
	if len(got.Rules) != 2 || got.Rules[0].Pattern != "main" || !got.Rules[0].RequirePullRequest || got.Rules[1].Pushers[0] != "bob" {
		t.Fatalf("after the bad requests: %+v", got.Rules)
	}
	f.run([]step{{"the owner removes them", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW, `{"rules":[]}`, 200}})
	f.do("GET", "/api/repos/alice/app/branch-protections", f.aliceW, "").json(t, &got)
	if len(got.Rules) != 0 {
		t.Fatalf("after removing: %+v", got.Rules)
	}
}

// The API shows require_last_push_approval as it applies: on where a
// rule requires approvals and does not say, as set where it does, absent
// where no approval is required (docs/adr/0134-last-push-approval.md).
func TestBranchRulesLastPushApproval(t *testing.T) {
	f := newFixture(t)
	if _, err := f.s.CreateRepo(context.Background(), "alice", "app", false); err != nil {
		t.Fatal(err)
	}
	f.run([]step{{"the owner sets", "PUT", "/api/repos/alice/app/branch-protections", f.aliceW,
		`{"rules":[{"pattern":"main","required_approvals":1},{"pattern":"dev","required_approvals":2,"require_last_push_approval":false},{"pattern":"x"}]}`, 200}})
	var got branchRulesJSON
	f.do("GET", "/api/repos/alice/app/branch-protections", f.aliceW, "").json(t, &got)
	shown := func(i int) string {
		if p := got.Rules[i].RequireLastPushApproval; p != nil {
			return fmt.Sprint(*p)
		}
		return "absent"
	}
	if len(got.Rules) != 3 || shown(0) != "true" || shown(1) != "false" || shown(2) != "absent" {
		t.Fatalf("rules %+v: shown %s, %s, %s", got.Rules, shown(0), shown(1), shown(2))
	}
}
