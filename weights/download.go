package weights

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/trainer/trainer/internal/bounded"
	dl "github.com/trainer/trainer/internal/download"
)

// Pretrained weights named by URL are downloaded once into the cache directory and checked against a
// SHA-256: the full digest the user gives, or the prefix torch hub's convention puts in the file name
// (torchvision's resnet50-0676ba61.pth: the digest starts with 0676ba61). A download goes to a
// temporary file beside its final name, resumes with a Range request when the connection drops, is
// checked, synced and only then renamed: the cache never holds a partial or unverified file. A
// transfer that receives nothing for FetchOptions.IdleTimeout is dropped (and resumed like a cut
// one); a temporary left by a killed process is removed by the next download of that name, once it
// has not grown for stalePartAge (a live download writes at least once per idle timeout). URLs in
// errors have their password redacted.

// DefaultMaxDownload bounds a download (ViT-H/14's weights are 2.5 GB).
const DefaultMaxDownload = 8 << 30

// downloadAttempts is how many times a dropped download is resumed.
const downloadAttempts = 4

// FetchOptions tune Fetch and Resolve.
type FetchOptions struct {
	// SHA256 is the expected digest (64 hex digits); empty means the hash prefix in the file name.
	SHA256 string
	// CacheDir holds the downloads; empty means CacheDir().
	CacheDir string
	// Progress receives a progress bar while downloading; nil shows none.
	Progress io.Writer
	// MaxBytes bounds the download; 0 means DefaultMaxDownload.
	MaxBytes int64
	// Client makes the requests; nil means a client with connection and header timeouts.
	Client *http.Client
	// IdleTimeout bounds the wait for each next bytes of a transfer; 0 means dl.DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// stalePartAge is how long a temporary download must have been left unwritten before another
// download of the same name removes it as left by a killed process.
func stalePartAge(idle time.Duration) time.Duration {
	if idle <= 0 {
		idle = dl.DefaultIdleTimeout
	}
	return max(10*idle, 10*time.Minute)
}

// CacheDir is where downloaded weights are kept: $XDG_CACHE_HOME/trainer/weights, else
// ~/.cache/trainer/weights.
func CacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for downloaded weights (set XDG_CACHE_HOME): %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "trainer", "weights"), nil
}

// IsURL reports whether s names weights by URL (http:// or https://) rather than by path.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// CheckURL refuses what Fetch would not download: a scheme other than https, except plain http to
// this machine's loopback address (a local mirror, or a test server), and a URL without a file name.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // its message would repeat the URL, password and all
		}
		return nil, fmt.Errorf("weights URL of %d bytes does not parse: %w", len(raw), err)
	}
	raw = u.Redacted()
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	case u.Scheme == "http":
		return nil, fmt.Errorf("weights URL %s: plain http is refused (anyone on the path could change the file): use https", raw)
	default:
		return nil, fmt.Errorf("weights URL %s: scheme %q, expected https", raw, u.Scheme)
	}
	if name := path.Base(u.Path); name == "/" || name == "." || name == "" {
		return nil, fmt.Errorf("weights URL %s names no file", raw)
	}
	return u, nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

var hashPrefixPattern = regexp.MustCompile(`-([0-9a-f]{8,64})\.`)

// HashPrefix returns the SHA-256 prefix torch hub's convention puts in a file name ("" if none): the
// first run of 8 to 64 lower-case hex digits between a '-' and a '.'.
func HashPrefix(name string) string {
	if m := hashPrefixPattern.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// checkSHA256 validates a user-given digest.
func checkSHA256(sum string) error {
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return fmt.Errorf("sha256 %q: expected 64 lower-case hex digits", sum)
	}
	return nil
}

// verifier checks a digest against what is expected of a file.
type verifier struct{ full, prefix string }

func (v verifier) check(digest string) error {
	if v.full != "" && digest != v.full {
		return fmt.Errorf("sha256 %s, expected %s", digest, v.full)
	}
	if v.prefix != "" && !strings.HasPrefix(digest, v.prefix) {
		return fmt.Errorf("sha256 %s does not start with %s, the hash prefix in the file name", digest, v.prefix)
	}
	return nil
}

// fileSHA256 hashes a file.
func fileSHA256(path string) (string, error) {
	f, _, err := bounded.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Resolve returns a local file for weights named by path or URL: a path as it is (checked against
// opts.SHA256 when given), a URL through Fetch.
func Resolve(ctx context.Context, pathOrURL string, opts FetchOptions) (string, error) {
	if IsURL(pathOrURL) {
		return Fetch(ctx, pathOrURL, opts)
	}
	if _, err := os.Stat(pathOrURL); err != nil {
		return "", fmt.Errorf("weights: %w", err)
	}
	if opts.SHA256 != "" {
		if err := checkSHA256(opts.SHA256); err != nil {
			return "", err
		}
		digest, err := fileSHA256(pathOrURL)
		if err != nil {
			return "", err
		}
		if err := (verifier{full: opts.SHA256}).check(digest); err != nil {
			return "", fmt.Errorf("weights %s: %w", pathOrURL, err)
		}
	}
	return pathOrURL, nil
}

// Fetch returns the cached copy of the weights at rawURL, downloading them first if the cache lacks
// them (or holds a copy that fails the check). See the comment at the top of this file.
func Fetch(ctx context.Context, rawURL string, opts FetchOptions) (string, error) {
	u, err := CheckURL(rawURL)
	if err != nil {
		return "", err
	}
	rawURL = u.Redacted() // what errors and output show
	name := path.Base(u.Path)
	want := verifier{full: opts.SHA256, prefix: HashPrefix(name)}
	if want.full != "" {
		if err := checkSHA256(want.full); err != nil {
			return "", err
		}
	}
	if want.full == "" && want.prefix == "" {
		return "", fmt.Errorf("weights URL %s: no hash to check the download against: its file name has no "+
			"hash prefix (as torchvision's resnet50-0676ba61.pth has), so give its sha256 (net.pretrained_sha256, --sha256)", rawURL)
	}
	dir := opts.CacheDir
	if dir == "" {
		if dir, err = CacheDir(); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("weights cache: %w", err)
	}
	final := filepath.Join(dir, name)
	if _, err := os.Stat(final); err == nil {
		digest, err := fileSHA256(final)
		if err == nil && want.check(digest) == nil {
			return final, nil
		}
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "cached %s fails its check (%v): downloading it again\n", final, want.check(digest))
		}
	}
	if err := download(ctx, u, dir, name, want, opts); err != nil {
		return "", fmt.Errorf("downloading %s: %w", rawURL, err)
	}
	return final, nil
}

// download fetches u into dir/name through a temporary file (see above).
func download(ctx context.Context, u *url.URL, dir, name string, want verifier, opts FetchOptions) (err error) {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxDownload
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   30 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
		}}
	}
	removeStaleParts(dir, name, stalePartAge(opts.IdleTimeout))
	tmp, err := os.CreateTemp(dir, "."+name+".*.part")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	var got, total int64 = 0, -1
	var bar *progressbar.ProgressBar
	for attempt := 1; ; attempt++ {
		n, size, restarted, err := fetchFrom(ctx, client, u, got, maxBytes, func(size, start int64) io.Writer {
			if opts.Progress == nil {
				return tmp
			}
			if bar == nil {
				bar = progressbar.NewOptions64(size, progressbar.OptionSetWriter(opts.Progress),
					progressbar.OptionShowBytes(true), progressbar.OptionSetDescription(name),
					progressbar.OptionSetTheme(progressbar.ThemeASCII), progressbar.OptionUseANSICodes(true),
					progressbar.OptionOnCompletion(func() { fmt.Fprintln(opts.Progress) }))
			}
			_ = bar.Set64(start)
			return io.MultiWriter(tmp, bar)
		}, h, tmp, opts.IdleTimeout)
		if restarted {
			got = 0 // the server ignored the Range request and sent the whole file again
		}
		got += n
		if size >= 0 {
			total = size
		}
		if err == nil {
			break
		}
		var permanent *permanentError
		if errors.As(err, &permanent) || attempt == downloadAttempts || ctx.Err() != nil {
			return fmt.Errorf("%w (after %d attempt(s), %d bytes received)", err, attempt, got)
		}
	}
	if total >= 0 && got != total {
		return fmt.Errorf("received %d bytes, the server announced %d", got, total)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	if err := want.check(digest); err != nil {
		return fmt.Errorf("%s: %w; nothing was cached", name, err)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable
		d.Close()
	}
	return nil
}

// permanentError is a download failure that retrying will not mend.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// fetchFrom makes one request for the bytes from offset on and appends them to the file (through
// the writer sink returns once the total size and the starting byte are known) and to h. It returns the bytes appended, the
// file's total size (-1: unknown) and whether the server restarted from byte 0, in which case file and
// h were reset first.
func fetchFrom(ctx context.Context, client *http.Client, u *url.URL, offset, maxBytes int64,
	sink func(size, start int64) io.Writer, h io.Writer, file *os.File, idleTimeout time.Duration) (n, total int64, restarted bool, err error) {
	rctx, idle := dl.WithIdleTimeout(ctx, idleTimeout)
	defer idle.Stop()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, -1, false, &permanentError{err}
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, -1, false, idle.Err(err)
	}
	defer resp.Body.Close()
	total = -1
	switch {
	case resp.StatusCode == http.StatusOK:
		if offset > 0 {
			if _, err := file.Seek(0, io.SeekStart); err != nil {
				return 0, -1, false, &permanentError{err}
			}
			if err := file.Truncate(0); err != nil {
				return 0, -1, false, &permanentError{err}
			}
			h.(interface{ Reset() }).Reset()
			restarted = true
		}
		total = resp.ContentLength
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		var start, end, size int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &start, &end, &size); err != nil || start != offset {
			return 0, -1, false, &permanentError{fmt.Errorf("resuming at byte %d: Content-Range %q", offset, resp.Header.Get("Content-Range"))}
		}
		total = size
	default:
		return 0, -1, false, &permanentError{fmt.Errorf("HTTP %s", resp.Status)}
	}
	if total > maxBytes {
		return 0, total, restarted, &permanentError{fmt.Errorf("%d bytes, more than the %d allowed", total, maxBytes)}
	}
	start := offset
	if restarted {
		start = 0
	}
	// One byte past the limit tells a server that sends more than it announced (or than allowed).
	n, err = io.Copy(io.MultiWriter(sink(total, start), h), io.LimitReader(idle.Reader(resp.Body), maxBytes-start+1))
	err = idle.Err(err)
	if start+n > maxBytes {
		return n, total, restarted, &permanentError{fmt.Errorf("more than the %d bytes allowed", maxBytes)}
	}
	if err != nil {
		return n, total, restarted, err
	}
	if total >= 0 && start+n < total {
		return n, total, restarted, fmt.Errorf("connection closed at byte %d of %d", start+n, total)
	}
	return n, total, restarted, nil
}

// removeStaleParts removes the temporaries of earlier downloads of name in dir that have not been
// written for age: a process killed mid-download leaves one, which nothing would resume or remove.
func removeStaleParts(dir, name string, age time.Duration) {
	parts, _ := filepath.Glob(filepath.Join(dir, "."+name+".*.part"))
	for _, p := range parts {
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() && time.Since(st.ModTime()) > age {
			os.Remove(p)
		}
	}
}
