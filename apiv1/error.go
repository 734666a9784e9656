package apiv1

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Error codes of the broker's error answers.
const (
	CodeBadRequest   = "bad_request"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeInfeasible   = "infeasible"
	// CodeKeyReused: an Idempotency-Key already recorded a different
	// report (422).
	CodeKeyReused   = "idempotency_key_reused"
	CodeTooLarge    = "request_too_large"
	CodeMethod      = "method_not_allowed"
	CodeUnavailable = "unavailable"
	CodeInternal    = "internal"
)

// ErrorBody is every error answer: {"error":{"code":"...","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error is a non-2xx answer as Client returns it. Network failures are not
// *Error (they wrap the transport's error).
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the broker's stable code; empty when the answer was not the
	// broker's JSON (a proxy's page).
	Code string
	// Message says what to change.
	Message string
	// Method and Path name the request.
	Method, Path string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Method + " " + e.Path + ": " + strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Temporary reports whether the same request may succeed later: 408, 425,
// 429 and 5xx.
func (e *Error) Temporary() bool {
	switch {
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooEarly,
		e.Status == http.StatusTooManyRequests, e.Status >= 500:
		return true
	}
	return false
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// IsTemporary reports whether err is worth retrying later: a network
// failure or a temporary *Error. Context cancellation is not.
func IsTemporary(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Temporary()
	}
	return true
}

// parseError builds an *Error from an error answer's body: the broker's
// ErrorBody, a proxy's {"error":"..."} or plain text (truncated).
func parseError(method, path string, status int, body []byte) *Error {
	e := &Error{Status: status, Method: method, Path: path}
	var eb ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Message != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
		return e
	}
	var plain struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &plain) == nil && plain.Error != "" {
		e.Message = plain.Error
		return e
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = http.StatusText(status)
	}
	e.Message = s
	return e
}
