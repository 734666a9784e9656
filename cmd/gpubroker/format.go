package main

import (
	"strconv"
	"strings"
)

// plural writes a count and its noun the one way every command does:
// "1 offer", "2 offers", "1,079 offers". Nouns ending in y after a
// consonant take -ies ("1 policy", "2 policies").
func plural(n int, noun string) string {
	word := noun
	if n != 1 {
		switch {
		case strings.HasSuffix(noun, "y") && !strings.ContainsAny(noun[len(noun)-2:len(noun)-1], "aeiou"):
			word = noun[:len(noun)-1] + "ies"
		case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "ch"):
			word = noun + "es"
		default:
			word = noun + "s"
		}
	}
	return groupThousands(n) + " " + word
}

// groupThousands writes n with a comma between thousands: 1079 → "1,079".
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
