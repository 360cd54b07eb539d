package web

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/meta"
)

// The visitor's own pages: signing in and out, access tokens and SSH
// keys.

// safeNext returns where to go after signing in: a local path only.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return ""
	}
	// Browsers drop tabs and newlines from URLs: "/\t/evil.example" is
	// "//evil.example" to them.
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return ""
		}
	}
	return next
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request, v *visitor) error {
	h.show(w, r, v, http.StatusOK, "login", page{Title: "Sign in", Data: safeNext(r.URL.Query().Get("next"))})
	return nil
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request, v *visitor) error {
	next := safeNext(r.PostFormValue("next"))
	token := strings.TrimSpace(r.PostFormValue("token"))
	p, err := h.opts.Auth.Authenticate(r.Context(), token)
	if errors.Is(err, meta.ErrUnauthenticated) {
		h.show(w, r, v, http.StatusUnauthorized, "login", page{Title: "Sign in", Notice: "That token is not valid.", Data: next})
		return nil
	}
	if err != nil {
		return classify("authenticate", err)
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: h.keys.seal(token, h.opts.Now().Add(sessionLifetime)), Path: "/",
		MaxAge: int(sessionLifetime.Seconds()), HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode,
	})
	h.opts.Logger.InfoContext(r.Context(), "web: signed in", "tenant", p.Tenant, "token_id", p.TokenID)
	if next == "" {
		next = "/" // the dashboard: the visitor's repositories and their orgs'
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, v *visitor) error {
	h.clearSession(w, r)
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// tokensPage is the visitor's tokens, and a token just made, shown once.
type tokensPage struct {
	Tokens  []client.Token
	Created *client.Token
	Current string // the id of the token this session uses
}

func (h *Handler) tokens(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showTokens(w, r, v, http.StatusOK, nil, noticeOf(r))
}

func (h *Handler) showTokens(w http.ResponseWriter, r *http.Request, v *visitor, status int, created *client.Token, notice string) error {
	toks, err := h.api(v).ListTokens(r.Context(), v.p.Tenant)
	if err != nil {
		return apiError(err)
	}
	h.show(w, r, v, status, "tokens", page{Title: "Access tokens", Notice: notice, Data: tokensPage{Tokens: toks, Created: created, Current: v.p.TokenID}})
	return nil
}

func (h *Handler) createToken(w http.ResponseWriter, r *http.Request, v *visitor) error {
	scope := r.PostFormValue("scope")
	if !slices.Contains([]string{"read", "write"}, scope) {
		return &httpError{status: http.StatusBadRequest, msg: "A token's scope is read or write here; admin tokens come from the command line."}
	}
	tok, err := h.api(v).CreateToken(r.Context(), v.p.Tenant, scope, strings.TrimSpace(r.PostFormValue("description")))
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status > 0 && ce.Status < 500 {
			return h.showTokens(w, r, v, ce.Status, nil, ce.Message)
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: token created", "tenant", tok.Tenant, "id", tok.ID, "scope", tok.Scope, "by_token", v.p.TokenID)
	// Shown on this answer only: not a redirect, and never cached.
	return h.showTokens(w, r, v, http.StatusCreated, &tok, "")
}

func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request, v *visitor) error {
	if err := h.api(v).RevokeToken(r.Context(), v.p.Tenant, r.PathValue("id")); err != nil {
		return apiError(err)
	}
	if r.PathValue("id") == v.p.TokenID {
		// The session's own token: the visitor is signed out with it.
		h.clearSession(w, r)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	http.Redirect(w, r, "/-/settings/tokens?done=revoked", http.StatusSeeOther)
	return nil
}

// keysPage is the visitor's SSH keys.
type keysPage struct {
	Keys  []client.SSHKey
	Title string
	Key   string
}

func (h *Handler) sshKeys(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showKeys(w, r, v, http.StatusOK, keysPage{}, noticeOf(r))
}

func (h *Handler) showKeys(w http.ResponseWriter, r *http.Request, v *visitor, status int, d keysPage, notice string) error {
	keys, err := h.api(v).ListSSHKeys(r.Context(), v.p.Tenant)
	if err != nil {
		return apiError(err)
	}
	d.Keys = keys
	h.show(w, r, v, status, "keys", page{Title: "SSH keys", Notice: notice, Data: d})
	return nil
}

func (h *Handler) addKey(w http.ResponseWriter, r *http.Request, v *visitor) error {
	d := keysPage{Title: strings.TrimSpace(r.PostFormValue("title")), Key: strings.TrimSpace(r.PostFormValue("key"))}
	if _, err := h.api(v).AddSSHKey(r.Context(), v.p.Tenant, d.Title, d.Key); err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status > 0 && ce.Status < 500 {
			return h.showKeys(w, r, v, ce.Status, d, ce.Message)
		}
		return apiError(err)
	}
	http.Redirect(w, r, "/-/settings/keys?done=added", http.StatusSeeOther)
	return nil
}

func (h *Handler) removeKey(w http.ResponseWriter, r *http.Request, v *visitor) error {
	if err := h.api(v).RemoveSSHKey(r.Context(), v.p.Tenant, r.PathValue("id")); err != nil {
		return apiError(err)
	}
	http.Redirect(w, r, "/-/settings/keys?done=removed", http.StatusSeeOther)
	return nil
}
