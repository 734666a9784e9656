// Package suggest finds the likely intended word for a misspelt name, for
// "did you mean" hints in error messages (GPU names, policy keys, clouds).
package suggest

import "strings"

// Closest returns the candidate closest to s when it is close enough to be a
// likely typo (at most maxEdits edits, case-insensitive), or "". A candidate
// that s is a prefix of wins a tie: "H10" is one edit from both "A10" and
// "H100", and is short for H100.
func Closest(s string, candidates []string, maxEdits int) string {
	best, bestD := "", 1<<30
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := 2 * Distance(ls, lc)
		if strings.HasPrefix(lc, ls) && len(ls) >= 2 {
			d--
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if (bestD+1)/2 <= maxEdits {
		return best
	}
	return ""
}

// Distance is the optimal string alignment distance: insertions, deletions,
// substitutions and swaps of adjacent characters ("gpc" for "gcp") each
// count as one edit.
func Distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
