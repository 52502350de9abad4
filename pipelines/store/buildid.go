package store

// migrationBuildID keeps, for every run, the GNU build-id the running
// kernel showed (/sys/kernel/notes) and whether it and the command line
// were verified against the kernel asked for before any sample
// (evaluate.Verify): a run's samples carry the build-id they ran on.
const migrationBuildID = `
ALTER TABLE runs ADD COLUMN build_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN verified INTEGER NOT NULL DEFAULT 0;
`
