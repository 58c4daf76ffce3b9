package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// termWidth is the width the tables of `nets` and `verify` fit by default (--wide lifts it).
const termWidth = 80

// column is one column of a table: its header and whether its cells align right (numbers).
type column struct {
	header string
	right  bool
}

// writeTable lays out rows in columns two spaces apart, each as wide as its widest cell, numbers
// right-aligned. With maxWidth > 0 the last column is cut (ending in "…") so that no line is wider.
func writeTable(w io.Writer, cols []column, rows [][]string, maxWidth int) {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = utf8.RuneCountInString(c.header)
	}
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		for i, cell := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			switch {
			case cols[i].right:
				b.WriteString(pad + cell)
			case i == len(cells)-1:
				b.WriteString(cell) // no trailing blanks
			default:
				b.WriteString(cell + pad)
			}
		}
		s := strings.TrimRight(b.String(), " ")
		if maxWidth > 0 {
			s = cutTo(s, maxWidth)
		}
		return s
	}
	headers := make([]string, len(cols))
	for i, c := range cols {
		headers[i] = c.header
	}
	fmt.Fprintln(w, line(headers))
	for _, r := range rows {
		fmt.Fprintln(w, line(r))
	}
}

// cutTo shortens s to at most n columns, ending in "…" when it cut.
func cutTo(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return strings.TrimRight(string(runes[:n-1]), " ") + "…"
}
