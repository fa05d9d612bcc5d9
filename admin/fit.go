package admin

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"inbox/bodyview"
)

// tableWidth is the width a table fits in without --wide: a terminal's or
// a mail's line, wherever a row id is as long as a sha256: key.
const tableWidth = 120

// Each column is shortened to no fewer characters than its floor: first
// to the soft floors, the widest first, then, if the table is still too
// wide, to the hard ones. An id keeps more than other text at first: it
// is what the next command takes.
const (
	idSoftFloor   = 32
	idHardFloor   = 20
	textSoftFloor = 16
	textHardFloor = 8
)

// idTail is how many characters of a shortened id are kept after the
// ellipsis: enough to tell two sha256: keys apart at a glance.
const idTail = 4

// wideFlag is --wide: tables as wide as their cells, ids whole.
func wideFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "wide", Usage: "print the table as wide as its cells, every id whole, rather than within 120 columns (--json holds every field whole)", EnvVars: []string{"INBOX_WIDE"}}
}

// printed is a table cell as it is printed: its pieces, each one rune of
// the text or the escape that stands for it (see escapeRune), so a cut
// never splits an escape.
type printed []string

// printedCell is s as a table shows it, in pieces: escaped, and, unless it
// is an id (never cut but to fit the width, see fit), at most maxCell
// characters, as cell cuts it.
func printedCell(s string, id bool) printed {
	if !id {
		// Each rune prints as one character or more: the first maxCell+1
		// say whether s fits, however long it is.
		s = bodyview.Runes(s, maxCell+1)
	}
	var out printed
	for s != "" {
		piece, n := escapeRune(s, "")
		out = append(out, piece)
		s = s[n:]
	}
	if !id && out.width() > maxCell {
		return out.cutEnd(maxCell)
	}
	return out
}

// width is how many characters p prints.
func (p printed) width() int {
	n := 0
	for _, piece := range p {
		n += utf8.RuneCountInString(piece)
	}
	return n
}

func (p printed) String() string { return strings.Join(p, "") }

// cutEnd returns p in at most w characters: whole when it fits, else its
// start and cutMark.
func (p printed) cutEnd(w int) printed {
	if p.width() <= w {
		return p
	}
	var out printed
	n := 0
	for _, piece := range p {
		if n += utf8.RuneCountInString(piece); n > w-1 {
			break
		}
		out = append(out, piece)
	}
	return append(out, cutMark)
}

// cutMiddle returns p in at most w characters: whole when it fits, else
// its start, cutMark and its last idTail characters, so a shortened id
// shows where it comes from and how it ends (gh/sha256:3f1a…9c2e).
func (p printed) cutMiddle(w int) printed {
	if p.width() <= w {
		return p
	}
	var tail printed
	n := 0
	for i := len(p) - 1; i >= 0; i-- {
		if n += utf8.RuneCountInString(p[i]); n > idTail {
			break
		}
		tail = append(printed{p[i]}, tail...)
	}
	head := p.cutEnd(w - tail.width())
	return append(head, tail...)
}

// tableRow is a table's row of printed cells.
type tableRow []printed

// fit shortens the cells of rows, a block of a table under head, to the
// widths fitWidths gives: an id column (ids) in the middle, another at
// its end.
func fit(head tableRow, rows []tableRow, ids []bool) {
	widths := fitWidths(head, rows, ids)
	for _, row := range rows {
		for j, c := range row[:min(len(row), len(widths))] {
			if ids[j] {
				row[j] = c.cutMiddle(widths[j])
			} else {
				row[j] = c.cutEnd(widths[j])
			}
		}
	}
}

// fitWidths returns the width of each column of head and rows such that
// the table, its columns two spaces apart, fits tableWidth where it can.
// The widest column that can give is shortened first, one character at a
// time, down to its soft floor; then again down to its hard floor. A
// column of times and counts only never gives, and none is shortened
// below its heading.
func fitWidths(head tableRow, rows []tableRow, ids []bool) []int {
	n := len(head)
	widths := make([]int, n)
	fixed := make([]bool, n)
	for j, c := range head {
		widths[j], fixed[j] = c.width(), true
	}
	for _, row := range rows {
		for j, c := range row[:min(len(row), n)] {
			widths[j] = max(widths[j], c.width())
			fixed[j] = fixed[j] && fixedText(c.String())
		}
	}
	over := 2*(n-1) - tableWidth
	for _, w := range widths {
		over += w
	}
	for _, floors := range [][2]int{{idSoftFloor, textSoftFloor}, {idHardFloor, textHardFloor}} {
		floor := make([]int, n)
		for j := range n {
			switch {
			case fixed[j]:
				floor[j] = widths[j]
			case ids[j]:
				floor[j] = max(floors[0], head[j].width())
			default:
				floor[j] = max(floors[1], head[j].width())
			}
		}
		for ; over > 0; over-- {
			widest := -1
			for j := range n {
				if widths[j] > floor[j] && (widest < 0 || widths[j] > widths[widest]) {
					widest = j
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
		}
	}
	return widths
}

// fixedText reports whether s is a cell no table shortens: a count, a
// time as tables print them, or the dash of an empty cell.
func fixedText(s string) bool {
	if s == "-" {
		return true
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return true
	}
	_, err := time.Parse(timeFormat, s)
	return err == nil
}
