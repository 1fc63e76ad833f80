// Package sha256x2 computes SHA-256 over two messages at once.
//
// The digests are SHA-256's, bit for bit; what differs is the speed. With
// the processor's SHA extensions, each round instruction waits for the one
// before it, so hashing one message leaves the unit idle most cycles, and a
// second, independent message fills them: two messages hashed together take
// little more time than one. batchlake hashes every input byte three times
// (the file, the record's request, the shard it is written to), so paired
// streams are most of its hashing. Without the extensions (or under the
// purego build tag) a portable compression function runs each message in
// turn.
package sha256x2
