package trainer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A diverged eval (NaN or infinite loss) is logged with null, not an encoding error that ends the run.
func TestMetricsLogWritesNonFiniteAsNull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	m, err := openMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.write(map[string]any{"type": "eval", "step": 3, "loss": math.NaN(), "top1": 0.5, "ema_loss": math.Inf(1)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if v, ok := rec["loss"]; !ok || v != nil {
		t.Errorf("loss = %v (present %v), want null", v, ok)
	}
	if v, ok := rec["ema_loss"]; !ok || v != nil {
		t.Errorf("ema_loss = %v, want null", v)
	}
	if rec["top1"] != 0.5 {
		t.Errorf("top1 = %v, want 0.5", rec["top1"])
	}
}

// failingFile accepts room bytes, then fails writes as a full disk does (after writing what fits).
type failingFile struct {
	data []byte
	room int
}

func (f *failingFile) Write(p []byte) (int, error) {
	if len(f.data)+len(p) <= f.room {
		f.data = append(f.data, p...)
		return len(p), nil
	}
	n := max(f.room-len(f.data), 0)
	f.data = append(f.data, p[:n]...)
	return n, syscall.ENOSPC
}

func (f *failingFile) Truncate(size int64) error {
	f.data = f.data[:size]
	return nil
}

func (f *failingFile) Close() error { return nil }

// TestMetricsLogNeverLeavesATornLine: a record that does not fit (a full disk) is cut back off, the error
// says so, and the log holds only whole records; once there is room again, records append cleanly.
func TestMetricsLogNeverLeavesATornLine(t *testing.T) {
	f := &failingFile{room: 90}
	m := &metricsLog{f: f, path: "runs/x/metrics.jsonl"}
	if err := m.write(map[string]any{"type": "train", "step": 1}); err != nil {
		t.Fatal(err)
	}
	whole := string(f.data)
	err := m.write(map[string]any{"type": "train", "step": 2, "loss": 0.5})
	if err == nil || !strings.Contains(err.Error(), "runs/x/metrics.jsonl") || !strings.Contains(err.Error(), "not written") {
		t.Errorf("write on a full disk: %v", err)
	}
	if string(f.data) != whole {
		t.Errorf("log after the failed write: %q; want the whole first record only, %q", f.data, whole)
	}
	f.room = 1 << 20
	if err := m.write(map[string]any{"type": "train", "step": 3}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(f.data), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"step":3`) {
		t.Errorf("log %q: want the records of steps 1 and 3, one a line", f.data)
	}
}

// TestTruncateMetricsDropsATornLastLine: on resume, a torn last line (even one that parses as a whole
// record) is dropped and the log ends with a newline, so the next record starts its own line.
func TestTruncateMetricsDropsATornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	body := `{"type":"train","step":5}` + "\n" + `{"type":"train","step":6}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	dropped, err := truncateMetrics(path, 10)
	if err != nil || dropped != 1 {
		t.Fatalf("dropped %d, %v; want the torn line", dropped, err)
	}
	if data, _ := os.ReadFile(path); string(data) != `{"type":"train","step":5}`+"\n" {
		t.Errorf("log after truncation: %q", data)
	}
}

// TestTruncateMetricsReportsADamagedMiddleLine: a line that does not parse in the middle of the log
// (not what a crash leaves) is reported naming the file and the line, and the log is left as it was
// (before: it was deleted on resume without a word).
func TestTruncateMetricsReportsADamagedMiddleLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	body := `{"type":"train","step":5}` + "\n" + `{"type":"tr` + "\n" + `{"type":"train","step":6}` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := truncateMetrics(path, 5)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a damaged second line: %v; want an error naming the file and line 2", err)
	}
	if data, _ := os.ReadFile(path); string(data) != body {
		t.Errorf("the log was changed: %q", data)
	}
}

// TestMetricsLogIsNotWrittenThroughALink: a metrics.jsonl that is a link to a user's file is refused,
// and that file is not appended to.
func TestMetricsLogIsNotWrittenThroughALink(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(outside, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if m, err := openMetrics(link); err == nil {
		m.f.Close()
		t.Error("a metrics log that is a link was opened")
	} else if !strings.Contains(err.Error(), link) {
		t.Errorf("error %v does not name the log", err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "mine\n" {
		t.Errorf("the link's target holds %q", got)
	}
}
