package sqlite

import (
	"fmt"
	"os"
	"syscall"
)

// oneName refuses a database file with more than one hard link. SQLite
// finds a database's -wal and -shm by the name it was opened with (links
// of the folder or of the file resolved, hard links not), so a process
// that opens another name of the same file reads it without the rows
// still in the live -wal, and one that writes through it, or recovers its
// own empty -wal, corrupts it (SQLite's "How To Corrupt", multiple links).
// No name is safer than another to guess at, so every one is refused until
// the file has one name again. A path that cannot be looked at is left to
// the open to report.
func oneName(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink <= 1 {
		return nil
	}
	return fmt.Errorf("%s has %d hard links (names): SQLite finds the -wal by the name a process opened, so another name would read stale rows or corrupt the database; remove the other names (find / -xdev -samefile %s) and keep copies with inbox backup",
		path, st.Nlink, path)
}
