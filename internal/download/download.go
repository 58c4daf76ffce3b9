// Package download fetches a file over HTTP(S) into place, resuming a partial download with a Range
// request and checking the result's size and SHA-256 before it takes the final name.
package download

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Options describe what to fetch and what it must be.
type Options struct {
	// SHA256 is the expected digest in hex; the file is refused (and its partial copy removed) when it
	// differs. Empty is refused: a download is always checked.
	SHA256 string
	// Size is the expected length in bytes; 0 when unknown.
	Size int64
	// Retries is how many times a dropped transfer is resumed (0: 5).
	Retries int
	// Progress, when set, is told the bytes held so far and the total (−1 when unknown) as they grow.
	Progress func(done, total int64)
	// Client is the HTTP client (nil: one without an overall timeout, since archives are large).
	Client *http.Client
}

// File fetches url to dest unless dest already holds the expected file. The bytes go to dest+".part",
// which a later call resumes (HTTP Range) when the transfer drops or the process is stopped; once
// complete its size and SHA-256 are checked and it is renamed to dest. It reports whether anything
// was downloaded.
func File(url, dest string, opts Options) (downloaded bool, err error) {
	want := strings.ToLower(strings.TrimPrefix(opts.SHA256, "sha256:"))
	if len(want) != 64 {
		return false, fmt.Errorf("download %s: expected SHA-256 %q is not 64 hex digits", url, opts.SHA256)
	}
	if _, err := hex.DecodeString(want); err != nil {
		return false, fmt.Errorf("download %s: expected SHA-256 %q is not hex", url, opts.SHA256)
	}
	if st, err := os.Stat(dest); err == nil && !st.IsDir() {
		if err := check(dest, want, opts.Size); err != nil {
			return false, fmt.Errorf("%s exists but is not the expected file (%v): remove it to download again", dest, err)
		}
		return false, nil
	}
	if opts.Retries <= 0 {
		opts.Retries = 5
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	part := dest + ".part"
	var last error
	for attempt := 0; attempt <= opts.Retries; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(min(attempt, 5)) * 200 * time.Millisecond)
		}
		complete, err := fetch(client, url, part, opts)
		if err == nil && complete {
			break
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return true, fmt.Errorf("download %s: %w", url, err)
		}
		last = err
		if attempt == opts.Retries {
			return true, fmt.Errorf("download %s: %w (after %d attempts; run again to resume from the %s kept)", url, last, attempt+1, part)
		}
	}
	if err := check(part, want, opts.Size); err != nil {
		os.Remove(part) // resuming a wrong file would only make it longer
		return true, fmt.Errorf("download %s: %w; the download was removed", url, err)
	}
	if err := os.Rename(part, dest); err != nil {
		return true, err
	}
	return true, nil
}

// fatalError is a failure that resuming cannot cure (a 404, a file larger than expected).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// fetch appends to part from where it ends, and says whether part is then complete.
func fetch(client *http.Client, url, part string, opts Options) (bool, error) {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return false, &fatalError{err}
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, &fatalError{err}
	}
	if opts.Size > 0 && have == opts.Size {
		return true, nil
	}
	if opts.Size > 0 && have > opts.Size {
		f.Truncate(0)
		return false, fmt.Errorf("%s is longer than the %d bytes expected: started again", part, opts.Size)
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return false, &fatalError{err}
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	total := int64(-1)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, size, ok := contentRange(resp.Header.Get("Content-Range"))
		if !ok || start != have {
			return false, &fatalError{fmt.Errorf("the server answered a resume from byte %d with Content-Range %q",
				have, resp.Header.Get("Content-Range"))}
		}
		total = size
	case http.StatusOK: // the whole file: the server ignores ranges, or nothing was held
		if err := f.Truncate(0); err != nil {
			return false, &fatalError{err}
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return false, &fatalError{err}
		}
		have = 0
		total = resp.ContentLength
	case http.StatusRequestedRangeNotSatisfiable:
		if opts.Size <= 0 { // nothing past what is held: take it as complete and let the digest judge
			return true, nil
		}
		f.Truncate(0)
		return false, fmt.Errorf("the server has no bytes past %d: started again", have)
	default:
		err := fmt.Errorf("HTTP %s", resp.Status)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return false, &fatalError{err}
		}
		return false, err
	}
	if opts.Size > 0 && total > 0 && total != opts.Size {
		return false, &fatalError{fmt.Errorf("the server's file is %d bytes, expected %d", total, opts.Size)}
	}
	if total < 0 && opts.Size > 0 {
		total = opts.Size
	}
	w := io.Writer(f)
	if opts.Progress != nil {
		opts.Progress(have, total)
		w = &progressWriter{w: f, done: have, total: total, report: opts.Progress}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return false, err // the bytes written stay: the next attempt resumes after them
	}
	if total > 0 && have+n < total {
		return false, fmt.Errorf("the transfer ended at byte %d of %d", have+n, total)
	}
	return true, nil
}

// contentRange parses "bytes START-END/SIZE".
func contentRange(h string) (start, size int64, ok bool) {
	rest, found := strings.CutPrefix(h, "bytes ")
	if !found {
		return 0, 0, false
	}
	span, total, found := strings.Cut(rest, "/")
	first, _, found2 := strings.Cut(span, "-")
	if !found || !found2 {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	size, err2 := strconv.ParseInt(total, 10, 64)
	if total == "*" {
		size, err2 = -1, nil
	}
	return start, size, err1 == nil && err2 == nil
}

type progressWriter struct {
	w           io.Writer
	done, total int64
	report      func(done, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	p.report(p.done, p.total)
	return n, err
}

// check compares the file at p with the expected size (0: any) and SHA-256.
func check(p, want string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if size > 0 && n != size {
		return fmt.Errorf("%d bytes, expected %d", n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("SHA-256 %s, expected %s", got, want)
	}
	return nil
}
