package oauth

import (
	"errors"
	"html"
	"net/http"
)

// CallbackPath is the path of the redirect URL on the redirect listener.
const CallbackPath = "/oauth/callback"

// ServeHTTP receives the browser's redirect at CallbackPath: it finds the
// pending authorization by its state parameter and completes it. An
// unknown state is refused and changes nothing.
func (m *Manager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != CallbackPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	f := m.flowByState(q.Get("state"))
	if f == nil {
		page(w, http.StatusBadRequest, "Unknown or expired authorization", "This link does not match an authorization mcpd is waiting for. Start again from the agent.")
		return
	}
	if err := f.complete(r.Context(), q); err != nil {
		if errors.Is(err, ErrUnreachable) {
			page(w, http.StatusBadGateway, "Authorization server unreachable", "mcpd could not reach the authorization server to finish the authorization. Reload this page to try again.")
			return
		}
		page(w, http.StatusBadRequest, "Authorization failed", err.Error())
		return
	}
	page(w, http.StatusOK, "Authorized", "mcpd can now reach "+f.sa.name+". You may close this window.")
}

func page(w http.ResponseWriter, code int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(code)
	_, _ = w.Write([]byte("<!doctype html><title>" + html.EscapeString(title) + "</title><h1>" +
		html.EscapeString(title) + "</h1><p>" + html.EscapeString(text) + "</p>\n"))
}
