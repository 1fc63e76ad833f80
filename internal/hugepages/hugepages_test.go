//go:build linux && cgo && (amd64 || arm64)

package hugepages

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping in /proc/self/smaps that holds
// addr ("hg" among them: advised MADV_HUGEPAGE).
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := vmaRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping holds %#x", addr)
	return nil
}

// vmaRange parses a mapping's first line ("7f12a000-7f12c000 rw-p ...").
func vmaRange(line string) (lo, hi uintptr, ok bool) {
	r, _, _ := strings.Cut(line, " ")
	a, b, found := strings.Cut(r, "-")
	if !found {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(a, 16, 64)
	y, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(x), uintptr(y), true
}

func advised(t *testing.T, addr uintptr) bool {
	for _, f := range vmFlags(t, addr) {
		if f == "hg" {
			return true
		}
	}
	return false
}

func needTHP(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("kernel without transparent huge pages: %v", err)
	}
}

func TestMappingsAdvised(t *testing.T) {
	needTHP(t)
	if !Enabled() {
		t.Skip("BATCHLAKE_HUGEPAGES turns the advice off in this environment")
	}
	const mib = 1 << 20
	rw := syscall.PROT_READ | syscall.PROT_WRITE
	anon := syscall.MAP_PRIVATE | syscall.MAP_ANONYMOUS
	for _, tc := range []struct {
		name  string
		n     uintptr
		prot  int
		flags int
		want  bool
	}{
		{"private anonymous 4 MiB", 4 * mib, rw, anon, true},
		{"exactly one huge page", 2 * mib, rw, anon, true},
		{"under one huge page", 2*mib - 4096, rw, anon, false},
		{"reservation", 4 * mib, syscall.PROT_NONE, anon, false},
		{"read-only", 4 * mib, syscall.PROT_READ, anon, false},
		{"thread stack", 8 * mib, rw, anon | syscall.MAP_STACK, false},
		{"shared", 4 * mib, rw, syscall.MAP_SHARED | syscall.MAP_ANONYMOUS, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := mapAnon(tc.n, tc.prot, tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Syscall(syscall.SYS_MUNMAP, p, tc.n, 0)
			if got := advised(t, p); got != tc.want {
				t.Errorf("advised %v, want %v", got, tc.want)
			}
		})
	}
}

// mmap keeps the C library's contract on failure: MAP_FAILED and errno.
func TestMapFailureKeepsErrno(t *testing.T) {
	_, err := mapAnon(0, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("mmap of 0 bytes: %v, want EINVAL", err)
	}
}

// sink keeps the heap test's buffer reachable.
var sink []byte

// The Go runtime maps its heap through the C library's mmap in a cgo binary
// (runtime/cgo's x_cgo_mmap): a large allocation lands in advised memory.
// The helper process reports it, with and without BATCHLAKE_HUGEPAGES=0, and
// after Disable.
func TestGoHeapAdvised(t *testing.T) {
	if h := os.Getenv("HUGEPAGES_TEST_HELPER"); h != "" {
		if h == "disable" {
			Disable()
		}
		sink = make([]byte, 64<<20)
		sink[0] = 1
		fmt.Printf("advised=%v\n", advised(t, uintptr(unsafe.Pointer(&sink[32<<20]))))
		runtime.KeepAlive(sink)
		return
	}
	needTHP(t)
	for _, tc := range []struct {
		env    string
		helper string // disable: the helper calls Disable first
		want   string
	}{
		{"BATCHLAKE_HUGEPAGES=1", "1", "advised=true"},
		{"BATCHLAKE_HUGEPAGES=0", "1", "advised=false"},
		{"BATCHLAKE_HUGEPAGES=off", "1", "advised=false"},
		{"BATCHLAKE_HUGEPAGES=1", "disable", "advised=false"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGoHeapAdvised$", "-test.v")
		cmd.Env = append(os.Environ(), "HUGEPAGES_TEST_HELPER="+tc.helper, tc.env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s, helper %s: %v\n%s", tc.env, tc.helper, err, out)
		}
		if !strings.Contains(string(out), tc.want+"\n") {
			t.Errorf("%s, helper %s: want %s in\n%s", tc.env, tc.helper, tc.want, out)
		}
	}
}
