// Package echo quotes user-supplied values in error messages, cut to a bounded length, so that a
// 10 MB run name or list makes a one-line error instead of a 10 MB one.
package echo

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Max is how many bytes of a value an error message repeats.
const Max = 100

// Quote is strconv.Quote(s) for a short s; a longer s is cut to its first Max bytes (at a rune
// boundary) and followed by its length: "aaaa…" (10485760 bytes).
func Quote(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	return strconv.Quote(prefix(s)+"…") + fmt.Sprintf(" (%d bytes)", len(s))
}

// Cut is s unquoted, cut as Quote cuts it: for names printed bare, such as config keys.
func Cut(s string) string {
	if len(s) <= Max {
		return s
	}
	return prefix(s) + fmt.Sprintf("… (%d bytes)", len(s))
}

// Value renders v as %v does (strings quoted, as Quote), cut to Max bytes with the length of the full
// rendering: a list of a million numbers becomes its first few and a count.
func Value(v any) string {
	if s, ok := v.(string); ok {
		return Quote(s)
	}
	text := fmt.Sprint(v)
	if len(text) <= Max {
		return text
	}
	return prefix(text) + fmt.Sprintf("… (%d bytes)", len(text))
}

// prefix is s's first Max bytes, without splitting a rune.
func prefix(s string) string {
	n := Max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// List joins the first n items with ", " and counts the rest: "a, b and 3 more".
func List(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// Terminal renders untrusted text (a class name from a dataset, a file name) for a terminal: as it
// is when every rune is printable, else quoted with its control characters escaped, so an escape
// sequence in a shard's class names is shown as \x1b[…, not executed by the terminal. Long text is
// cut as Cut and Quote cut it.
func Terminal(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return Quote(s)
		}
	}
	return Cut(s)
}
