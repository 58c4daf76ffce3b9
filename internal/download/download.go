// Package download fetches a file over HTTP(S) into place, resuming a partial download with a Range
// request and checking the result's size and SHA-256 before it takes the final name.
package download

import (
	"context"
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

	"github.com/trainer/trainer/internal/bounded"
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
	// IdleTimeout bounds the wait for the response and for each next bytes of the body (0:
	// DefaultIdleTimeout); a stalled transfer is then resumed like a dropped one.
	IdleTimeout time.Duration
}

// File fetches url to dest unless dest already holds the expected file. The bytes go to dest+".part",
// which a later call resumes (HTTP Range) when the transfer drops, stalls or the process is stopped;
// once complete its size and SHA-256 are checked and it is renamed to dest. It reports whether
// anything was downloaded.
//
// The .part is bounded and never left to grow: nothing is written past a known Size (a server that
// sends more is refused and the .part removed), a .part that holds nothing after a failure is
// removed, and so is one after a failure resuming cannot cure. Errors name url with its password
// redacted.
func File(url, dest string, opts Options) (downloaded bool, err error) {
	shown := Redact(url)
	defer func() {
		if err != nil && shown != url {
			err = &redactedError{msg: strings.ReplaceAll(err.Error(), url, shown), err: err}
		}
	}()
	want := strings.ToLower(strings.TrimPrefix(opts.SHA256, "sha256:"))
	if len(want) != 64 {
		return false, fmt.Errorf("download %s: expected SHA-256 %q is not 64 hex digits", shown, opts.SHA256)
	}
	if _, err := hex.DecodeString(want); err != nil {
		return false, fmt.Errorf("download %s: expected SHA-256 %q is not hex", shown, opts.SHA256)
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
			os.Remove(part) // resuming cannot cure it
			return true, fmt.Errorf("download %s: %w", shown, err)
		}
		last = err
		if attempt == opts.Retries {
			if st, err := os.Stat(part); err == nil && st.Size() == 0 {
				os.Remove(part)
				return true, fmt.Errorf("download %s: %w (after %d attempts; nothing is kept to resume from)", shown, last, attempt+1)
			}
			return true, fmt.Errorf("download %s: %w (after %d attempts; run again to resume from the %s kept)", shown, last, attempt+1, part)
		}
	}
	if err := check(part, want, opts.Size); err != nil {
		os.Remove(part) // resuming a wrong file would only make it longer
		return true, fmt.Errorf("download %s: %w; the download was removed", shown, err)
	}
	if err := os.Rename(part, dest); err != nil {
		return true, err
	}
	return true, nil
}

// redactedError is an error whose message had a URL's password taken out; it still wraps the error.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

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
	ctx, idle := WithIdleTimeout(context.Background(), opts.IdleTimeout)
	defer idle.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, &fatalError{err}
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, idle.Err(err)
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
	body := idle.Reader(resp.Body)
	if opts.Size > 0 {
		// One byte past the known size tells a server that sends more: nothing past it is written.
		body = io.LimitReader(body, opts.Size-have+1)
		w = &capWriter{w: w, left: opts.Size - have}
	}
	n, err := io.Copy(w, body)
	if errors.Is(err, errPastSize) {
		return false, &fatalError{fmt.Errorf("the server sent more than the %d bytes expected", opts.Size)}
	}
	if err != nil {
		return false, idle.Err(err) // the bytes written stay: the next attempt resumes after them
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

// errPastSize is capWriter's refusal of a byte past the known size.
var errPastSize = errors.New("past the expected size")

// capWriter writes at most left bytes and refuses the rest without writing any of it.
type capWriter struct {
	w    io.Writer
	left int64
}

func (c *capWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > c.left {
		n, err := c.w.Write(b[:c.left])
		c.left -= int64(n)
		if err == nil {
			err = errPastSize
		}
		return n, err
	}
	n, err := c.w.Write(b)
	c.left -= int64(n)
	return n, err
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
	f, _, err := bounded.Open(p)
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
