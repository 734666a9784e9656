package policy

import (
	"fmt"
	"sort"
	"strings"

	suggestpkg "github.com/gpubroker/gpubroker/internal/suggest"
)

// String formats a position as file:line:col, leaving out the parts that are
// unknown (a policy built in code has no file or line).
func (p Pos) String() string {
	switch {
	case p.Line > 0 && p.File != "":
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	case p.Line > 0:
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	default:
		return p.File
	}
}

// Error is one problem in a policy, at a position in its file.
type Error struct {
	Pos Pos
	Msg string
	// Path is the field the problem is about, as a path from the top of the
	// file ("workloads[0].gpu.models[1]", "horizon"); "" when the problem
	// is about the file as a whole. Tools that build a policy from other
	// input (the Terraform provider) use it to point at their own fields.
	Path string
}

// Error returns "file:line:col: message".
func (e *Error) Error() string {
	if p := e.Pos.String(); p != "" {
		return p + ": " + e.Msg
	}
	return e.Msg
}

// ErrorList is every problem found in a policy, sorted by position. Parse and
// Validate return it (as error) so a user can fix a file in one pass.
type ErrorList []*Error

// Error returns the errors one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns nil for an empty list and the sorted list otherwise; returning
// a nil ErrorList as error would make a non-nil interface.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.sort()
	return l
}

func (l ErrorList) sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// suggest returns the candidate closest to s when it is close enough to be a
// likely typo, or "".
func suggest(s string, candidates []string) string {
	return suggestpkg.Closest(s, candidates, max(1, min(2, len(s)/3)))
}

// didYouMean formats a suggestion as a message suffix.
func didYouMean(s string, candidates []string) string {
	if m := suggest(s, candidates); m != "" {
		return fmt.Sprintf("; did you mean %q?", m)
	}
	return ""
}

// fieldPath formats a field of an object in one of the file's lists as a
// path from the top of the file.
func fieldPath(s scope, i int, field string) string {
	var list string
	switch s {
	case scopeWorkload:
		list = "workloads"
	case scopeQuota:
		list = "quotas"
	case scopeBudget:
		list = "budgets"
	default:
		return field
	}
	p := fmt.Sprintf("%s[%d]", list, i)
	if field != "" {
		p += "." + field
	}
	return p
}
