package download

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// server serves body at /file on 127.0.0.1: honouring Range unless ignoreRange, dropping the
// connection after dropAfter bytes of the first dropTimes responses, and recording each request's
// Range header.
type server struct {
	body        []byte
	dropAfter   int
	dropTimes   int
	ignoreRange bool
	mu          sync.Mutex
	ranges      []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	if r.URL.Path != "/file" {
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	drop := s.dropTimes > 0
	s.dropTimes--
	s.mu.Unlock()
	if r.Header.Get("Range") != "" && !s.ignoreRange {
		http.ServeContent(w, r, "file", time.Time{}, bytes.NewReader(s.body))
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(s.body)))
	w.WriteHeader(http.StatusOK)
	if drop {
		w.Write(s.body[:s.dropAfter])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection closes mid-body
	}
	w.Write(s.body)
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func testBody() []byte {
	b := make([]byte, 300_000)
	for i := range b {
		b[i] = byte(i * 7 / 3)
	}
	return b
}

// TestFileResumes: a transfer dropped mid-body is resumed with a Range request from the bytes held, the
// result checked and renamed into place; progress reaches the total.
func TestFileResumes(t *testing.T) {
	body := testBody()
	s := &server{body: body, dropAfter: 100_000, dropTimes: 1}
	ts := httptest.NewServer(s)
	defer ts.Close()
	dest := filepath.Join(t.TempDir(), "x.tgz")
	var last, total int64
	got, err := File(ts.URL+"/file", dest, Options{SHA256: digest(body), Size: int64(len(body)),
		Progress: func(d, t int64) { last, total = d, t }})
	if err != nil || !got {
		t.Fatalf("File: %v, %v", got, err)
	}
	b, _ := os.ReadFile(dest)
	if !bytes.Equal(b, body) {
		t.Fatal("the file differs from the served one")
	}
	if _, err := os.Stat(dest + ".part"); !os.IsNotExist(err) {
		t.Errorf("the .part file is left: %v", err)
	}
	req := s.requests()
	if len(req) != 2 || req[0] != "" || !strings.HasPrefix(req[1], "bytes=") || req[1] == "bytes=0-" {
		t.Errorf("requests' Range headers %q, want none then a resume past byte 0", req)
	}
	if last != int64(len(body)) || total != int64(len(body)) {
		t.Errorf("progress ended at %d of %d", last, total)
	}
	// A second call finds the file and asks nothing.
	if got, err := File(ts.URL+"/file", dest, Options{SHA256: digest(body)}); err != nil || got {
		t.Errorf("second call: downloaded %v, %v", got, err)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("the second call made requests: %d in all", n)
	}
}

// TestFileResumesAPart: a .part left by a stopped process is continued from its end, and a server
// that ignores Range makes the download start over rather than append a second copy.
func TestFileResumesAPart(t *testing.T) {
	body := testBody()
	for _, ignore := range []bool{false, true} {
		s := &server{body: body, ignoreRange: ignore}
		ts := httptest.NewServer(s)
		dest := filepath.Join(t.TempDir(), "x.tgz")
		os.WriteFile(dest+".part", body[:12345], 0o644)
		if _, err := File(ts.URL+"/file", dest, Options{SHA256: digest(body)}); err != nil {
			t.Fatalf("ignoreRange %v: %v", ignore, err)
		}
		if b, _ := os.ReadFile(dest); !bytes.Equal(b, body) {
			t.Errorf("ignoreRange %v: the file differs from the served one", ignore)
		}
		if req := s.requests(); len(req) != 1 || req[0] != "bytes=12345-" {
			t.Errorf("ignoreRange %v: Range headers %q, want bytes=12345-", ignore, req)
		}
		ts.Close()
	}
}

// TestFileRefuses: a wrong digest removes the download and says both digests; a 404 is not retried;
// an existing wrong file is not replaced; an expected digest that is not one is refused first.
func TestFileRefuses(t *testing.T) {
	body := testBody()
	s := &server{body: body}
	ts := httptest.NewServer(s)
	defer ts.Close()
	dir := t.TempDir()
	dest := filepath.Join(dir, "x.tgz")
	wrong := digest([]byte("something else"))
	_, err := File(ts.URL+"/file", dest, Options{SHA256: wrong})
	if err == nil || !strings.Contains(err.Error(), digest(body)) || !strings.Contains(err.Error(), wrong) {
		t.Errorf("wrong digest: %v", err)
	}
	for _, p := range []string{dest, dest + ".part"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after a wrong digest", p)
		}
	}
	if _, err := File(ts.URL+"/file", dest, Options{SHA256: digest(body), Size: 5}); err == nil || !strings.Contains(err.Error(), "expected 5") {
		t.Errorf("wrong size: %v", err)
	}
	n := len(s.requests())
	if _, err := File(ts.URL+"/missing", dest, Options{SHA256: digest(body)}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	if got := len(s.requests()) - n; got != 1 {
		t.Errorf("a 404 was asked %d times, want once", got)
	}
	os.WriteFile(dest, []byte("not it"), 0o644)
	if _, err := File(ts.URL+"/file", dest, Options{SHA256: digest(body)}); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("an existing wrong file: %v", err)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("z", 64)} {
		if _, err := File(ts.URL+"/file", filepath.Join(dir, "y"), Options{SHA256: bad}); err == nil {
			t.Errorf("expected digest %q accepted", bad)
		}
	}
}

// TestFileGivesUp: a server that always drops the connection ends in an error that says how to resume,
// keeping the bytes held.
func TestFileGivesUp(t *testing.T) {
	body := testBody()
	s := &server{body: body, dropAfter: 1000, dropTimes: 100, ignoreRange: true}
	ts := httptest.NewServer(s)
	defer ts.Close()
	dest := filepath.Join(t.TempDir(), "x.tgz")
	_, err := File(ts.URL+"/file", dest, Options{SHA256: digest(body), Retries: 2})
	if err == nil || !strings.Contains(err.Error(), "run again to resume") {
		t.Fatalf("err = %v", err)
	}
	if st, err := os.Stat(dest + ".part"); err != nil || st.Size() == 0 {
		t.Errorf("the partial download was not kept: %v", err)
	}
}
