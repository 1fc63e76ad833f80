package fakeopenai

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// maxUpload is the largest file the server accepts: OpenAI's Files limit.
const maxUpload = 512 << 20

// File is a file object as the API returns it.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt *int64 `json:"expires_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
}

type file struct {
	File
	data []byte
	seq  int
}

var filePurposes = map[string]bool{"assistants": true, "batch": true, "fine-tune": true, "vision": true, "user_data": true, "evals": true}

// storeFile adds a file, named id or a new id if id is empty; s.mu must be held.
func (s *Server) storeFile(ctx context.Context, id, name, purpose string, data []byte) (*file, error) {
	id, seq := s.newIDOr(id, "file")
	now := s.opts.Now()
	f := &file{File: File{
		ID:        id,
		Object:    "file",
		Bytes:     int64(len(data)),
		CreatedAt: now.Unix(),
		Filename:  name,
		Purpose:   purpose,
		Status:    "processed",
	}, data: data, seq: seq}
	if purpose == "batch" || purpose == "batch_output" {
		// Batch files expire after 30 days by default.
		exp := now.Add(30 * 24 * time.Hour).Unix()
		f.ExpiresAt = &exp
	}
	return f, s.saveFile(ctx, f)
}

// sortedFiles lists files newest first; s.mu must be held.
func (s *Server) sortedFiles(ctx context.Context) ([]*file, error) {
	fs, err := s.allFiles(ctx)
	slices.SortFunc(fs, func(a, b *file) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.seq, a.seq))
	})
	return fs, err
}

func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	refuse := s.faults.UploadRefused > 0
	status := cmp.Or(s.faults.UploadStatus, http.StatusInternalServerError)
	if refuse {
		s.faults.UploadRefused--
	}
	s.mu.Unlock()
	if refuse {
		setFault(w, "upload refused")
		// Drain the body first, as a real front end would, so the client
		// sees the status rather than a reset connection.
		_, _ = io.Copy(io.Discard, r.Body)
		s.faultError(w, r, status)
		return
	}

	r.Body = http.MaxBytesReader(w, r.Body, maxUpload+1<<20)
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Could not parse multipart form: "+err.Error())
		return
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	purpose := r.FormValue("purpose")
	if !filePurposes[purpose] {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("%q is not one of the supported purposes.", purpose))
		return
	}
	fh, hdr, err := r.FormFile("file")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Missing file: "+err.Error())
		return
	}
	defer func() { _ = fh.Close() }()
	data, err := io.ReadAll(fh)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Could not read file: "+err.Error())
		return
	}
	s.mu.Lock()
	slow := s.faults.UploadSlow > 0
	delay := cmp.Or(s.faults.UploadDelay, 2*time.Second)
	if slow {
		s.faults.UploadSlow--
	}
	s.mu.Unlock()
	if slow {
		setFault(w, "upload slow")
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // the client gave up first: nothing is stored
		}
	}
	s.mu.Lock()
	f, err := s.storeFile(stored(r), "", hdr.Filename, purpose, data)
	s.mu.Unlock()
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, f.File)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 10000
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid limit: must be between 1 and 10000.")
			return
		}
		limit = n
	}
	s.mu.Lock()
	all, err := s.sortedFiles(stored(r))
	if err != nil {
		s.mu.Unlock()
		storeError(w, err)
		return
	}
	var items []File
	for _, f := range all {
		if p := q.Get("purpose"); p != "" && f.Purpose != p {
			continue
		}
		items = append(items, f.File)
	}
	s.mu.Unlock()
	if q.Get("order") == "asc" {
		slices.Reverse(items)
	}
	l, err := page(items, func(f File) string { return f.ID }, q.Get("after"), limit)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid after: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// lookFile finds a file the client may read, or answers 404 itself.
func (s *Server) lookFile(w http.ResponseWriter, r *http.Request, id string) (*file, bool) {
	s.mu.Lock()
	f, err := s.lookupFile(stored(r), id)
	gone := f != nil && s.faults.FilesGone && f.Purpose == "batch_output"
	s.mu.Unlock()
	if err != nil {
		storeError(w, err)
		return nil, false
	}
	if f == nil || gone {
		if gone {
			setFault(w, "file gone")
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "No such File object: "+id)
		return nil, false
	}
	return f, true
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.lookFile(w, r, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, f.File)
	}
}

func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) {
	f, ok := s.lookFile(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	// File data is never changed after it is stored, so it is read unlocked.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.data)
}
