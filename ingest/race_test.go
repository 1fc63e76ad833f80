//go:build race

package ingest

// raceEnabled: the race detector's runtime allocates on its own account.
const raceEnabled = true
