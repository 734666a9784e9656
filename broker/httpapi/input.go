package httpapi

// Bad input is refused here, at the edge, before any handler or the store
// sees it: one client's bytes must never fail another client's request (a
// NUL or an invalid UTF-8 sequence fails a whole PostgreSQL transaction,
// and SQLite would store it and serve it back as invalid JSON).
//
// Every request passes checkRequest (path, query, Idempotency-Key) in
// the router, every JSON body passes checkJSONText in decodeJSON, and every
// other body passes checkText in readBody, so each handler, present and
// future, gets the checks without calling them.

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// textProblem says what is wrong with s as text the broker stores or
// compares, or "" when nothing is: s must be valid UTF-8 without control
// characters (C0 except tab, newline and carriage return when multiline,
// DEL, C1) and without the replacement character U+FFFD, which is what
// decoders leave where a sequence was invalid.
func textProblem(s string, multiline bool) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Sprintf("is not valid UTF-8 at byte %d", i)
			}
			return fmt.Sprintf("holds U+FFFD (the mark of an invalid byte sequence) at byte %d", i)
		case multiline && (r == '\t' || r == '\n' || r == '\r'):
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Sprintf("holds the control character %U at byte %d", r, i)
		}
	}
	return ""
}

// checkText returns a 400 error naming what when s is not acceptable text.
func checkText(what, s string, multiline bool) error {
	if p := textProblem(s, multiline); p != "" {
		return badf("%s %s; send valid UTF-8 without control characters", what, p)
	}
	return nil
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 200

// checkRequest checks what every route shares: the path (its decoded
// segments are names and ids), the query string (parsed strictly, each
// parameter one of allowed, each value valid text) and the Idempotency-Key
// header.
func checkRequest(r *http.Request, allowed []string) error {
	if err := checkText("the request path", r.URL.Path, false); err != nil {
		return err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badf("the query string does not parse (%v); encode it as name=value pairs joined by '&'", err)
	}
	for k, vs := range q {
		if err := checkText("query parameter name "+strconvQuote(k), k, false); err != nil {
			return err
		}
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return badf("unknown query parameter %q; this route takes no query parameters", k)
			}
			return badf("unknown query parameter %q; known: %s", k, strings.Join(allowed, ", "))
		}
		for _, v := range vs {
			if err := checkText("query parameter "+k, v, false); err != nil {
				return err
			}
		}
	}
	if ks := r.Header.Values("Idempotency-Key"); len(ks) > 0 {
		if len(ks) > 1 {
			return badf("Idempotency-Key is given %d times; send it once", len(ks))
		}
		k := ks[0]
		if k == "" || len(k) > maxIdempotencyKey {
			return badf("Idempotency-Key is %d bytes; send 1 to %d", len(k), maxIdempotencyKey)
		}
		if err := checkText("Idempotency-Key", k, false); err != nil {
			return err
		}
	}
	return nil
}

// strconvQuote quotes s for a message without letting invalid bytes
// through.
func strconvQuote(s string) string { return fmt.Sprintf("%+q", s) }

// checkJSONText walks the string literals of a syntactically valid JSON
// document and reports the first one (key or value) that is not valid
// text: invalid UTF-8, a control character (raw or escaped; tab, newline
// and carriage return are allowed in values), or an escaped lone UTF-16
// surrogate, which a decoder silently turns into U+FFFD. The message names
// the object key the string belongs to and its byte offset.
func checkJSONText(body []byte) error {
	if !utf8.Valid(body) {
		for i := 0; i < len(body); {
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size <= 1 {
				return badf("request body is not valid UTF-8 at byte %d; send UTF-8 JSON", i)
			}
			i += size
		}
	}
	key := ""
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		start := i
		s, end, err := unquoteJSON(body, i)
		if err != nil {
			return err
		}
		i = end
		// A string followed by ':' is an object key.
		j := end + 1
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		isKey := j < len(body) && body[j] == ':'
		if p := textProblem(s, !isKey); p != "" {
			what := "a value"
			switch {
			case isKey:
				what = "the key " + strconvQuote(s)
			case key != "":
				what = "the value of " + strconvQuote(key)
			}
			return badf("request body: %s (byte %d) %s; send valid UTF-8 without control characters", what, start, p)
		}
		if isKey {
			key = s
		}
	}
	return nil
}

// unquoteJSON decodes the string literal starting at body[i] == '"' and
// returns it with the index of its closing quote. Lone surrogate escapes
// come back as utf8.RuneError, which textProblem reports.
func unquoteJSON(body []byte, i int) (string, int, error) {
	var b strings.Builder
	for j := i + 1; j < len(body); j++ {
		c := body[j]
		switch {
		case c == '"':
			return b.String(), j, nil
		case c == '\\':
			if j+1 >= len(body) {
				return "", 0, badf("request body ends inside a string")
			}
			j++
			switch body[j] {
			case 'u':
				r, n, ok := hex4(body, j+1)
				if !ok {
					return "", 0, badf("request body has a bad \\u escape at byte %d", j-1)
				}
				j += n
				if r >= 0xD800 && r <= 0xDBFF {
					// A high surrogate must be followed by a low one.
					if j+2 < len(body) && body[j+1] == '\\' && body[j+2] == 'u' {
						if lo, n2, ok := hex4(body, j+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
							j += 2 + n2
							b.WriteRune(0x10000 + (r-0xD800)<<10 + (lo - 0xDC00))
							continue
						}
					}
					b.WriteRune(utf8.RuneError) // a lone surrogate: textProblem refuses it
					continue
				}
				if r >= 0xDC00 && r <= 0xDFFF {
					b.WriteRune(utf8.RuneError)
					continue
				}
				b.WriteRune(r)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			default: // '"', '\\', '/'
				b.WriteByte(body[j])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, badf("request body ends inside a string")
}

func hex4(body []byte, i int) (rune, int, bool) {
	if i+4 > len(body) {
		return 0, 0, false
	}
	var r rune
	for _, c := range body[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, 0, false
		}
	}
	return r, 4, true
}
