package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// metricsLog appends one JSON object per line to metrics.jsonl; each record is one write call, and a
// write that fails part-way (a full disk) is cut back off, so the log never ends in a torn line that
// this writer knows of.
type metricsLog struct {
	f    appendFile
	path string
	size int64 // the length of the log's complete records
	// listeners hear each record once it is written (TensorBoard, summary.csv: board.go).
	listeners []recordListener
}

// recordListener is given every record the log writes, after it is written; Close closes it.
type recordListener interface {
	record(rec map[string]any) error
	close() error
}

// listen adds l to the log's listeners.
func (m *metricsLog) listen(l recordListener) { m.listeners = append(m.listeners, l) }

// appendFile is the log's file: an *os.File opened for appending; tests fake a full disk.
type appendFile interface {
	io.WriteCloser
	Truncate(size int64) error
}

func openMetrics(path string) (*metricsLog, error) {
	// The log is the run's own file: a link there (to a user's file) is not appended through.
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("metrics log %s is not a regular file (a link?): refused, the run writes its own log", path)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("metrics log %s is not a regular file: refused", path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &metricsLog{f: f, path: path, size: info.Size()}, nil
}

// A non-finite number (a diverged eval loss, say) is written as null: JSON has no NaN, and a run must
// not die for logging its own divergence.
func (m *metricsLog) write(record map[string]any) error {
	record["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	for k, v := range record {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			record[k] = nil
		}
	}
	line, err := json.Marshal(record)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	n, err := m.f.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 {
			if terr := m.f.Truncate(m.size); terr != nil {
				return fmt.Errorf("metrics log %s: %w; cutting off the partial record also failed (%v): its last line is torn",
					m.path, err, terr)
			}
		}
		return fmt.Errorf("metrics log %s: %w (the record was not written)", m.path, err)
	}
	m.size += int64(n)
	for _, l := range m.listeners {
		if err := l.record(record); err != nil {
			return err
		}
	}
	return nil
}

func (m *metricsLog) Close() error {
	var errs []error
	for _, l := range m.listeners {
		errs = append(errs, l.close())
	}
	m.listeners = nil
	if m.f != nil {
		errs = append(errs, m.f.Close())
		m.f = nil
	}
	return errors.Join(errs...)
}
