package gcp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
)

// retryer retries throttling and transient failures of one request with
// gax's jittered exponential backoff, at most Attempts tries in all. gax's
// own OnHTTPCodes knows status codes only; GCP also throttles with 403
// rateLimitExceeded, and a dropped connection carries no code at all.
type retryer struct {
	bo   gax.Backoff
	left int
}

func newRetryer(r Retry) gax.Retryer {
	return &retryer{bo: gax.Backoff{Initial: r.Initial, Max: r.Max, Multiplier: 2}, left: r.Attempts - 1}
}

func (r *retryer) Retry(err error) (time.Duration, bool) {
	if r.left <= 0 || !retryable(err) {
		return 0, false
	}
	r.left--
	return r.bo.Pause(), true
}

// retryable reports whether an error is throttling or transient.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		if ge.Code == http.StatusTooManyRequests || ge.Code >= 500 {
			return true
		}
		for _, e := range ge.Errors {
			switch e.Reason {
			case "rateLimitExceeded", "userRateLimitExceeded", "backendError", "internalError":
				return true
			}
		}
		return false
	}
	// A response cut off mid-body or a connection reset is worth another try;
	// so is a client-side timeout of one attempt.
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return strings.Contains(err.Error(), "connection reset by peer")
}
