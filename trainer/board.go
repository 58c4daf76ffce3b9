package trainer

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/internal/bounded"
	"github.com/trainer/trainer/tensorboard"
)

// SummaryName is the run directory's table of evaluations, one row per eval (rewritten whole at each).
const SummaryName = "summary.csv"

// boardHook writes what other tools read beside metrics.jsonl: TensorBoard event files
// (log.tensorboard: every train and eval record's numbers as scalars, the resolved config as text)
// and summary.csv. It hears each record the metrics log writes (metricsLog.listen), so the three
// always say the same.
type boardHook struct {
	cfg     config.Config
	dir     string
	metrics *metricsLog
	board   *tensorboard.Writer
	summary summaryTable
}

func newBoardHook(cfg config.Config, dir string, metrics *metricsLog) *boardHook {
	return &boardHook{cfg: cfg, dir: dir, metrics: metrics, summary: summaryTable{path: filepath.Join(dir, SummaryName)}}
}

// atStart rebuilds summary.csv from the records metrics.jsonl already holds (a resumed run's, cut
// back to the step it resumes from), opens a new event file starting at the run's step and starts
// listening.
func (h *boardHook) atStart(st *loopState) error {
	if err := h.summary.replay(h.metrics.path); err != nil {
		return err
	}
	if err := h.summary.write(); err != nil {
		return err
	}
	if h.cfg.Log.TensorBoard {
		w, err := tensorboard.NewWriter(h.dir)
		if err != nil {
			return err
		}
		h.board = w
		// TensorBoard drops what earlier files of the directory hold from the START's step on: the steps
		// a resumed run writes again (those up to st.step stay, as in metrics.jsonl), or all of a fresh
		// run's predecessor past step 0 (metrics.jsonl starts anew too).
		if err := w.SessionStart(int64(st.step) + 1); err != nil {
			return err
		}
		// Indented four spaces: a code block in TensorBoard's markdown.
		text := "    " + strings.ReplaceAll(strings.TrimRight(string(h.cfg.YAML()), "\n"), "\n", "\n    ")
		if err := w.Text(int64(st.step), "config", text); err != nil {
			return err
		}
	}
	h.metrics.listen(h)
	return nil
}

func (h *boardHook) atEnd(*loopState) error { return h.close() }

// record hands a train or eval record to TensorBoard (each number a scalar tagged TYPE/KEY) and the
// summary table.
func (h *boardHook) record(rec map[string]any) error {
	typ, _ := rec["type"].(string)
	if typ != "train" && typ != "eval" {
		h.summary.add(rec)
		return nil
	}
	if h.board != nil {
		step, _ := number(rec["step"])
		var scalars []tensorboard.Scalar
		for key, v := range rec {
			switch key {
			case "type", "step", "epoch", "time", "examples":
				continue
			}
			if f, ok := number(v); ok {
				scalars = append(scalars, tensorboard.Scalar{Tag: typ + "/" + key, Value: f})
			}
		}
		sort.Slice(scalars, func(i, j int) bool { return scalars[i].Tag < scalars[j].Tag })
		if err := h.board.Scalars(int64(step), scalars...); err != nil {
			return err
		}
	}
	if h.summary.add(rec) {
		return h.summary.write()
	}
	return nil
}

func (h *boardHook) close() error {
	if h.board == nil {
		return nil
	}
	err := h.board.Close()
	h.board = nil
	return err
}

// number reads a record's numeric value (ints as the loop writes them, floats as JSON reads them back).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// summaryTable is summary.csv, timm's summary.csv of our runs: per eval the epoch, the step, the mean
// train loss since the previous eval (each train record weighted by the steps it covers), the eval
// loss, top-1 and top-5 (in percent, as timm writes them), the EMA weights' top-1 and top-5 when the
// run keeps an EMA, and the lr of the last train record.
type summaryTable struct {
	path string
	rows [][]string
	// Since the last eval: the steps' loss sum and count, the last train step and lr.
	lossSum, lossSteps float64
	lastStep           float64
	lr                 float64
	haveLR             bool
}

// The 95% Wilson bounds of top-1 come last, so readers of the first nine columns are undisturbed.
var summaryHeader = []string{"epoch", "step", "train_loss", "eval_loss", "eval_top1", "eval_top5", "ema_top1", "ema_top5", "lr",
	"eval_top1_lo", "eval_top1_hi", "ema_top1_lo", "ema_top1_hi"}

// add takes one record and says whether it added a row.
func (t *summaryTable) add(rec map[string]any) bool {
	step, _ := number(rec["step"])
	switch rec["type"] {
	case "resume": // the steps before it were logged by the records replayed
		t.lastStep = step
	case "train":
		if loss, ok := number(rec["loss"]); ok && step > t.lastStep {
			t.lossSum += loss * (step - t.lastStep)
			t.lossSteps += step - t.lastStep
		}
		t.lastStep = step
		if lr, ok := number(rec["lr"]); ok {
			t.lr, t.haveLR = lr, true
		}
	case "eval":
		cell := func(key string, scale float64) string {
			if v, ok := number(rec[key]); ok {
				return strconv.FormatFloat(v*scale, 'f', -1, 64)
			}
			return ""
		}
		row := []string{cell("epoch", 1), cell("step", 1), "", cell("loss", 1), cell("top1", 100), cell("top5", 100),
			cell("ema_top1", 100), cell("ema_top5", 100), "",
			cell("top1_lo", 100), cell("top1_hi", 100), cell("ema_top1_lo", 100), cell("ema_top1_hi", 100)}
		if t.lossSteps > 0 {
			row[2] = strconv.FormatFloat(t.lossSum/t.lossSteps, 'f', -1, 64)
		}
		if t.haveLR {
			row[8] = strconv.FormatFloat(t.lr, 'g', -1, 64)
		}
		t.rows = append(t.rows, row)
		t.lossSum, t.lossSteps = 0, 0
		return true
	}
	return false
}

// replay adds the records of the metrics log at path (none when it does not exist; a torn last line
// is passed over, as plot run does).
func (t *summaryTable) replay(path string) error {
	f, _, err := bounded.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			t.add(rec)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// write replaces summary.csv with the rows so far (atomically: a reader sees the old table or the new).
func (t *summaryTable) write() error {
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write(summaryHeader)
	w.WriteAll(t.rows)
	if err := w.Error(); err != nil {
		return err
	}
	if err := atomicfile.Write(t.path, []byte(b.String())); err != nil {
		return fmt.Errorf("%s: %w", SummaryName, err)
	}
	return nil
}
