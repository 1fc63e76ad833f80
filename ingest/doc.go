// Package ingest turns provider-format files into lake records: it validates
// and plans input files (record ids, job keys, shards, expected rows) and
// normalises provider output and error files into attempt rows, quarantining
// any line it cannot read with its raw bytes and line number.
//
// Parsing is streaming and parallel: files are read in chunks, lines are
// parsed on every core and results are consumed in file order, so memory does
// not grow with the file.
package ingest
