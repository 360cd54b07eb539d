package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/meta"
)

// SSH key endpoints (docs/design.md §7.7):
//
//	POST   /api/tenants/{tenant}/keys                {"key": "ssh-ed25519 AAAA...", "title": "..."}
//	GET    /api/tenants/{tenant}/keys
//	DELETE /api/tenants/{tenant}/keys/{fingerprint}
//
// A fingerprint is "SHA256:" and base64, whose standard alphabet has '/'
// and '+'. In a URL, percent-encode it or write it in the URL-safe
// alphabet ('-' for '+', '_' for '/'): every response carries that form as
// "id". A raw '/' mostly works too, but "//" is cleaned away by the router.

type sshKeyJSON struct {
	ID          string    `json:"id"` // the fingerprint in URL-safe base64, for URLs
	Tenant      string    `json:"tenant"`
	Title       string    `json:"title"`
	Fingerprint string    `json:"fingerprint"`
	Type        string    `json:"type"`
	PublicKey   string    `json:"public_key"`
	CreatedAt   time.Time `json:"created_at"`
}

func toSSHKey(k meta.SSHKey) sshKeyJSON {
	id := strings.NewReplacer("+", "-", "/", "_").Replace(k.Fingerprint)
	return sshKeyJSON{ID: id, Tenant: k.Tenant, Title: k.Title, Fingerprint: k.Fingerprint, Type: k.Type, PublicKey: k.PublicKey, CreatedAt: k.CreatedAt}
}

// addSSHKey registers a key. A key acts as a write token, so adding one
// is minting a write credential: an admin, or the tenant itself with a
// write token (canMint; docs/adr/0026-self-service-credentials.md).
func (h *handler) addSSHKey(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	if err := canMint(p, r.PathValue("tenant"), meta.ScopeWrite); err != nil {
		return 0, nil, err
	}
	var req struct {
		Key   string `json:"key"`
		Title string `json:"title"` // default: the key's comment
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	k, err := h.store.AddSSHKey(r.Context(), r.PathValue("tenant"), req.Title, []byte(req.Key))
	if err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "ssh key added", "tenant", k.Tenant, "fingerprint", k.Fingerprint, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusCreated, toSSHKey(k), nil
}

// listSSHKeys: the tenant itself or an admin, as for tokens.
func (h *handler) listSSHKeys(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	tenant := r.PathValue("tenant")
	if !p.IsAdmin() && !sameTenant(p, tenant) {
		return 0, nil, fmt.Errorf("%w: only the tenant itself or an admin may list its ssh keys", meta.ErrForbidden)
	}
	keys, err := h.store.ListSSHKeys(r.Context(), tenant)
	if err != nil {
		return 0, nil, err
	}
	out := make([]sshKeyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, toSSHKey(k))
	}
	return http.StatusOK, out, nil
}

// removeSSHKey: an admin, or the tenant itself with a write-scope token.
// Removing only takes access away, so the tenant need not ask an
// operator to drop a lost key; a read token (a CI clone token, say) may
// not change credentials.
func (h *handler) removeSSHKey(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if err := requireAuth(p); err != nil {
		return 0, nil, err
	}
	tenant, fp := r.PathValue("tenant"), r.PathValue("fingerprint")
	if !p.IsAdmin() && !(sameTenant(p, tenant) && p.Scope >= meta.ScopeWrite) {
		return 0, nil, fmt.Errorf("%w: only the tenant itself (with a write token) or an admin may remove its ssh keys", meta.ErrForbidden)
	}
	if err := h.store.RemoveSSHKey(r.Context(), tenant, fp); err != nil {
		return 0, nil, err
	}
	h.log.InfoContext(r.Context(), "ssh key removed", "tenant", tenant, "fingerprint", fp, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusNoContent, nil, nil
}
