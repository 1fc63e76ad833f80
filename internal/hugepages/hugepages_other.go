//go:build !(linux && cgo && (amd64 || arm64))

package hugepages

// Enabled reports false: this platform's build advises no mappings.
func Enabled() bool { return false }

// Disable does nothing: this platform's build advises no mappings.
func Disable() {}
