package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpubroker/gpubroker/apiv1"
)

// checkInputErr fails unless err is nil or a client error (400/413).
func checkInputErr(t *testing.T, err error) {
	t.Helper()
	var br *badRequest
	var mbe *http.MaxBytesError
	if err != nil && !errors.As(err, &br) && !errors.As(err, &mbe) {
		t.Fatalf("input produced a non-client error %T: %v", err, err)
	}
}

// FuzzAgentBodies feeds arbitrary bodies to the agent routes' decoders and
// validators: never a panic, only 400/413-class errors.
func FuzzAgentBodies(f *testing.F) {
	for _, s := range []string{
		`{"time":"2026-12-02T10:00:00Z","cloud":"aws","gpus":[{"index":0,"util_gpu_pct":80}],"spool_depth":0}`,
		`{"gpus":null,"gpu_error":"no NVML"}`,
		`{"hostname":"h","cloud":"gcp","instance_id":"123","agent_version":"v1","gpus":[{"index":0,"model":"L4"}]}`,
		`{"done":0.42,"reported_at":"2026-12-02T10:00:00Z","step":1200,"eta_seconds":3600}`, `{"done":-0.1}`, `{"done":1.5,"step":-1}`,
		`{"gpus":[{"index":-1}]}`, `{"load1":1e309}`, `[]`, `{"gpus":{}}`, `{"a":1}`, `{}`, ``, `{"gpus":[{"index":0,"util_gpu_pct":"x"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var hb apiv1.Heartbeat
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		err := decodeJSON(httptest.NewRecorder(), r, agentBodyLimit, &hb)
		if err == nil {
			err = validateHeartbeat(&hb)
		}
		checkInputErr(t, err)
		var reg apiv1.RegisterRequest
		r = httptest.NewRequest("POST", "/", strings.NewReader(body))
		err = decodeJSON(httptest.NewRecorder(), r, agentBodyLimit, &reg)
		if err == nil {
			err = validateRegister(&reg)
		}
		checkInputErr(t, err)
		var dr apiv1.DrainReport
		r = httptest.NewRequest("POST", "/", strings.NewReader(body))
		checkInputErr(t, decodeJSON(httptest.NewRecorder(), r, agentBodyLimit, &dr))
		var pr apiv1.ProgressReport
		r = httptest.NewRequest("POST", "/", strings.NewReader(body))
		err = decodeJSON(httptest.NewRecorder(), r, agentBodyLimit, &pr)
		if err == nil {
			err = validateProgress(&pr, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
		}
		checkInputErr(t, err)
	})
}

// FuzzFleetReplaceBody feeds arbitrary bodies to the replacement route's
// decoder: never a panic, only 400/413-class errors, and an accepted
// reason is within its bound.
func FuzzFleetReplaceBody(f *testing.F) {
	for _, s := range []string{`{"reason":"slow host"}`, `{}`, ``, `{"reason":1}`, `{"reasn":"x"}`, `{"reason":"a"} {}`,
		`{"reason":"\u0000"}`, `[]`, `{"reason":"` + strings.Repeat("é", 501) + `"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		reason, err := decodeReplace(httptest.NewRecorder(), r)
		checkInputErr(t, err)
		if err == nil && utf8.RuneCountInString(reason) > maxReplaceReason {
			t.Fatalf("accepted a reason of %d characters", utf8.RuneCountInString(reason))
		}
	})
}

// FuzzOffersQuery feeds arbitrary query strings to the offers parser.
func FuzzOffersQuery(f *testing.F) {
	for _, s := range []string{"gpu=H100,A100-80GB&cloud=aws&capacity=spot&min_gpus=8", "region=us-[", "max_price=NaN",
		"limit=-1", "min_gpus=9&max_gpus=2", "gpu=", "x=1", "min_gpu_memory_gib=1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		_, _, err = parseOffersQuery(v)
		checkInputErr(t, err)
		_, err = parseEventFilter(v)
		checkInputErr(t, err)
	})
}

// FuzzJSONText checks checkJSONText against encoding/json: for any body
// that decodes, a string (key or value) holding invalid UTF-8 (which the
// decoder turns into U+FFFD), a control character or a lone surrogate must
// be refused, and a clean document accepted.
func FuzzJSONText(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`,
		`{"\u0001":1}`, `{"a":["x","\u0085"]}`, `{"a":"tab\tnl\n"}`, `{"k\n":1}`, `"\\"`, `{"a":"\\u0000"}`, `[1,"\u007f"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		err := checkJSONText(body)
		checkInputErr(t, err)
		bad := !utf8.Valid(body)
		var walk func(x any, key bool)
		check := func(s string, multiline bool) {
			if textProblem(s, multiline) != "" {
				bad = true
			}
		}
		walk = func(x any, _ bool) {
			switch x := x.(type) {
			case string:
				check(x, true)
			case []any:
				for _, e := range x {
					walk(e, false)
				}
			case map[string]any:
				for k, e := range x {
					check(k, false)
					walk(e, false)
				}
			}
		}
		walk(v, false)
		if bad && err == nil {
			t.Fatalf("checkJSONText accepted %q", body)
		}
		if !bad && err != nil {
			// Only lone surrogates decode to a clean U+FFFD... which
			// textProblem refuses too, so any refusal here is a bug.
			t.Fatalf("checkJSONText refused clean %q: %v", body, err)
		}
	})
}

// FuzzTokenInput feeds arbitrary bodies to the token route's decoder and
// validator.
func FuzzTokenInput(f *testing.F) {
	for _, s := range []string{`{"kind":"bootstrap","name":"cloud-init"}`, `{"kind":"registration","instance_id":"i-0abc","ttl_seconds":600}`,
		`{"kind":"registration","instance_id":"../x"}`, `{"kind":"admin","name":"a","ttl_seconds":-1}`, `{"kind":"admin","name":"a","ttl_seconds":9223372036854775807}`,
		`{"kind":"agent"}`, `{"kind":"admin","name":"\u0000"}`, `{}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var b apiv1.TokenInput
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		err := decodeJSON(httptest.NewRecorder(), r, 4<<10, &b)
		if err == nil {
			var ttl time.Duration
			_, ttl, err = validateTokenInput(b)
			if err == nil && (ttl < 0 || ttl > maxTokenTTL) {
				t.Fatalf("ttl %s accepted", ttl)
			}
		}
		checkInputErr(t, err)
	})
}
