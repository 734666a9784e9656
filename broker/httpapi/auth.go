package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/store"
)

// tokenPrefix marks gpubroker tokens so secret scanners can find leaked
// ones; it carries no meaning for authentication.
const tokenPrefix = "gpb_"

// NewToken returns a fresh random bearer token (256 bits) and the hash to
// store. Only the hash is ever persisted.
func NewToken() (token, hash string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken is the stored form of a token: hex SHA-256. Tokens are random
// 256-bit values, so a plain hash (no salt, no KDF) cannot be brute-forced.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// principal is who a request authenticated as.
type principal struct {
	kind    string // store.TokenAdmin or store.TokenAgent
	subject string // the agent's instance id, or the admin token's name
}

type principalKey struct{}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// authenticate resolves the request's bearer token. It returns a status and
// message when the request must be refused with 401.
func (s *Server) authenticate(r *http.Request) (principal, int, string) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return principal{}, http.StatusUnauthorized, "missing bearer token; send Authorization: Bearer <token>"
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return principal{}, http.StatusUnauthorized, "Authorization header must be \"Bearer <token>\""
	}
	return s.verify(r.Context(), tok)
}

// ErrBadToken is returned by VerifyAdmin for a token that is unknown or is
// not an admin token.
var ErrBadToken = errors.New("invalid token")

// VerifyAdmin checks an admin token exactly as the API's bearer auth does
// (hash lookup, constant-time compare, the short-lived cache) and returns
// the token's name. The dashboard's login uses it. It returns ErrBadToken
// for an unknown or non-admin token and another error when the store
// cannot be asked.
func (s *Server) VerifyAdmin(ctx context.Context, token string) (string, error) {
	p, status, msg := s.verify(ctx, token)
	switch {
	case status == http.StatusUnauthorized:
		return "", ErrBadToken
	case status != 0:
		return "", errors.New(msg)
	case p.kind != store.TokenAdmin:
		return "", ErrBadToken
	}
	return p.subject, nil
}

// verify resolves a bearer token to its principal.
func (s *Server) verify(ctx context.Context, tok string) (principal, int, string) {
	hash := HashToken(strings.TrimSpace(tok))
	if p, ok := s.tokens.get(hash, s.now()); ok {
		return p, 0, ""
	}
	rec, err := s.store.LookupToken(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return principal{}, http.StatusUnauthorized, "invalid token"
	}
	if err != nil {
		s.log.ErrorContext(ctx, "looking up token", "err", err)
		return principal{}, http.StatusServiceUnavailable, "cannot check the token now; retry"
	}
	// The lookup is by hash, so this comparison is redundant with the
	// index match; it keeps the final decision constant-time should the
	// store ever match loosely (e.g. a case-insensitive collation).
	if subtle.ConstantTimeCompare([]byte(rec.Hash), []byte(hash)) != 1 {
		return principal{}, http.StatusUnauthorized, "invalid token"
	}
	p := principal{kind: rec.Kind, subject: rec.Subject}
	s.tokens.put(hash, p, s.now())
	return p, 0, ""
}

// tokenCache remembers recently verified tokens for a short time, so a
// heartbeat costs one database write and no read. Only successful lookups
// are cached (random bad tokens cannot fill it). A token rotated by a
// re-register on this replica is dropped at once; on other replicas it
// stays valid for at most tokenCacheTTL (longer than the heartbeat
// interval, so steady heartbeats hit the cache).
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedPrincipal
}

type cachedPrincipal struct {
	p       principal
	expires time.Time
}

const (
	tokenCacheTTL  = time.Minute
	tokenCacheSize = 200_000
)

func (c *tokenCache) get(hash string, now time.Time) (principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if !ok || now.After(e.expires) {
		return principal{}, false
	}
	return e.p, true
}

func (c *tokenCache) put(hash string, p principal, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= tokenCacheSize {
		c.m = make(map[string]cachedPrincipal)
	}
	c.m[hash] = cachedPrincipal{p: p, expires: now.Add(tokenCacheTTL)}
}

// dropSubject forgets every cached agent token of one instance.
func (c *tokenCache) dropSubject(subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, e := range c.m {
		if e.p.kind == store.TokenAgent && e.p.subject == subject {
			delete(c.m, h)
		}
	}
}

// access says who may call a route.
type access int

const (
	public     access = iota // no token (health, metrics)
	adminOnly                // admin tokens
	agentOwner               // the agent whose {id} is in the path, or an admin
	bootstrap                // bootstrap tokens (register only), or an admin
)

func (s *Server) authorize(a access, next http.HandlerFunc) http.HandlerFunc {
	if a == public {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		p, status, msg := s.authenticate(r)
		if status != 0 {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gpubroker"`)
				writeError(w, status, codeUnauthorized, msg)
				return
			}
			writeError(w, status, codeUnavailable, msg)
			return
		}
		switch {
		case p.kind == store.TokenAdmin:
		case a == bootstrap && p.kind == store.TokenBootstrap:
		case a == agentOwner && p.kind == store.TokenAgent:
			if id := r.PathValue("id"); subtle.ConstantTimeCompare([]byte(id), []byte(p.subject)) != 1 {
				writeError(w, http.StatusForbidden, codeForbidden, "this agent token may only report for its own instance")
				return
			}
		default:
			writeError(w, http.StatusForbidden, codeForbidden, "this route needs an admin token")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

type tokenBody struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// createToken issues an admin token (for a user or tool) or a bootstrap
// token (for agents' cloud-init, good only for registering). The token is
// in this answer only.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var b tokenBody
	if err := decodeJSON(w, r, 4<<10, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.Kind != store.TokenAdmin && b.Kind != store.TokenBootstrap {
		s.fail(w, r, badf("kind %q is not valid; use admin or bootstrap", b.Kind))
		return
	}
	if err := checkName("name", b.Name); err != nil {
		s.fail(w, r, err)
		return
	}
	tok, hash, err := NewToken()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.AddToken(r.Context(), store.TokenRecord{Hash: hash, Kind: b.Kind, Subject: b.Name, CreatedAt: s.now().UTC()}); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "token created", "kind", b.Kind, "name", b.Name, "by", principalFrom(r.Context()).subject)
	writeJSON(w, http.StatusCreated, map[string]string{"kind": b.Kind, "name": b.Name, "token": tok})
}
