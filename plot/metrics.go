package plot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/trainer/trainer/internal/bounded"
)

// Metrics are the columns of a run's metrics.jsonl, one entry per train or eval record. A value the loop
// logged as null (not finite) or did not log is NaN.
type Metrics struct {
	Train struct{ Step, Epoch, Loss, Accuracy, LR []float64 }
	// EMATop1 and EMALoss are NaN where the run had no EMA.
	Eval struct{ Step, Epoch, Loss, Top1, EMATop1, EMALoss []float64 }
	// Notes are what the reader tolerated and the user should know of (a torn last line).
	Notes []string
}

// StepsPerEpoch is the optimizer steps per epoch the records imply, 0 when none says.
func (m Metrics) StepsPerEpoch() float64 {
	for _, cols := range [][2][]float64{{m.Train.Step, m.Train.Epoch}, {m.Eval.Step, m.Eval.Epoch}} {
		for i, step := range cols[0] {
			if e := cols[1][i]; e > 0 && step > 0 {
				return step / e
			}
		}
	}
	return 0
}

// HasEMA says whether any evaluation scored EMA weights.
func (m Metrics) HasEMA() bool {
	for _, v := range m.Eval.EMATop1 {
		if finite(v) {
			return true
		}
	}
	return false
}

// record holds the fields of one metrics.jsonl line that the charts use (trainer/loop.go writes them);
// a pointer is nil for a null or absent field.
type record struct {
	Type     string   `json:"type"`
	Step     *float64 `json:"step"`
	Epoch    *float64 `json:"epoch"`
	Loss     *float64 `json:"loss"`
	Accuracy *float64 `json:"accuracy"`
	LR       *float64 `json:"lr"`
	Top1     *float64 `json:"top1"`
	EMATop1  *float64 `json:"ema_top1"`
	EMALoss  *float64 `json:"ema_loss"`
}

func value(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// maxMetricsLine bounds one line of metrics.jsonl (a record is a few hundred bytes).
const maxMetricsLine = 1 << 20

// ReadMetrics reads a metrics.jsonl file; records of other types (resume, nonfinite) are skipped. A file
// without train or eval records is an error that names it. A last line without its newline that does not
// parse is what an interrupted append (a full disk, a crash) leaves: it is ignored, with a note in
// Notes; any other line that does not parse is an error naming the file and the line.
func ReadMetrics(path string) (Metrics, error) {
	var m Metrics
	f, _, err := bounded.Open(path)
	if err != nil {
		return m, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, maxMetricsLine)
	for n := 1; ; n++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return m, fmt.Errorf("%s line %d: longer than %d bytes, not a metrics record", path, n, maxMetricsLine)
		}
		if err != nil && err != io.EOF {
			return m, fmt.Errorf("%s: %w", path, err)
		}
		terminated := bytes.HasSuffix(line, []byte("\n"))
		if len(bytes.TrimSpace(line)) > 0 {
			var rec record
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				if terminated {
					return m, fmt.Errorf("%s line %d: %w", path, n, jerr)
				}
				m.Notes = append(m.Notes, fmt.Sprintf("%s line %d: ignored a torn last line of %d bytes (an interrupted write): %v",
					path, n, len(line), jerr))
			} else {
				m.add(rec)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if len(m.Train.Step) == 0 && len(m.Eval.Step) == 0 {
		return m, fmt.Errorf("%s: no train or eval records", path)
	}
	return m, nil
}

// add appends the columns of a train or eval record.
func (m *Metrics) add(r record) {
	switch r.Type {
	case "train":
		t := &m.Train
		t.Step, t.Epoch, t.Loss = append(t.Step, value(r.Step)), append(t.Epoch, value(r.Epoch)), append(t.Loss, value(r.Loss))
		t.Accuracy, t.LR = append(t.Accuracy, value(r.Accuracy)), append(t.LR, value(r.LR))
	case "eval":
		e := &m.Eval
		e.Step, e.Epoch, e.Loss = append(e.Step, value(r.Step)), append(e.Epoch, value(r.Epoch)), append(e.Loss, value(r.Loss))
		e.Top1, e.EMATop1, e.EMALoss = append(e.Top1, value(r.Top1)), append(e.EMATop1, value(r.EMATop1)), append(e.EMALoss, value(r.EMALoss))
	}
}
