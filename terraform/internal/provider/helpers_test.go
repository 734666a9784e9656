package provider

import (
	"regexp"
	"testing"
)

func matches(t *testing.T, re, s string) bool {
	t.Helper()
	ok, err := regexp.MatchString(re, s)
	if err != nil {
		t.Fatalf("bad pattern %q: %v", re, err)
	}
	return ok
}
