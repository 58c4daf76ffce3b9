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
