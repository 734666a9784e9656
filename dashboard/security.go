package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// TokenVerifier checks an admin token; *httpapi.Server implements it, so
// the dashboard's login accepts exactly the tokens the API accepts.
type TokenVerifier interface {
	// VerifyAdmin returns the admin token's name, or an error for a token
	// that is unknown, not an admin token, or cannot be checked now.
	VerifyAdmin(ctx context.Context, token string) (string, error)
}

// contentSecurityPolicy allows nothing inline: scripts, styles and images
// come from this origin only, and the page cannot be framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every dashboard answer carries.
func (s *Server) securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	if s.secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
}

// session is one logged-in browser.
type session struct {
	subject string // the admin token's name
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions is the server-side session table. Sessions live in this
// process only: a restart or another replica asks the user to log in again.
type sessions struct {
	mu   sync.Mutex
	m    map[string]*session
	idle time.Duration // expiry after this long without a request
	max  time.Duration // expiry this long after login, whatever the use
}

// maxSessions bounds the table; the oldest session is dropped beyond it.
const maxSessions = 10_000

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24+
		// crashes the program rather than return an error).
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (t *sessions) create(subject string, now time.Time) (string, *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]*session)
	}
	t.expire(now)
	if len(t.m) >= maxSessions {
		var oldest string
		for id, s := range t.m {
			if oldest == "" || s.created.Before(t.m[oldest].created) {
				oldest = id
			}
		}
		delete(t.m, oldest)
	}
	id := randomToken()
	s := &session{subject: subject, csrf: randomToken(), created: now, seen: now}
	t.m[id] = s
	return id, s
}

// get returns the live session with this id and marks it used.
func (t *sessions) get(id string, now time.Time) (session, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[id]
	if !ok {
		return session{}, false
	}
	if now.Sub(s.seen) > t.idle || now.Sub(s.created) > t.max {
		delete(t.m, id)
		return session{}, false
	}
	s.seen = now
	return *s, true
}

func (t *sessions) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

func (t *sessions) expire(now time.Time) {
	for id, s := range t.m {
		if now.Sub(s.seen) > t.idle || now.Sub(s.created) > t.max {
			delete(t.m, id)
		}
	}
}

// Cookie names. Under TLS the __Host- prefix makes the browser insist on
// Secure, Path=/ and no Domain, so a sibling host cannot plant a cookie.
func (s *Server) cookieName(base string) string {
	if s.secure {
		return "__Host-" + base
	}
	return base
}

func (s *Server) setCookie(w http.ResponseWriter, base, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(base), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
}

const (
	sessionCookie = "gpubroker_session"
	// loginCookie carries the CSRF token of the login form (double submit):
	// there is no session yet to keep it in.
	loginCookie = "gpubroker_login"
)

// sessionOf returns the request's live session and its id.
func (s *Server) sessionOf(r *http.Request) (string, session, bool) {
	c, err := r.Cookie(s.cookieName(sessionCookie))
	if err != nil || c.Value == "" {
		return "", session{}, false
	}
	sess, ok := s.sessions.get(c.Value, s.now())
	return c.Value, sess, ok
}

// sameToken compares two CSRF tokens in constant time; empty never
// matches.
func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
