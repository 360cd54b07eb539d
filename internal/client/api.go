package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// User is who a token is (GET /api/user).
type User struct {
	Tenant  string `json:"tenant"`
	Kind    string `json:"kind,omitempty"`
	Scope   string `json:"scope"`
	TokenID string `json:"token_id,omitempty"`
}

// Tenant is a user or an organization.
type Tenant struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

// Token is an access token; Token holds the secret only in the answer
// that created it.
type Token struct {
	Token       string    `json:"token,omitempty"`
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Scope       string    `json:"scope"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
}

// SSHKey is a tenant's SSH public key. ID is the fingerprint in URL-safe
// base64, the form paths take.
type SSHKey struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Title       string    `json:"title"`
	Fingerprint string    `json:"fingerprint"`
	Type        string    `json:"type"`
	PublicKey   string    `json:"public_key"`
	CreatedAt   time.Time `json:"created_at"`
}

// Repo is a repository.
type Repo struct {
	ID               string    `json:"id"`
	Owner            string    `json:"owner"`
	Name             string    `json:"name"`
	FullName         string    `json:"full_name"`
	Public           bool      `json:"public"`
	CreatedAt        time.Time `json:"created_at"`
	ForkedFrom       string    `json:"forked_from,omitempty"`
	PushProtection   bool      `json:"push_protection"`
	AllowReplaceRefs bool      `json:"allow_replace_refs"`
	// DefaultBranch is the repository's default-branch setting; "" when
	// unset, and in lists, which do not carry it.
	DefaultBranch string `json:"default_branch,omitempty"`
	// The merge strategies its pull requests allow: set in the answers
	// about one repository, not in lists.
	AllowMergeCommit *bool `json:"allow_merge_commit,omitempty"`
	AllowSquashMerge *bool `json:"allow_squash_merge,omitempty"`
	AllowRebaseMerge *bool `json:"allow_rebase_merge,omitempty"`
	// AllowMissingLFS: pushes may name Git LFS objects the repository
	// does not hold (a mirror's); set in single answers.
	AllowMissingLFS *bool `json:"allow_missing_lfs,omitempty"`
	// LFSScanAfterPush: Git LFS objects too large for push protection's
	// budget are left to the scan run; set in single answers.
	LFSScanAfterPush *bool `json:"lfs_scan_after_push,omitempty"`
}

// RepoSettings changes a repository's settings: only the fields set.
type RepoSettings struct {
	Public           *bool `json:"public,omitempty"`
	PushProtection   *bool `json:"push_protection,omitempty"`
	AllowReplaceRefs *bool `json:"allow_replace_refs,omitempty"`
	// DefaultBranch, an existing branch without refs/heads/.
	DefaultBranch    *string `json:"default_branch,omitempty"`
	AllowMergeCommit *bool   `json:"allow_merge_commit,omitempty"`
	AllowSquashMerge *bool   `json:"allow_squash_merge,omitempty"`
	AllowRebaseMerge *bool   `json:"allow_rebase_merge,omitempty"`
	AllowMissingLFS  *bool   `json:"allow_missing_lfs,omitempty"`
	LFSScanAfterPush *bool   `json:"lfs_scan_after_push,omitempty"`
}

// AlertLocation is one place an alert's secret was found.
type AlertLocation struct {
	Commit    string    `json:"commit,omitempty"`
	Path      string    `json:"path"`
	Line      int       `json:"line"`
	Column    int       `json:"column,omitempty"`
	BlobID    string    `json:"blob_id"`
	Source    string    `json:"source,omitempty"`
	Ref       string    `json:"ref,omitempty"`
	Where     string    `json:"where"`
	RuleID    string    `json:"rule_id"`
	Match     string    `json:"match"`
	FirstSeen time.Time `json:"first_seen"`
	Seq       uint64    `json:"seq,omitempty"`
	RunID     string    `json:"run_id,omitempty"`
}

// AlertBypass is a push that went past push protection with the secret.
type AlertBypass struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Commit string    `json:"commit,omitempty"`
	Path   string    `json:"path,omitempty"`
	Line   int       `json:"line,omitempty"`
	Source string    `json:"source,omitempty"`
	Ref    string    `json:"ref,omitempty"`
}

// AlertEvent is a change of an alert's state.
type AlertEvent struct {
	At         time.Time `json:"at"`
	By         string    `json:"by"`
	State      string    `json:"state"`
	Resolution string    `json:"resolution,omitempty"`
	Comment    string    `json:"comment,omitempty"`
}

// Alert is a secret-scanning alert; never the secret itself.
type Alert struct {
	ID                 string          `json:"id"`
	Repository         string          `json:"repository"`
	RepoID             string          `json:"repo_id"`
	RuleID             string          `json:"rule_id"`
	Description        string          `json:"description,omitempty"`
	Rules              []string        `json:"rules"`
	SecretRedacted     string          `json:"secret_redacted"`
	State              string          `json:"state"`
	Resolution         string          `json:"resolution,omitempty"`
	ResolvedBy         string          `json:"resolved_by,omitempty"`
	ResolvedAt         *time.Time      `json:"resolved_at,omitempty"`
	ResolutionComment  string          `json:"resolution_comment,omitempty"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
	Locations          []AlertLocation `json:"locations"`
	LocationsCount     int             `json:"locations_count"`
	LocationsNextPage  int             `json:"locations_next_page,omitempty"`
	LocationsTruncated bool            `json:"locations_truncated,omitempty"`
	Bypasses           []AlertBypass   `json:"push_protection_bypasses,omitempty"`
	History            []AlertEvent    `json:"history,omitempty"`
	Revealable         bool            `json:"revealable"`
}

// AlertPage is a page of alerts; NextPage continues the list.
type AlertPage struct {
	Alerts   []Alert `json:"alerts"`
	NextPage string  `json:"next_page,omitempty"`
}

// AlertFilter narrows a list of alerts.
type AlertFilter struct {
	State   string // open, resolved, all or ""
	Rule    string
	Repo    string // the tenant-wide list only: one repository's name
	Page    string // the previous page's NextPage
	PerPage int
}

func (f AlertFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"state": f.State, "rule": f.Rule, "repo": f.Repo, "page": f.Page} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.PerPage > 0 {
		q.Set("per_page", strconv.Itoa(f.PerPage))
	}
	return q
}

// AlertChange changes an alert's state: {State: "resolved", Resolution:
// "revoked"} or {State: "open"}.
type AlertChange struct {
	State      string `json:"state"`
	Resolution string `json:"resolution,omitempty"`
	Comment    string `json:"comment,omitempty"`
}

// ParkedShard is a shard of a scan run parked after repeated failures.
type ParkedShard struct {
	Shard  string `json:"shard"`
	Reason string `json:"reason"`
}

// Scan is a secret-scanning run and its progress.
type Scan struct {
	ID             string        `json:"id"`
	RunID          string        `json:"run_id"`
	Repository     string        `json:"repository"`
	Kind           string        `json:"kind"`
	Seq            uint64        `json:"seq"`
	State          string        `json:"state"`
	CreatedAt      time.Time     `json:"created_at"`
	ShardsDone     int           `json:"shards_done"`
	ShardsTotal    int           `json:"shards_total"`
	ShardsLeased   int           `json:"shards_leased"`
	Parked         []ParkedShard `json:"parked_shards,omitempty"`
	Blobs          int64         `json:"blobs_scanned"`
	Bytes          int64         `json:"bytes_scanned"`
	Findings       int64         `json:"findings"`
	Covered        float64       `json:"covered"`
	BytesPerSecond float64       `json:"bytes_per_second"`
	ETASeconds     float64       `json:"eta_seconds,omitempty"`
}

// ScanLag says how far a repository's scans trail its pushes.
type ScanLag struct {
	Head                uint64     `json:"head_seq"`
	ScannedThrough      uint64     `json:"scanned_through_seq"`
	Pending             uint64     `json:"pending_pushes"`
	OldestPendingPushAt *time.Time `json:"oldest_pending_push_at,omitempty"`
}

// ScanList is a repository's newest scan runs and its scan lag.
type ScanList struct {
	Scans []Scan  `json:"scans"`
	Lag   ScanLag `json:"lag"`
}

func repoPath(owner, name string) string { return "/api/repos/" + owner + "/" + name }

// keyID is a fingerprint in the form a path takes.
func keyID(fp string) string { return strings.NewReplacer("+", "-", "/", "_").Replace(fp) }

// User returns who the client's token is.
func (c *Client) User(ctx context.Context) (User, error) {
	var u User
	_, err := c.do(ctx, http.MethodGet, "/api/user", nil, nil, &u)
	return u, err
}

// CreateTenant creates a user ("user") or an organization ("org").
func (c *Client) CreateTenant(ctx context.Context, name, kind string) (Tenant, error) {
	var t Tenant
	_, err := c.do(ctx, http.MethodPost, "/api/tenants", nil, map[string]string{"name": name, "kind": kind}, &t)
	return t, err
}

// ListTenants lists every tenant (admin).
func (c *Client) ListTenants(ctx context.Context) ([]Tenant, error) {
	var ts []Tenant
	_, err := c.do(ctx, http.MethodGet, "/api/tenants", nil, nil, &ts)
	return ts, err
}

// ListTenantsPage returns up to n tenants (0: the server's page size) in
// name order after the name after, and the cursor of the next page (""
// after the last), from the Link header the server sends.
func (c *Client) ListTenantsPage(ctx context.Context, after string, n int) ([]Tenant, string, error) {
	var ts []Tenant
	next, err := c.page(ctx, "/api/tenants", after, n, &ts)
	return ts, next, err
}

// DeleteTenant deletes a tenant; force also deletes its repositories.
func (c *Client) DeleteTenant(ctx context.Context, name string, force bool) error {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	_, err := c.do(ctx, http.MethodDelete, "/api/tenants/"+name, q, nil, nil)
	return err
}

// AddMember makes user a member of org.
func (c *Client) AddMember(ctx context.Context, org, user string) error {
	_, err := c.do(ctx, http.MethodPost, "/api/tenants/"+org+"/members", nil, map[string]string{"user": user}, nil)
	return err
}

// RemoveMember takes user's membership of org away.
func (c *Client) RemoveMember(ctx context.Context, org, user string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/tenants/"+org+"/members/"+user, nil, nil, nil)
	return err
}

// CreateToken mints a token of scope (read, write, admin) for tenant;
// the answer holds its secret, shown this once.
func (c *Client) CreateToken(ctx context.Context, tenant, scope, description string) (Token, error) {
	var t Token
	_, err := c.do(ctx, http.MethodPost, "/api/tenants/"+tenant+"/tokens", nil, map[string]string{"scope": scope, "description": description}, &t)
	return t, err
}

// ListTokens lists a tenant's tokens, never their secrets.
func (c *Client) ListTokens(ctx context.Context, tenant string) ([]Token, error) {
	var ts []Token
	_, err := c.do(ctx, http.MethodGet, "/api/tenants/"+tenant+"/tokens", nil, nil, &ts)
	return ts, err
}

// RevokeToken revokes a token by id.
func (c *Client) RevokeToken(ctx context.Context, tenant, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/tenants/"+tenant+"/tokens/"+id, nil, nil, nil)
	return err
}

// AddSSHKey adds an SSH public key (one authorized_keys line) to tenant;
// title defaults to the key's comment.
func (c *Client) AddSSHKey(ctx context.Context, tenant, title, key string) (SSHKey, error) {
	var k SSHKey
	_, err := c.do(ctx, http.MethodPost, "/api/tenants/"+tenant+"/keys", nil, map[string]string{"key": key, "title": title}, &k)
	return k, err
}

// ListSSHKeys lists a tenant's SSH keys.
func (c *Client) ListSSHKeys(ctx context.Context, tenant string) ([]SSHKey, error) {
	var ks []SSHKey
	_, err := c.do(ctx, http.MethodGet, "/api/tenants/"+tenant+"/keys", nil, nil, &ks)
	return ks, err
}

// RemoveSSHKey removes a key by its fingerprint ("SHA256:...").
func (c *Client) RemoveSSHKey(ctx context.Context, tenant, fingerprint string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/tenants/"+tenant+"/keys/"+keyID(fingerprint), nil, nil, nil)
	return err
}

// ListRepos lists an owner's repositories that the caller may read.
func (c *Client) ListRepos(ctx context.Context, owner string) ([]Repo, error) {
	var rs []Repo
	_, err := c.do(ctx, http.MethodGet, "/api/repos/"+owner, nil, nil, &rs)
	return rs, err
}

// ListReposPage returns up to n of owner's repositories (0: the server's
// page size) in name order after the name after, and the cursor of the
// next page ("" after the last).
func (c *Client) ListReposPage(ctx context.Context, owner, after string, n int) ([]Repo, string, error) {
	var rs []Repo
	next, err := c.page(ctx, "/api/repos/"+owner, after, n, &rs)
	return rs, next, err
}

// page GETs one page of a list and returns the next page's cursor: the
// after parameter of its Link rel="next", as GitHub's API pages.
func (c *Client) page(ctx context.Context, path, after string, n int, out any) (string, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if n > 0 {
		q.Set("per_page", strconv.Itoa(n))
	}
	var h http.Header
	if _, err := c.doHeader(ctx, http.MethodGet, path, q, nil, out, &h); err != nil {
		return "", err
	}
	return nextCursor(h.Get("Link")), nil
}

// nextCursor returns the after parameter of the rel="next" link of a
// Link header, or "".
func nextCursor(link string) string {
	for _, part := range strings.Split(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil {
			return ""
		}
		return u.Query().Get("after")
	}
	return ""
}

// CreateRepo creates an empty repository.
func (c *Client) CreateRepo(ctx context.Context, owner, name string, public bool) (Repo, error) {
	var r Repo
	_, err := c.do(ctx, http.MethodPost, "/api/repos/"+owner, nil, map[string]any{"name": name, "public": public}, &r)
	return r, err
}

// Repo returns one repository.
func (c *Client) Repo(ctx context.Context, owner, name string) (Repo, error) {
	var r Repo
	_, err := c.do(ctx, http.MethodGet, repoPath(owner, name), nil, nil, &r)
	return r, err
}

// DeleteRepo deletes a repository.
func (c *Client) DeleteRepo(ctx context.Context, owner, name string) error {
	_, err := c.do(ctx, http.MethodDelete, repoPath(owner, name), nil, nil, nil)
	return err
}

// UpdateRepo changes the settings s sets and returns the repository.
func (c *Client) UpdateRepo(ctx context.Context, owner, name string, s RepoSettings) (Repo, error) {
	var r Repo
	_, err := c.do(ctx, http.MethodPatch, repoPath(owner, name), nil, s, &r)
	return r, err
}

// ForkRepo forks owner/name to dstOwner/dstName (empty: the caller's
// tenant, the source's name).
func (c *Client) ForkRepo(ctx context.Context, owner, name, dstOwner, dstName string) (Repo, error) {
	var r Repo
	_, err := c.do(ctx, http.MethodPost, repoPath(owner, name)+"/fork", nil, map[string]string{"owner": dstOwner, "name": dstName}, &r)
	return r, err
}

// ListAlerts returns a page of a repository's alerts.
func (c *Client) ListAlerts(ctx context.Context, owner, name string, f AlertFilter) (AlertPage, error) {
	var p AlertPage
	_, err := c.do(ctx, http.MethodGet, repoPath(owner, name)+"/alerts", f.query(), nil, &p)
	return p, err
}

// ListTenantAlerts returns a page of the alerts of a tenant's
// repositories.
func (c *Client) ListTenantAlerts(ctx context.Context, tenant string, f AlertFilter) (AlertPage, error) {
	var p AlertPage
	_, err := c.do(ctx, http.MethodGet, "/api/tenants/"+tenant+"/alerts", f.query(), nil, &p)
	return p, err
}

// Alert returns one alert, id whole or a unique prefix of at least 7 hex
// digits, with a page of its locations (1 for the first).
func (c *Client) Alert(ctx context.Context, owner, name, id string, locationsPage int) (Alert, error) {
	var a Alert
	q := url.Values{}
	if locationsPage > 1 {
		q.Set("locations_page", strconv.Itoa(locationsPage))
	}
	_, err := c.do(ctx, http.MethodGet, repoPath(owner, name)+"/alerts/"+id, q, nil, &a)
	return a, err
}

// UpdateAlert changes an alert's state.
func (c *Client) UpdateAlert(ctx context.Context, owner, name, id string, ch AlertChange) (Alert, error) {
	var a Alert
	_, err := c.do(ctx, http.MethodPatch, repoPath(owner, name)+"/alerts/"+id, nil, ch, &a)
	return a, err
}

// RevealAlert returns an alert's secret in clear; the server logs that it
// did.
func (c *Client) RevealAlert(ctx context.Context, owner, name, id string) (string, error) {
	var out struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	_, err := c.do(ctx, http.MethodPost, repoPath(owner, name)+"/alerts/"+id+"/reveal", nil, nil, &out)
	return out.Secret, err
}

// ListScans returns a repository's newest scan runs (at most perPage; 0
// for the server's page) and its scan lag.
func (c *Client) ListScans(ctx context.Context, owner, name string, perPage int) (ScanList, error) {
	var l ScanList
	q := url.Values{}
	if perPage > 0 {
		q.Set("per_page", strconv.Itoa(perPage))
	}
	_, err := c.do(ctx, http.MethodGet, repoPath(owner, name)+"/scans", q, nil, &l)
	return l, err
}

// StartScan starts a full-history scan; created is false when one at the
// repository's head was there already.
func (c *Client) StartScan(ctx context.Context, owner, name string) (s Scan, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, repoPath(owner, name)+"/scans", nil, nil, &s)
	return s, status == http.StatusCreated, err
}

// Scan returns one scan run by its id ("<seq>-full", "<seq>-push").
func (c *Client) Scan(ctx context.Context, owner, name, id string) (Scan, error) {
	var s Scan
	_, err := c.do(ctx, http.MethodGet, repoPath(owner, name)+"/scans/"+id, nil, nil, &s)
	return s, err
}

// RepoPage is a page of repositories; NextPage continues the list.
type RepoPage struct {
	Repos    []Repo `json:"repos"`
	NextPage string `json:"next_page,omitempty"`
}

// PublicRepos returns a page of every owner's public repositories, in
// name order (page: the previous NextPage; perPage 0: the server's).
func (c *Client) PublicRepos(ctx context.Context, page string, perPage int) (RepoPage, error) {
	var p RepoPage
	q := url.Values{}
	if page != "" {
		q.Set("page", page)
	}
	if perPage > 0 {
		q.Set("per_page", strconv.Itoa(perPage))
	}
	_, err := c.do(ctx, http.MethodGet, "/api/repos", q, nil, &p)
	return p, err
}

// UserOrgs lists the organizations the client's user belongs to.
func (c *Client) UserOrgs(ctx context.Context) ([]Tenant, error) {
	var ts []Tenant
	_, err := c.do(ctx, http.MethodGet, "/api/user/orgs", nil, nil, &ts)
	return ts, err
}

// BranchRule protects the branches whose names match Pattern
// (docs/adr/0123-protected-branches.md): see the server's meta.BranchRule.
type BranchRule struct {
	Pattern            string   `json:"pattern"`
	RequirePullRequest bool     `json:"require_pull_request,omitempty"`
	AllowForcePushes   bool     `json:"allow_force_pushes,omitempty"`
	AllowDeletions     bool     `json:"allow_deletions,omitempty"`
	Pushers            []string `json:"pushers,omitempty"`
	// RequiredApprovals and DismissStaleApprovals: see
	// docs/adr/0127-pull-request-reviews.md.
	RequiredApprovals     int  `json:"required_approvals,omitempty"`
	DismissStaleApprovals bool `json:"dismiss_stale_approvals,omitempty"`
	// RequireLastPushApproval: nil is on where approvals are required
	// (docs/adr/0134-last-push-approval.md).
	RequireLastPushApproval *bool `json:"require_last_push_approval,omitempty"`
}

// BranchRules returns owner/name's branch rules.
func (c *Client) BranchRules(ctx context.Context, owner, name string) ([]BranchRule, error) {
	var out struct {
		Rules []BranchRule `json:"rules"`
	}
	_, err := c.do(ctx, http.MethodGet, repoPath(owner, name)+"/branch-protections", nil, nil, &out)
	return out.Rules, err
}

// SetBranchRules replaces owner/name's branch rules (none: no protected
// branch) and returns them as stored.
func (c *Client) SetBranchRules(ctx context.Context, owner, name string, rules []BranchRule) ([]BranchRule, error) {
	if rules == nil {
		rules = []BranchRule{}
	}
	var out struct {
		Rules []BranchRule `json:"rules"`
	}
	_, err := c.do(ctx, http.MethodPut, repoPath(owner, name)+"/branch-protections", nil, map[string]any{"rules": rules}, &out)
	return out.Rules, err
}
