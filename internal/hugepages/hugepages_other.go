//go:build !(linux && cgo && (amd64 || arm64))

package hugepages

// Enabled reports false: this platform's build advises no mappings.
func Enabled() bool { return false }

// Advised reports no mappings advised.
func Advised() (mappings, bytes int64) { return 0, 0 }

// Disable does nothing: this platform's build advises no mappings.
func Disable() {}
