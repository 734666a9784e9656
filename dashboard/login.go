package dashboard

import (
	"net/http"
	"strings"
)

type loginData struct {
	Next  string
	Error string
}

// safeNext keeps a post-login redirect on this dashboard: a local path
// the dashboard serves, never another host ("//evil", "/\evil").
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	path, _, _ := strings.Cut(next, "?")
	if !IsDashboardPath(path) || strings.HasPrefix(path, "/ui/login") {
		return "/"
	}
	return next
}

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.sessionOf(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	s.showLogin(w, r, http.StatusOK, safeNext(r.URL.Query().Get("next")), "")
}

// showLogin renders the form with a fresh login CSRF token, kept in a
// cookie for the double-submit check.
func (s *Server) showLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	tok := randomToken()
	s.setCookie(w, loginCookie, tok, 600)
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, status, "login", page{Title: "Log in", CSRF: tok, Data: loginData{Next: next, Error: msg}})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	next := safeNext(r.PostFormValue("next"))
	c, err := r.Cookie(s.cookieName(loginCookie))
	if err != nil || !sameToken(c.Value, r.PostFormValue("csrf")) {
		s.showLogin(w, r, http.StatusForbidden, next, "The login form expired; try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		s.showLogin(w, r, http.StatusUnauthorized, next, "Enter an admin token.")
		return
	}
	subject, err := s.cfg.Auth.VerifyAdmin(r.Context(), token)
	if err != nil {
		// The token itself is never logged.
		s.log.WarnContext(r.Context(), "dashboard login refused", "remote", r.RemoteAddr, "err", err)
		s.showLogin(w, r, http.StatusUnauthorized, next, "That is not a valid admin token.")
		return
	}
	id, _ := s.sessions.create(subject, s.now())
	s.setCookie(w, loginCookie, "", -1)
	s.setCookie(w, sessionCookie, id, 0)
	s.log.InfoContext(r.Context(), "dashboard login", "token_name", subject, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, rq request) {
	s.sessions.drop(rq.id)
	s.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
