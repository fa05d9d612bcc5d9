package admin

import "inbox/bodyview"

// maxCell is how many characters a table cell shows, escapes counted as
// printed, even with --wide: a longer field (a 10 KB event name) is cut,
// and --json or show has it whole. Ids and keys are cut only to fit a
// table's width (see fit), never to this: another source's sha256: id is
// longer than this.
const maxCell = 72

// cutMark ends a cell that was cut.
const cutMark = "…"

// escapeControls returns s with every rune a terminal could act on
// replaced by a Go-style escape, except those in keep, as
// bodyview.Printable does.
func escapeControls(s, keep string) string { return bodyview.Printable(s, keep) }

// escapeRune returns the first rune of s as it is printed, and its length
// in s.
func escapeRune(s, keep string) (string, int) { return bodyview.EscapeRune(s, keep) }

// cell is s as a table shows it: escaped as escapeControls does (a tab
// too, which would split the cell), and when that is longer than maxCell
// characters, cut to maxCell-1 and ended with cutMark. An escape is never
// cut in two.
func cell(s string) string { return printedCell(s, false).String() }

// idCell is a row id or a key as a message shows it: escaped as cell
// escapes, never cut, so what is printed is what show, expect and
// redeliver take. Ids are bounded where they are made (a job id of at most
// 200 bytes, a source name, or a sha256: key), so a whole one cannot
// widen a table without bound.
func idCell(s string) string { return escapeControls(s, "") }
