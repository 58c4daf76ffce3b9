package echo

import (
	"strings"
	"testing"
)

func TestShortValuesAreQuotedWhole(t *testing.T) {
	if got := Quote(`a "b"`); got != `"a \"b\""` {
		t.Errorf("Quote = %s", got)
	}
	if got := Cut("optimizer.lr"); got != "optimizer.lr" {
		t.Errorf("Cut = %s", got)
	}
	if got := Value([]float64{0.5, 1}); got != "[0.5 1]" {
		t.Errorf("Value = %s", got)
	}
}

func TestLongValuesAreCutWithTheirLength(t *testing.T) {
	big := strings.Repeat("x", 10<<20)
	for name, got := range map[string]string{"Quote": Quote(big), "Cut": Cut(big), "Value": Value(big)} {
		if len(got) > Max+40 || !strings.Contains(got, "… (10485760 bytes)") && !strings.Contains(got, `…" (10485760 bytes)`) {
			t.Errorf("%s: %d bytes ending %q", name, len(got), got[max(0, len(got)-40):])
		}
	}
	list := make([]float64, 1<<20)
	if got := Value(list); len(got) > Max+40 || !strings.HasPrefix(got, "[0 0 0") || !strings.HasSuffix(got, "… (2097153 bytes)") {
		t.Errorf("Value(list) = %q", got)
	}
	// A multi-byte rune across the cut is kept whole or dropped, never split.
	s := strings.Repeat("a", Max-1) + "é" + "tail"
	if got := Cut(s); !strings.HasPrefix(got, strings.Repeat("a", Max-1)+"…") {
		t.Errorf("Cut split a rune: %q", got)
	}
}

// TestTerminalEscapesControlCharacters: printable text (any script) is shown as it is; text with an
// escape sequence, a carriage return, a newline or invalid UTF-8 is quoted with those escaped.
func TestTerminalEscapesControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"tench":                 "tench",
		"Grüner Veltliner 葡萄":   "Grüner Veltliner 葡萄",
		"dog\x1b[2J\x1b[31mred": `"dog\x1b[2J\x1b[31mred"`,
		"cat\rdog":              `"cat\rdog"`,
		"a\nb":                  `"a\nb"`,
		"bad\xffutf8":           `"bad\xffutf8"`,
	} {
		if got := Terminal(in); got != want {
			t.Errorf("Terminal(%q) = %s, want %s", in, got, want)
		}
	}
}
