package policy

import "errors"

// Sentinels for callers that serve policies (the broker maps them to HTTP
// statuses; the planning code wraps them).
var (
	// ErrInvalid wraps every reason a policy file cannot be used.
	ErrInvalid = errors.New("invalid policy")
	// ErrNoPolicy means no policy is loaded where one is needed.
	ErrNoPolicy = errors.New("no policy loaded")
)
