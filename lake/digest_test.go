package lake

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plainFields is the identity rule written out: every field's length as 8
// big-endian bytes, then the field, all of it hashed with SHA-256.
func plainFields(fields ...string) Digest {
	var b []byte
	for _, s := range fields {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	return sha256.Sum256(b)
}

func TestHashFieldsMatchesTheRule(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name   string
		fields []string
	}{
		{"none", nil},
		{"one empty", []string{""}},
		{"split differently", []string{"ab", "c"}},
		{"record id", []string{"tenant", "key-1", "", "v1", long(64)}},
		{"at the stack buffer", []string{long(1024 - 16), ""}},
		{"over the stack buffer", []string{long(1024 - 16), "y"}},
		{"at the field buffer", []string{long(fieldBuffer - 8)}},
		{"many short fields", strings.Split("a,bb,ccc,,dddd,eeeee,ffffff,g,hh,iii,jjjj,kkkkk,llllll,m,nn,ooo,pppp,qqqqq,rrrrrr,s", ",")},
		{"over the field buffer", []string{long(fieldBuffer - 8), "z", long(3 * fieldBuffer), "w"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := plainFields(tc.fields...)
			if got := HashFields(tc.fields...); got != want {
				t.Errorf("HashFields = %s, want %s", got.Hex(), want.Hex())
			}
			// Hashed beside another list, shorter and longer, on either side.
			for _, other := range [][]string{nil, {"tenant", "k"}, append(tc.fields, tc.fields...)} {
				a, b := HashFields2(tc.fields, other)
				c, d := HashFields2(other, tc.fields)
				if a != want || d != want || b != plainFields(other...) || c != b {
					t.Errorf("HashFields2 beside %d fields: %s and %s, want %s", len(other), a.Hex(), d.Hex(), want.Hex())
				}
			}
			h := NewFieldHasher()
			for i, s := range tc.fields {
				if i%2 == 0 {
					h.AddString(s)
				} else {
					h.Add([]byte(s))
				}
			}
			if got := h.Sum(); got != want {
				t.Errorf("FieldHasher = %s, want %s", got.Hex(), want.Hex())
			}
			// Sum does not end the hash: more fields may follow.
			h.AddString("more")
			if got, want := h.Sum(), plainFields(append(tc.fields, "more")...); got != want {
				t.Errorf("FieldHasher after Sum = %s, want %s", got.Hex(), want.Hex())
			}
		})
	}
	// A digest added by AddDigest is the field Add(d[:]) would add, wherever
	// the buffer stands when it comes.
	d := sha256.Sum256([]byte("request"))
	for n := 0; n <= fieldBuffer; n++ {
		h := NewFieldHasher().AddString(strings.Repeat("k", n)).AddDigest(d).AddDigest(d)
		if got, want := h.Sum(), plainFields(strings.Repeat("k", n), string(d[:]), string(d[:])); got != want {
			t.Fatalf("AddDigest after a field of %d bytes = %s, want %s", n, got.Hex(), want.Hex())
		}
	}
	if plainFields("ab", "c") == plainFields("a", "bc") {
		t.Fatal("the length prefix should tell the fields apart")
	}
}

func TestHashCallMatchesTheRule(t *testing.T) {
	for _, n := range []int{0, 1, 600, 4096 - 24 - 4 - 20, 4096 - 24 - 4 - 20 + 1, 10000} {
		body := strings.Repeat("b", n)
		if got, want := HashCall("POST", "/v1/chat/completions", []byte(body)), plainFields("POST", "/v1/chat/completions", body); got != want {
			t.Errorf("body of %d bytes: HashCall = %s, want %s", n, got.Hex(), want.Hex())
		}
	}
	// Two calls hashed together, of every pair of these body lengths.
	lengths := []int{0, 1, 27, 28, 35, 36, 91, 92, 600, 651, 4096, 10000}
	for _, n := range lengths {
		for _, m := range lengths {
			a := Call{"POST", "/v1/chat/completions", []byte(strings.Repeat("a", n))}
			b := Call{"POST", "/v1/embeddings", []byte(strings.Repeat("b", m))}
			da, db := HashCall2(a, b)
			if da != HashCall(a.Method, a.URL, a.Body) || db != HashCall(b.Method, b.URL, b.Body) {
				t.Errorf("bodies of %d and %d bytes: HashCall2 differs from HashCall", n, m)
			}
		}
	}
}

// TestHashFileContext: a file's digest and size, and the hash given up once
// its context is done.
func TestHashFileContext(t *testing.T) {
	content := []byte(strings.Repeat("a line of a result file\n", 1<<14))
	p := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	d, n, err := HashFileContext(context.Background(), p)
	if err != nil || d != sha256.Sum256(content) || n != int64(len(content)) {
		t.Fatalf("HashFileContext = %s, %d, %v; want %x, %d", d, n, err, sha256.Sum256(content), len(content))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := HashFileContext(ctx, p); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled hash: err = %v, want context.Canceled", err)
	}
	if _, _, err := HashFileContext(context.Background(), p+".missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: err = %v, want fs.ErrNotExist", err)
	}
}

// TestHashFilePair: two files hashed together give each one's digest and
// size, whichever is longer and wherever their reads end.
func TestHashFilePair(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{0, 1, 64, 256<<10 - 1, 256 << 10, 256<<10 + 1, 1<<20 + 13}
	paths := make([]string, len(sizes))
	for i, n := range sizes {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(j*7 + i)
		}
		paths[i] = filepath.Join(dir, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(paths[i], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for i := range paths {
		for j := range paths {
			da, na, db, nb, err := HashFilePair(ctx, paths[i], paths[j])
			wa, _, _ := HashFileContext(ctx, paths[i])
			wb, _, _ := HashFileContext(ctx, paths[j])
			if err != nil || da != wa || db != wb || na != int64(sizes[i]) || nb != int64(sizes[j]) {
				t.Errorf("files of %d and %d bytes: %s %d, %s %d, %v; want %s, %s", sizes[i], sizes[j], da, na, db, nb, err, wa, wb)
			}
		}
	}
	if _, _, _, _, err := HashFilePair(ctx, paths[1], paths[1]+".missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: err = %v, want fs.ErrNotExist", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, _, err := HashFilePair(cancelled, paths[5], paths[6]); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled hash: err = %v, want context.Canceled", err)
	}
}

// TestAppendHex: AppendHex renders every digest as hex.AppendEncode does,
// after whatever dst holds.
func TestAppendHex(t *testing.T) {
	var ds []Digest
	var d Digest
	ds = append(ds, d)
	for i := range d {
		d[i] = 0xff
	}
	ds = append(ds, d)
	for i := range 256 {
		ds = append(ds, Sum([]byte{byte(i)}))
		for j := range d {
			d[j] = byte(i + j)
		}
		ds = append(ds, d)
	}
	for _, d := range ds {
		for _, pre := range []string{"", "x", "0123456789"} {
			want := hex.AppendEncode([]byte(pre), d[:])
			if got := d.AppendHex([]byte(pre)); string(got) != string(want) {
				t.Fatalf("AppendHex(%q, %x) = %q", pre, d[:], got)
			}
		}
		if d.Hex() != hex.EncodeToString(d[:]) {
			t.Fatalf("Hex(%x) = %q", d[:], d.Hex())
		}
	}
}
