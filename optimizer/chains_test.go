package optimizer

import (
	"slices"
	"testing"
)

// TestSortedListUpdates checks the in-place updates chains makes to the
// row lists (ascending workload indices, a workload listed once per row
// use) against building the list again.
func TestSortedListUpdates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		xs        []int
		remove    int
		insert    []int
		wantAfter []int
	}{
		{"middle", []int{1, 3, 5, 7}, 5, []int{4}, []int{1, 3, 4, 7}},
		{"absent", []int{1, 3}, 2, []int{0, 9}, []int{0, 1, 3, 9}},
		{"duplicates", []int{1, 2, 2, 3}, 2, []int{2, 2}, []int{1, 2, 2, 3}},
		{"empty", nil, 4, []int{4}, []int{4}},
		{"to empty", []int{4}, 4, nil, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xs := removeSorted(slices.Clone(tc.xs), tc.remove)
			if slices.Contains(xs, tc.remove) {
				t.Fatalf("removeSorted(%v, %d) = %v", tc.xs, tc.remove, xs)
			}
			for _, v := range tc.insert {
				xs = insertSorted(xs, v)
			}
			if !slices.Equal(xs, tc.wantAfter) {
				t.Fatalf("got %v, want %v", xs, tc.wantAfter)
			}
		})
	}
}
