package trainer

import (
	"encoding/json"
	"math"
	"os"
	"time"
)

// metricsLog appends one JSON object per line to metrics.jsonl; each record is one write call.
type metricsLog struct{ f *os.File }

func openMetrics(path string) (*metricsLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &metricsLog{f: f}, nil
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
	_, err = m.f.Write(append(line, '\n'))
	return err
}

func (m *metricsLog) Close() error { return m.f.Close() }
