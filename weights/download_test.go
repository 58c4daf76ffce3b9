package weights

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// payload is the "weights" the test servers serve, and its digest.
var payload = bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB

func payloadSHA() string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// weightsServer serves payload on 127.0.0.1 under any path, with Range support; drop(n), when set,
// says how many bytes request n (1-based) sends before the connection is cut.
func weightsServer(t *testing.T, drop func(n int) int) (*httptest.Server, *atomic.Int32) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(requests.Add(1))
		if drop != nil {
			if cut := drop(n); cut >= 0 {
				start := 0
				if rg := r.Header.Get("Range"); rg != "" {
					start, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
					w.Header().Set("Content-Range", "bytes "+strconv.Itoa(start)+"-"+strconv.Itoa(len(payload)-1)+"/"+strconv.Itoa(len(payload)))
					w.Header().Set("Content-Length", strconv.Itoa(len(payload)-start))
					w.WriteHeader(http.StatusPartialContent)
				} else {
					w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
				}
				_, _ = w.Write(payload[start:min(start+cut, len(payload))])
				panic(http.ErrAbortHandler) // cut the connection mid-body
			}
		}
		http.ServeContent(w, r, "w", time.Time{}, bytes.NewReader(payload))
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// cacheEntries lists what a cache directory holds, temporary files included.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestFetchDownloadsChecksAndReuses(t *testing.T) {
	srv, requests := weightsServer(t, nil)
	dir := t.TempDir()
	name := "resnet-" + payloadSHA()[:8] + ".pth" // torchvision's naming: the digest's first 8 hex digits
	var progress bytes.Buffer
	path, err := Fetch(context.Background(), srv.URL+"/models/"+name, FetchOptions{CacheDir: dir, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, payload) || path != filepath.Join(dir, name) {
		t.Fatalf("downloaded to %s (%d bytes)", path, len(got))
	}
	if !strings.Contains(progress.String(), name) {
		t.Errorf("no progress bar naming %s: %q", name, progress.String())
	}
	again, err := Fetch(context.Background(), srv.URL+"/models/"+name, FetchOptions{CacheDir: dir})
	if err != nil || again != path || requests.Load() != 1 {
		t.Errorf("second fetch: %s, %v, %d requests in all (want the cached copy, 1 request)", again, err, requests.Load())
	}
	// A cached copy that no longer matches is downloaded again.
	if err := os.WriteFile(path, []byte("corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(context.Background(), srv.URL+"/models/"+name, FetchOptions{CacheDir: dir}); err != nil || requests.Load() != 2 {
		t.Errorf("corrupt cache: %v, %d requests", err, requests.Load())
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, payload) {
		t.Error("the corrupt cached copy was not replaced")
	}
	// A full digest given by the user, for a name without a prefix.
	if _, err := Fetch(context.Background(), srv.URL+"/plain.pth", FetchOptions{CacheDir: dir, SHA256: payloadSHA()}); err != nil {
		t.Error(err)
	}
	if got := cacheEntries(t, dir); strings.Join(got, ",") != "plain.pth,"+name {
		t.Errorf("cache holds %v", got)
	}
}

func TestFetchRefusesAWrongHashAndCachesNothing(t *testing.T) {
	srv, _ := weightsServer(t, nil)
	dir := t.TempDir()
	if _, err := Fetch(context.Background(), srv.URL+"/resnet-0000aaaa.pth", FetchOptions{CacheDir: dir}); err == nil ||
		!strings.Contains(err.Error(), "does not start with 0000aaaa") || !strings.Contains(err.Error(), "nothing was cached") {
		t.Errorf("wrong prefix: %v", err)
	}
	wrong := strings.Repeat("0", 64)
	if _, err := Fetch(context.Background(), srv.URL+"/plain.pth", FetchOptions{CacheDir: dir, SHA256: wrong}); err == nil ||
		!strings.Contains(err.Error(), "expected "+wrong) {
		t.Errorf("wrong sha256: %v", err)
	}
	if got := cacheEntries(t, dir); len(got) != 0 {
		t.Errorf("after failed checks the cache holds %v", got)
	}
}

// A connection cut mid-body is resumed with a Range request; one that keeps failing ends in a clean
// error, leaving no file behind.
func TestFetchResumesADroppedConnection(t *testing.T) {
	srv, requests := weightsServer(t, func(n int) int {
		if n == 1 {
			return len(payload) / 3
		}
		return -1
	})
	dir := t.TempDir()
	path, err := Fetch(context.Background(), srv.URL+"/x.pth", FetchOptions{CacheDir: dir, SHA256: payloadSHA()})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, payload) || requests.Load() != 2 {
		t.Errorf("resumed download: %d bytes, %d requests", len(got), requests.Load())
	}

	srv, requests = weightsServer(t, func(int) int { return 1000 })
	dir = t.TempDir()
	_, err = Fetch(context.Background(), srv.URL+"/x.pth", FetchOptions{CacheDir: dir, SHA256: payloadSHA()})
	if err == nil || !strings.Contains(err.Error(), "after 4 attempt(s)") {
		t.Errorf("always dropping: %v", err)
	}
	if got := cacheEntries(t, dir); len(got) != 0 || requests.Load() != 4 {
		t.Errorf("after a failed download the cache holds %v (%d requests)", got, requests.Load())
	}
}

func TestFetchRefusesUnsafeRequests(t *testing.T) {
	srv, _ := weightsServer(t, nil)
	dir := t.TempDir()
	for _, c := range []struct{ url, sha, want string }{
		{"http://example.com/resnet-0676ba61.pth", "", "plain http is refused"},
		{"ftp://example.com/resnet-0676ba61.pth", "", "expected https"},
		{srv.URL + "/plain.pth", "", "no hash to check"},
		{srv.URL + "/plain.pth", "abc", "expected 64 lower-case hex digits"},
		{srv.URL + "/", payloadSHA(), "names no file"},
	} {
		if _, err := Fetch(context.Background(), c.url, FetchOptions{CacheDir: dir, SHA256: c.sha}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.url, err, c.want)
		}
	}
	if _, err := Fetch(context.Background(), srv.URL+"/big.pth", FetchOptions{CacheDir: dir, SHA256: payloadSHA(), MaxBytes: 1000}); err == nil ||
		!strings.Contains(err.Error(), "more than the 1000 allowed") {
		t.Errorf("over the size limit: %v", err)
	}
	if got := cacheEntries(t, dir); len(got) != 0 {
		t.Errorf("cache holds %v", got)
	}
}

func TestResolveAndCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d, _ := CacheDir(); d != "/xdg/trainer/weights" {
		t.Errorf("CacheDir with XDG_CACHE_HOME: %s", d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := CacheDir(); d != "/home/u/.cache/trainer/weights" {
		t.Errorf("CacheDir without XDG_CACHE_HOME: %s", d)
	}
	local := filepath.Join(t.TempDir(), "w.pth")
	if err := os.WriteFile(local, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Resolve(context.Background(), local, FetchOptions{SHA256: payloadSHA()}); err != nil || p != local {
		t.Errorf("a local path with its digest: %s, %v", p, err)
	}
	if _, err := Resolve(context.Background(), local, FetchOptions{SHA256: strings.Repeat("1", 64)}); err == nil {
		t.Error("a local path with a wrong digest was accepted")
	}
	for name, want := range map[string]string{"resnet50-0676ba61.pth": "0676ba61", "efficientnet_b0_rwightman-7f5810bc.pth": "7f5810bc",
		"vit-ABCDEF12.pth": "", "model.pth": ""} {
		if got := HashPrefix(name); got != want {
			t.Errorf("HashPrefix(%s) = %q, want %q", name, got, want)
		}
	}
}

// A server that ignores the Range request of a resumed download sends the whole file again: the
// download restarts from byte 0 rather than appending it.
func TestFetchRestartsWhenRangeIsIgnored(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		if requests.Add(1) == 1 {
			_, _ = w.Write(payload[:len(payload)/2])
			panic(http.ErrAbortHandler)
		}
		_, _ = w.Write(payload) // 200 and the whole file, whatever the Range header said
	}))
	defer srv.Close()
	path, err := Fetch(context.Background(), srv.URL+"/x.pth", FetchOptions{CacheDir: t.TempDir(), SHA256: payloadSHA()})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, payload) || requests.Load() != 2 {
		t.Errorf("%d bytes after %d requests", len(got), requests.Load())
	}
}
