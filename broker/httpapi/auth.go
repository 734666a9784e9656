package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/store"
)

// NewToken returns a fresh random bearer token and the hash to store
// (store.NewToken).
func NewToken() (token, hash string, err error) { return store.NewToken() }

// HashToken is the stored form of a token (store.HashToken).
func HashToken(token string) string { return store.HashToken(token) }

// principal is who a request authenticated as.
type principal struct {
	kind    string // one of the store.Token* kinds
	subject string // the instance of an agent or registration token, the name of the others
	hash    string
	expires time.Time
}

func (p principal) record() store.TokenRecord {
	return store.TokenRecord{Hash: p.hash, Kind: p.kind, Subject: p.subject, ExpiresAt: p.expires}
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
	now := s.now()
	s.syncRevocations(ctx, now)
	if p, ok := s.tokens.get(hash, now); ok {
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
	if rec.Expired(now) {
		return principal{}, http.StatusUnauthorized, "token expired"
	}
	p := principal{kind: rec.Kind, subject: rec.Subject, hash: hash, expires: rec.ExpiresAt}
	s.tokens.put(hash, p, now)
	return p, 0, ""
}

// tokenCache remembers recently verified tokens for a short time, so a
// heartbeat costs one database write and no read. Only successful lookups
// are cached (random bad tokens cannot fill it). A token revoked, used
// (registration) or rotated by a re-register on this replica is dropped at
// once; other replicas drop it when they next read the revocation log
// (every poll interval), and at the latest when the cache TTL runs out
// (Config.TokenCacheTTL, default DefaultTokenCacheTTL: longer than the
// heartbeat interval, so steady heartbeats hit the cache). No entry
// outlives the token's own expiry.
type tokenCache struct {
	ttl  time.Duration
	poll time.Duration
	mu   sync.Mutex
	m    map[string]cachedPrincipal
	// The revocation log: the last entry applied and when it was read.
	syncing   bool
	revID     int64
	revPolled time.Time
}

type cachedPrincipal struct {
	p       principal
	expires time.Time
}

// DefaultTokenCacheTTL is how long a verified token is trusted without a
// store read: longer than the heartbeat interval, so steady heartbeats
// cost no token reads.
const DefaultTokenCacheTTL = time.Minute

// DefaultRevocationPoll is how often a replica reads the revocation log:
// the bound on how long a revoked token keeps working anywhere.
const DefaultRevocationPoll = 2 * time.Second

// syncRevocations drops tokens revoked on any replica from this replica's
// cache. One request per poll interval reads the log (others go on with
// the cache as it is); a failed read is retried at the next interval and
// the cache TTL stays the backstop.
func (s *Server) syncRevocations(ctx context.Context, now time.Time) {
	c := &s.tokens
	c.mu.Lock()
	if c.syncing || now.Sub(c.revPolled) < c.poll {
		c.mu.Unlock()
		return
	}
	c.syncing = true
	after := c.revID
	c.mu.Unlock()
	hashes, last, err := s.store.RevokedTokensSince(ctx, after)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncing = false
	c.revPolled = now
	if err != nil {
		s.log.WarnContext(ctx, "reading the token revocation log", "err", err)
		return
	}
	for _, h := range hashes {
		delete(c.m, h)
	}
	c.revID = last
}

const tokenCacheSize = 200_000

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
	exp := now.Add(c.ttl)
	if !p.expires.IsZero() && p.expires.Before(exp) {
		exp = p.expires
	}
	c.m[hash] = cachedPrincipal{p: p, expires: exp}
}

// drop forgets one token.
func (c *tokenCache) drop(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, hash)
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
	bootstrap                // bootstrap and registration tokens (register only), or an admin
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
		case a == bootstrap && (p.kind == store.TokenBootstrap || p.kind == store.TokenRegistration):
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

// maxTokenTTL bounds ttl_seconds (a year).
const maxTokenTTL = 365 * 24 * time.Hour

// DefaultRegistrationTTL is a registration token's life when the request
// gives none.
const DefaultRegistrationTTL = time.Hour

// createToken issues an admin token (for a user or tool), a bootstrap
// token (for agents' cloud-init, good only for registering new instances)
// or a registration token (one instance, once). The secret is in this
// answer only.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var b apiv1.TokenInput
	if err := decodeJSON(w, r, 4<<10, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	subject, ttl, err := validateTokenInput(b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tok, hash, err := NewToken()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now().UTC()
	rec := store.TokenRecord{Hash: hash, Kind: b.Kind, Subject: subject, CreatedAt: now}
	if ttl > 0 {
		rec.ExpiresAt = now.Add(ttl)
	}
	if err := s.store.AddToken(r.Context(), rec); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "token created", "kind", b.Kind, "subject", subject, "id", rec.ID(), "by", principalFrom(r.Context()).subject)
	writeJSON(w, http.StatusCreated, apiv1.TokenCreated{Token: apiToken(rec), Secret: tok})
}

// validateTokenInput checks a token request and returns the token's
// subject and lifetime.
func validateTokenInput(b apiv1.TokenInput) (subject string, ttl time.Duration, err error) {
	if b.TTLSeconds < 0 || b.TTLSeconds > int64(maxTokenTTL/time.Second) {
		return "", 0, badf("ttl_seconds %d must be between 0 and %d", b.TTLSeconds, int64(maxTokenTTL/time.Second))
	}
	ttl = time.Duration(b.TTLSeconds) * time.Second
	switch b.Kind {
	case store.TokenAdmin, store.TokenBootstrap:
		if b.InstanceID != "" {
			return "", 0, badf("instance_id binds registration tokens only; %s tokens have a name", b.Kind)
		}
		if err := checkName("name", b.Name); err != nil {
			return "", 0, err
		}
		return b.Name, ttl, nil
	case store.TokenRegistration:
		// Empty: one new instance, once (the id is not known before launch).
		if b.InstanceID != "" && !instanceIDRE.MatchString(b.InstanceID) {
			return "", 0, badf("instance_id %q is not valid; a registration token is bound to one instance id (or none: one new instance)", b.InstanceID)
		}
		if b.Name != "" {
			return "", 0, badf("a registration token is named by its instance_id; leave name out")
		}
		if ttl == 0 {
			ttl = DefaultRegistrationTTL
		}
		return b.InstanceID, ttl, nil
	}
	return "", 0, badf("kind %q is not valid; use admin, bootstrap or registration", b.Kind)
}

func apiToken(t store.TokenRecord) apiv1.Token {
	return apiv1.Token{ID: t.ID(), Kind: t.Kind, Subject: t.Subject, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "kind" && k != "subject" {
			s.fail(w, r, badf("unknown query parameter %q; known: kind, subject", k))
			return
		}
	}
	kind, subject := q.Get("kind"), q.Get("subject")
	switch kind {
	case "", store.TokenAdmin, store.TokenBootstrap, store.TokenRegistration, store.TokenAgent:
	default:
		s.fail(w, r, badf("kind %q is not valid; use admin, bootstrap, registration or agent", kind))
		return
	}
	if subject != "" && !instanceIDRE.MatchString(subject) {
		s.fail(w, r, badf("subject %q is not a valid name or instance id", subject))
		return
	}
	ts, err := s.store.ListTokens(r.Context(), kind, subject)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mapList(ts, apiToken))
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !tokenIDRE.MatchString(id) {
		s.fail(w, r, badf("token id %q is not valid; use the 16 hex digits `gpubroker token list` shows", id))
		return
	}
	rec, err := s.store.RevokeToken(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.tokens.drop(rec.Hash)
	s.log.InfoContext(r.Context(), "token revoked", "kind", rec.Kind, "subject", rec.Subject, "id", id, "by", principalFrom(r.Context()).subject)
	w.WriteHeader(http.StatusNoContent)
}

var tokenIDRE = regexp.MustCompile(`^[0-9a-f]{16}$`)
