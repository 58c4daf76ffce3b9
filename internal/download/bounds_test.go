package download

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileGivesUpOnAStalledServer: a server that sends 100 bytes and then stalls fails within a few
// idle timeouts (each retry waits one), not never; the bytes received stay for a resume.
func TestFileGivesUpOnAStalledServer(t *testing.T) {
	body := testBody()
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body[:100]) // the whole file from its start, whatever the Range
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(release)
	dest := filepath.Join(t.TempDir(), "x.tgz")
	start := time.Now()
	_, err := File(ts.URL+"/file", dest, Options{SHA256: digest(body), Size: int64(len(body)), Retries: 1, IdleTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no data received for 200ms") {
		t.Errorf("a stalled server: %v; want an idle-timeout error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("gave up after %v", d)
	}
}

// TestFileNeverWritesPastTheKnownSize: a mirror sending an endless body (no Content-Length) is
// refused once it passes the archive's known size; nothing past it is written and the .part removed.
func TestFileNeverWritesPastTheKnownSize(t *testing.T) {
	chunk := make([]byte, 32<<10)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer ts.Close()
	dest := filepath.Join(t.TempDir(), "x.tgz")
	const size = 100_000
	_, err := File(ts.URL+"/file", dest, Options{SHA256: digest(nil), Size: size, IdleTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "more than the 100000 bytes expected") {
		t.Errorf("an endless body: %v", err)
	}
	for _, p := range []string{dest, dest + ".part"} {
		if st, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind, %d bytes", p, st.Size())
		}
	}
}

// TestFileLeavesNoEmptyPart: a first try that receives nothing (the server answers 500 every time)
// leaves no 0-byte .part behind.
func TestFileLeavesNoEmptyPart(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer ts.Close()
	dest := filepath.Join(t.TempDir(), "x.tgz")
	if _, err := File(ts.URL+"/file", dest, Options{SHA256: digest(nil), Retries: 1}); err == nil {
		t.Fatal("a failing server gave no error")
	}
	if _, err := os.Stat(dest + ".part"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a .part is left after a try that received nothing: %v", err)
	}
}

// TestFileRedactsCredentials: a URL with user:password@ never shows the password in an error.
func TestFileRedactsCredentials(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	defer ts.Close()
	withCreds := strings.Replace(ts.URL, "http://", "http://alice:s3cret-pw@", 1) + "/file"
	for _, opts := range []Options{{SHA256: digest(nil)}, {SHA256: "short"}} {
		_, err := File(withCreds, filepath.Join(t.TempDir(), "x"), opts)
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "alice:xxxxx@") {
			t.Errorf("error %v; want the URL with its password redacted", err)
		}
	}
	if got := Redact("https://u:p@example.com/a?b=c"); got != "https://u:xxxxx@example.com/a?b=c" {
		t.Errorf("Redact = %q", got)
	}
}
