package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
)

// Error codes in the JSON error body.
const (
	codeBadRequest   = apiv1.CodeBadRequest
	codeUnauthorized = apiv1.CodeUnauthorized
	codeForbidden    = apiv1.CodeForbidden
	codeNotFound     = apiv1.CodeNotFound
	codeConflict     = apiv1.CodeConflict
	codeInfeasible   = apiv1.CodeInfeasible
	codeKeyReused    = apiv1.CodeKeyReused
	codeTooLarge     = apiv1.CodeTooLarge
	codeMethod       = apiv1.CodeMethod
	codeUnavailable  = apiv1.CodeUnavailable
	codeInternal     = apiv1.CodeInternal
)

// writeJSON writes v with status. Encoding errors cannot be reported to the
// client once the header is out, so they are only logged by the caller's
// middleware through the status it already sent.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiv1.ErrorBody{Error: apiv1.ErrorDetail{Code: code, Message: msg}})
}

// badRequest is an input problem the client can fix; its message is shown.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{msg: fmt.Sprintf(format, args...)} }

// decodeJSON reads one JSON object of at most limit bytes into v, rejecting
// unknown fields, trailing data, and text that is not valid UTF-8 or holds
// control characters (checkJSONText), in any key or value, including those
// kept as raw JSON.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return badf("Content-Type is %q; send application/json", ct)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badf("request body has data after the JSON object; send exactly one object")
	}
	return checkJSONText(body)
}

func jsonError(err error) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return badf("request body is empty; send a JSON object")
	case errors.As(err, &se):
		return badf("request body is not valid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		return badf("field %q must be %s, not JSON %s", te.Field, jsonKind(te.Type), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badf("request body ends in the middle of the JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return badf("%s; see docs/api.md for the fields this endpoint takes", strings.TrimPrefix(err.Error(), "json: "))
	}
	return badf("request body: %v", err)
}

// readBody reads at most limit bytes of a non-JSON body (a policy file),
// which must be valid UTF-8 text without control characters other than
// tab, newline and carriage return.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if err := checkText("request body", string(b), true); err != nil {
		return nil, err
	}
	return b, nil
}

// jsonKind names a Go type as the JSON a client must send.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string"
		}
		return "an array"
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			return "an RFC 3339 time string"
		}
		return "an object"
	case reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}
