package weights

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// selfHoldingPickles are dicts that hold themselves under the keys stateDictOf looks into, as
// pickle.dumps writes them (protocol 2): d = {}; d["model"] = d (21 bytes), the same under
// "state_dict", and a cycle through two dicts.
var selfHoldingPickles = map[string]string{
	"model":      "\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01h\x00s.",
	"state_dict": "\x80\x02}q\x00X\n\x00\x00\x00state_dictq\x01h\x00s.",
	"two levels": "\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01}q\x02X\n\x00\x00\x00state_dictq\x03h\x00ss.",
}

// TestSelfHoldingDictIsAnError: a .pth whose dict holds itself is refused with an error, in the zip
// and the legacy (bare pickle) format, not a fatal stack overflow.
func TestSelfHoldingDictIsAnError(t *testing.T) {
	for name, pkl := range selfHoldingPickles {
		_, err := ReadTorch(torchZip(t, []byte(pkl), nil))
		if err == nil || !strings.Contains(err.Error(), "nested more than 4 dicts deep") {
			t.Errorf("%s (zip): %v; want the nesting refused", name, err)
		}
		bare := filepath.Join(t.TempDir(), "self.pth")
		if err := os.WriteFile(bare, []byte(pkl), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadStateDict(bare); err == nil {
			t.Errorf("%s (bare pickle): accepted", name)
		}
	}
}

// TestWeightFilesAreBounded: weights named by a device (net.pretrained: /dev/zero, --weights) are
// refused as no regular file, by every reader and by Resolve's hash check, without reading them.
func TestWeightFilesAreBounded(t *testing.T) {
	link := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", link} {
		for name, read := range map[string]func(string) (*File, error){"ReadStateDict": ReadStateDict, "Read": Read, "ReadTorch": ReadTorch} {
			if _, err := read(p); err == nil || !strings.Contains(err.Error(), "is a device") {
				t.Errorf("%s(%s): %v; want it refused as a device", name, p, err)
			}
		}
		sum := strings.Repeat("0", 64)
		if _, err := Resolve(t.Context(), p, FetchOptions{SHA256: sum}); err == nil || !strings.Contains(err.Error(), "is a device") {
			t.Errorf("Resolve(%s) with a SHA-256: %v", p, err)
		}
	}
}

// FuzzTorchPickle: no pickle makes the state_dict reader panic or overflow its stack; whatever it
// accepts is a non-empty state_dict.
func FuzzTorchPickle(f *testing.F) {
	for _, pkl := range selfHoldingPickles {
		f.Add([]byte(pkl))
	}
	f.Add([]byte(oneTensor(3, 1, 2, 1)))
	f.Add([]byte("\x80\x02" + global("os", "system") + binunicode("id") + "\x85R."))
	f.Add([]byte("\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02h\x02au."))
	f.Fuzz(func(t *testing.T, pkl []byte) {
		u := &unpickler{maxBytes: 1 << 20, storages: map[string]*storage{}}
		obj, _, err := u.unpickle(pkl)
		if err != nil {
			return
		}
		if sd, err := stateDictOf(obj, 0); err == nil && len(sd) == 0 {
			t.Error("an empty state_dict accepted")
		}
	})
}

// TestFetchGivesUpOnAStalledServer: a server that sends 100 bytes and stalls ends the download
// within a few idle timeouts, leaving nothing in the cache.
func TestFetchGivesUpOnAStalledServer(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		_, _ = w.Write(payload[:100])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	dir := t.TempDir()
	start := time.Now()
	_, err := Fetch(t.Context(), srv.URL+"/x.pth", FetchOptions{CacheDir: dir, SHA256: payloadSHA(), IdleTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no data received for 100ms") {
		t.Errorf("a stalled server: %v; want an idle-timeout error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("gave up after %v", d)
	}
	if got := cacheEntries(t, dir); len(got) != 0 {
		t.Errorf("the cache holds %v", got)
	}
}

// TestFetchRemovesTemporariesOfKilledDownloads: a temporary left by a killed download (unwritten for
// longer than stalePartAge) is removed by the next download of that name; a fresh one, which a live
// download may be writing, is left.
func TestFetchRemovesTemporariesOfKilledDownloads(t *testing.T) {
	srv, _ := weightsServer(t, nil)
	dir := t.TempDir()
	stale, fresh := filepath.Join(dir, ".x.pth.123.part"), filepath.Join(dir, ".x.pth.456.part")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, payload[:1000], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-stalePartAge(0) - time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(t.Context(), srv.URL+"/x.pth", FetchOptions{CacheDir: dir, SHA256: payloadSHA()}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cacheEntries(t, dir), ","); got != ".x.pth.456.part,x.pth" {
		t.Errorf("the cache holds %s; want the fresh temporary and the download", got)
	}
}

// TestFetchRedactsCredentials: the password of a user:password@ URL appears in no error.
func TestFetchRedactsCredentials(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	withCreds := strings.Replace(srv.URL, "http://", "http://alice:s3cret-pw@", 1)
	for _, u := range []string{withCreds + "/x.pth", withCreds + "/plain.pth", "http://alice:s3cret-pw@example.com/x.pth",
		"https://alice:s3cret-pw@exa mple.com/x.pth", withCreds + "/"} {
		_, err := Fetch(t.Context(), u, FetchOptions{CacheDir: t.TempDir()})
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("Fetch(%s): %v; want an error without the password", u, err)
		}
	}
}
