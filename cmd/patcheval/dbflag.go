package main

import (
	"flag"
	"fmt"
	"io"
)

// dbFlag defines --db, the one name of the database flag on every
// command (issue 32: one name per concept), and --database, its
// deprecated alias (serve and worker used to call it so). The value is
// what the user gave: store.Open and service.ParseDatabase read it
// (store.ParseLocator), so that a libpq key=value string is Postgres and
// an ambiguous value is refused without showing its password.
func dbFlag(fs *flag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "db", "", usage)
	fs.Func("database", "deprecated: the old name of --db", func(v string) error {
		*p = v
		deprecatedDatabase = true
		return nil
	})
}

// deprecatedDatabase is set when a command line used --database.
var deprecatedDatabase bool

// warnDeprecatedDB says once on w that --database is now --db.
func warnDeprecatedDB(w io.Writer) {
	if deprecatedDatabase {
		fmt.Fprintln(w, "patcheval: --database is deprecated: use --db (same value)")
		deprecatedDatabase = false
	}
}
