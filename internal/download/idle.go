package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is how long a download waits for the next bytes (or the response's headers)
// before it gives up on the connection: a server that stalls mid-body would otherwise hold the
// process until it is killed.
const DefaultIdleTimeout = 60 * time.Second

// ErrIdle is wrapped by the error of a transfer that received nothing for its idle timeout.
var ErrIdle = errors.New("no data received")

// Idle cancels a request's context when no bytes arrive for its timeout; each read that returns
// bytes through Reader starts the wait again.
type Idle struct {
	d      time.Duration
	timer  *time.Timer
	fired  atomic.Bool
	cancel context.CancelFunc
}

// WithIdleTimeout returns a context for one request and its watch; d <= 0 means DefaultIdleTimeout.
// Stop releases it.
func WithIdleTimeout(parent context.Context, d time.Duration) (context.Context, *Idle) {
	if d <= 0 {
		d = DefaultIdleTimeout
	}
	ctx, cancel := context.WithCancel(parent)
	i := &Idle{d: d, cancel: cancel}
	i.timer = time.AfterFunc(d, func() { i.fired.Store(true); cancel() })
	return ctx, i
}

// Reader passes r's bytes on, restarting the wait after each read that returns some.
func (i *Idle) Reader(r io.Reader) io.Reader { return idleReader{r, i} }

type idleReader struct {
	r    io.Reader
	idle *Idle
}

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.idle.timer.Reset(r.idle.d)
	}
	return n, err
}

// Stop ends the watch and releases the context.
func (i *Idle) Stop() {
	i.timer.Stop()
	i.cancel()
}

// Err is err, or an ErrIdle naming the timeout when the watch cancelled the request.
func (i *Idle) Err(err error) error {
	if err != nil && i.fired.Load() {
		return fmt.Errorf("%w for %v: the server stalled", ErrIdle, i.d)
	}
	return err
}

// Redact returns rawURL with the password of any user:password@ replaced, for errors and output.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}
