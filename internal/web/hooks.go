package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/client"
)

// A repository's webhooks page, for writers (docs/adr/0105-webhook-delivery.md):
// its hooks, a form to add one, and a hook's latest deliveries with
// their requests and answers and a button to send one again. As every
// form here (docs/adr/0103-web-ui-forms.md), each change is one API call
// with the visitor's token, behind the session's CSRF check; the secret
// is typed once and never shown.

// hookEvents are the events the form offers, in GitHub's names.
var hookEvents = []string{"push", "create", "delete", "repository", "secret_scanning_alert", "scan_run", "pull_request", "issue_comment", "pull_request_review", "pull_request_review_comment"}

// hooksPage is the page's data.
type hooksPage struct {
	Hooks  []client.Hook
	Events []string
	// Form holds what was typed when adding failed.
	Form struct {
		URL     string
		Events  []string
		Checked map[string]bool
	}
	// Shown is the hook whose deliveries are listed, and Delivery one of
	// them opened whole.
	Shown      *client.Hook
	Deliveries []client.Delivery
	Delivery   *client.Delivery
	Pretty     string // the opened delivery's payload, indented
}

// hookNotices are the fixed texts a redirect after a change shows.
var hookNotices = map[string]string{
	"added":       "The webhook was added; its ping is on its way.",
	"removed":     "The webhook was removed.",
	"pinged":      "A ping is on its way.",
	"redelivered": "The delivery is on its way again.",
	"saved":       "The webhook was saved.",
}

func hooksURL(owner, name string) string {
	return "/" + urlSegment(owner) + "/" + urlSegment(name) + "/-/hooks"
}

func (h *Handler) hooks(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showHooks(w, r, v, http.StatusOK, hooksPage{}, hookNotices[r.URL.Query().Get("done")])
}

func (h *Handler) showHooks(w http.ResponseWriter, r *http.Request, v *visitor, status int, d hooksPage, notice string) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	target := rv.Owner + "/" + rv.Name
	c := h.api(v)
	ctx := r.Context()
	if d.Hooks, err = c.ListHooks(ctx, target); err != nil {
		return apiError(err)
	}
	d.Events = hookEvents
	d.Form.Checked = map[string]bool{}
	for _, e := range d.Form.Events {
		d.Form.Checked[e] = true
	}
	if len(d.Form.Events) == 0 {
		d.Form.Checked["push"] = true
	}
	if s := r.URL.Query().Get("hook"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			for i := range d.Hooks {
				if d.Hooks[i].ID == id {
					d.Shown = &d.Hooks[i]
				}
			}
		}
		if d.Shown == nil {
			return errNotFound
		}
		if d.Deliveries, err = c.HookDeliveries(ctx, target, id, 0); err != nil {
			return apiError(err)
		}
		if did := r.URL.Query().Get("delivery"); did != "" {
			dl, err := c.HookDelivery(ctx, target, id, did)
			if err != nil {
				return apiError(err)
			}
			d.Delivery = &dl
			if dl.Request != nil {
				var b bytes.Buffer
				if json.Indent(&b, dl.Request.Payload, "", "  ") == nil {
					d.Pretty = b.String()
				}
			}
		}
	}
	h.show(w, r, v, status, "hooks", page{Title: "Webhooks · " + rv.FullName(), Repo: rv, Tab: "hooks", Notice: notice, Data: d})
	return nil
}

func (h *Handler) addHook(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	u := strings.TrimSpace(r.PostFormValue("url"))
	secret := r.PostFormValue("secret")
	var evs []string
	for _, e := range r.PostForm["events"] {
		if slices.Contains(hookEvents, e) && !slices.Contains(evs, e) {
			evs = append(evs, e)
		}
	}
	ch := client.HookChange{Events: evs, Config: &client.HookConfigEdit{URL: &u}}
	if secret != "" {
		ch.Config.Secret = &secret
	}
	if r.PostFormValue("insecure_ssl") == "on" {
		one := "1"
		ch.Config.InsecureSSL = &one
	}
	if len(evs) == 0 {
		ch.Events = []string{"push"}
	}
	if _, err := h.api(v).CreateHook(r.Context(), owner+"/"+name, ch); err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status > 0 && ce.Status < 500 && ce.Status != http.StatusNotFound {
			// The form again, with what was typed (never the secret).
			d := hooksPage{}
			d.Form.URL, d.Form.Events = u, evs
			return h.showHooks(w, r, v, ce.Status, d, ce.Message)
		}
		return apiError(err)
	}
	http.Redirect(w, r, hooksURL(owner, name)+"?done=added", http.StatusSeeOther)
	return nil
}

// hookAction runs one change of one hook and goes back to the page.
func (h *Handler) hookAction(w http.ResponseWriter, r *http.Request, v *visitor, do func(c *client.Client, target string, id int64) error, done string, show bool) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return errNotFound
	}
	if err := do(h.api(v), owner+"/"+name, id); err != nil {
		return apiError(err)
	}
	to := hooksURL(owner, name) + "?done=" + done
	if show {
		to += "&hook=" + strconv.FormatInt(id, 10)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

func (h *Handler) removeHook(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.hookAction(w, r, v, func(c *client.Client, t string, id int64) error { return c.DeleteHook(r.Context(), t, id) }, "removed", false)
}

func (h *Handler) pingHook(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.hookAction(w, r, v, func(c *client.Client, t string, id int64) error { return c.PingHook(r.Context(), t, id) }, "pinged", true)
}

// toggleHook turns a hook on or off (a hook the dispatcher turned off is
// turned on here again, its failure count cleared).
func (h *Handler) toggleHook(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.hookAction(w, r, v, func(c *client.Client, t string, id int64) error {
		on := r.PostFormValue("active") == "on" // the form is read and checked by now
		_, err := c.UpdateHook(r.Context(), t, id, client.HookChange{Active: &on})
		return err
	}, "saved", false)
}

func (h *Handler) redeliverHook(w http.ResponseWriter, r *http.Request, v *visitor) error {
	did := r.PathValue("delivery")
	return h.hookAction(w, r, v, func(c *client.Client, t string, id int64) error { return c.Redeliver(r.Context(), t, id, did) }, "redelivered", true)
}
