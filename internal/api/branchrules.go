package api

import (
	"fmt"
	"net/http"

	"github.com/ghost-scm/ghost/internal/meta"
)

// Protected branches (docs/adr/0123-protected-branches.md): the whole
// list of a repository's rules, read by its writers and replaced by its
// admins.

func (h *handler) routeBranchRules() {
	h.route("GET /api/repos/{owner}/{name}/branch-protections", h.getBranchRules)
	h.route("PUT /api/repos/{owner}/{name}/branch-protections", h.putBranchRules)
}

// branchRulesJSON is the body of both: {"rules": [...]}.
type branchRulesJSON struct {
	Rules []meta.BranchRule `json:"rules"`
}

func (h *handler) getBranchRules(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	repo, err := h.writable(r, p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rulesJSON(repo.BranchRules), nil
}

// putBranchRules replaces the rules with the body's ({"rules": []}
// removes them all).
func (h *handler) putBranchRules(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	repo, err := h.writable(r, p)
	if err != nil {
		return 0, nil, err
	}
	if !h.store.CanAdminRepo(p, repo) {
		return 0, nil, fmt.Errorf("%w: the branch rules of %s are changed by its owner or an admin", meta.ErrForbidden, repo.FullName())
	}
	var req struct {
		Rules *[]meta.BranchRule `json:"rules"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	if req.Rules == nil {
		return 0, nil, fmt.Errorf("%w: want {\"rules\": [{\"pattern\": \"main\", ...}]} ({\"rules\": []} removes them)", meta.ErrInvalidArgument)
	}
	if err := h.store.SetBranchRules(r.Context(), repo.Owner, repo.Name, *req.Rules); err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "repository branch rules changed", "repo", repo.FullName(), "rules", len(*req.Rules), "by", p.Tenant, "token_id", p.TokenID)
	if repo, err = h.store.Repo(r.Context(), repo.Owner, repo.Name); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rulesJSON(repo.BranchRules), nil
}

// rulesJSON is rules as the API shows them: [] for none, and each rule's
// require_last_push_approval as it applies (on where approvals are
// required and the rule does not say), not as stored.
func rulesJSON(rules []meta.BranchRule) branchRulesJSON {
	out := make([]meta.BranchRule, len(rules))
	for i, r := range rules {
		out[i] = r
		if r.RequiredApprovals > 0 {
			on := r.LastPushApproval()
			out[i].RequireLastPushApproval = &on
		}
	}
	return branchRulesJSON{out}
}
