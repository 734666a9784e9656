package suggest

import "testing"

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"gcp", "gcp", 0}, {"gpc", "gcp", 1}, {"a100-80", "a100-80gb", 2},
		{"kitten", "sitting", 3}, {"", "abc", 3},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	gpus := []string{"T4", "L4", "A10G", "A10", "L40S", "V100", "A100-40GB", "A100-80GB", "H100", "H200"}
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"A100-80", 2, "A100-80GB"}, {"h10", 2, "H100"}, {"L40", 2, "L40S"}, {"t4x", 2, "T4"},
		{"zzzzzzzz", 2, ""}, {"H100", 0, "H100"}, {"H10", 0, ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.in, gpus, tt.max); got != tt.want {
			t.Errorf("Closest(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
