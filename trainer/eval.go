package trainer

import (
	"errors"
	"fmt"
	"math"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/gomlxfix"
	"github.com/trainer/trainer/stats"
	"github.com/trainer/trainer/trainstep"
)

// EvalResult is the score on the eval split.
type EvalResult struct {
	Top1, Top5, Loss float64
	Examples         int
	// Correct is the number of top-1 hits; Top1Lo and Top1Hi bound Top1 by its 95% Wilson score
	// interval (stats.Wilson): how far the score could move on another draw of as many images.
	Correct        int
	Top1Lo, Top1Hi float64
}

// perImageSink hears each scored image's label and predicted class among classes, in the loader's order.
type perImageSink func(classes, label, predicted int) error

// evaluate scores the current variables on every example of the loader (the padded tail is masked).
func (s *session) evaluate(loader *data.Loader) (EvalResult, error) {
	return s.evaluateWith(s.ctx, &s.evalExec, loader, nil)
}

// evaluateEMA scores the EMA shadows (as of the last optimizer step) the same way.
func (s *session) evaluateEMA(loader *data.Loader) (EvalResult, error) {
	ctx, err := s.emaContext()
	if err != nil {
		return EvalResult{}, fmt.Errorf("EMA eval: %w", err)
	}
	return s.evaluateWith(ctx, &s.emaEvalExec, loader, nil)
}

// evaluateWith runs the eval forward pass over ctx's variables; *execp caches its compiled graph, so
// every eval of a run reuses it. perImage, when not nil, is given every image's result as it is scored.
func (s *session) evaluateWith(evalCtx *context.Context, execp **context.Exec, loader *data.Loader, perImage perImageSink) (EvalResult, error) {
	if *execp == nil {
		gomlxfix.Install() // one gradient table per process, whichever graph is built first
		exec, err := context.NewExec(s.backend, evalCtx.Reuse(), func(ctx *context.Context, images *Node) *Node {
			return s.Forward(ctx.Reuse().In(graphs.ModelScope), trainstep.NormalizeInput(s.cfg.Data, images), false)
		})
		if err != nil {
			return EvalResult{}, err
		}
		*execp = exec
	}
	exec := *execp
	var res EvalResult
	it := loader.Iterate(0, 0)
	defer it.Close()
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		images := imagesTensor(loader, b)
		outs, err := exec.Exec(images)
		images.FinalizeAll()
		if err != nil {
			return res, fmt.Errorf("eval step: %w", err)
		}
		logits := tensors.MustCopyFlatData[float32](outs[0])
		outs[0].FinalizeAll()
		classes := len(logits) / len(b.Labels)
		for i := range b.Size {
			row := logits[i*classes : (i+1)*classes]
			top1, top5, nll := scoreRow(row, int(b.Labels[i]))
			if perImage != nil {
				if err := perImage(classes, int(b.Labels[i]), predicted(row, int(b.Labels[i]), top1 == 1)); err != nil {
					return res, err
				}
			}
			res.Top1 += top1
			res.Top5 += top5
			res.Loss += nll
		}
		res.Examples += b.Size
	}
	if err := it.Err(); err != nil {
		return res, fmt.Errorf("eval data: %w", err)
	}
	if res.Examples == 0 {
		return res, errors.New("eval split is empty")
	}
	n := float64(res.Examples)
	res.Correct = int(res.Top1)
	res.Top1Lo, res.Top1Hi = stats.Wilson(res.Correct, res.Examples, stats.Z95)
	res.Top1, res.Top5, res.Loss = res.Top1/n, res.Top5/n, res.Loss/n
	return res, nil
}

// predicted is the class a row of logits predicts: the label when it scored a top-1 hit (a tie with the
// label counts as right, as in scoreRow), otherwise the first largest logit.
func predicted(row []float32, label int, hit bool) int {
	if hit {
		return label
	}
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}

// scoreRow returns (top-1 hit, top-5 hit, negative log-likelihood) of one row of logits.
func scoreRow(row []float32, label int) (top1, top5, nll float64) {
	rank := 0
	for _, v := range row {
		if v > row[label] {
			rank++
		}
	}
	if rank == 0 {
		top1 = 1
	}
	if rank < 5 {
		top5 = 1
	}
	maxv := math.Inf(-1)
	for _, v := range row {
		maxv = math.Max(maxv, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - maxv)
	}
	return top1, top5, maxv + math.Log(sum) - float64(row[label])
}

// imagesTensor copies a batch into a tensor, float32 images or uint8 pixels (data.device_normalize:
// the graph normalises them, netInput); the loader reuses the batch's buffers afterwards.
func imagesTensor(l *data.Loader, b data.Batch) *tensors.Tensor {
	h, w, c := l.Shape()
	if b.Pixels != nil {
		return tensors.FromFlatDataAndDimensions(b.Pixels, len(b.Labels), h, w, c)
	}
	return tensors.FromFlatDataAndDimensions(b.Images, len(b.Labels), h, w, c)
}

// Evaluate loads a checkpoint into cfg's net and scores it on the eval split: its live weights, or
// with ema its EMA shadows (weights and BatchNorm statistics). With perImagePath set it also writes
// each image's label and predicted class there (stats.CreatePerImage), streamed as the images are
// scored; the file appears only when the whole split is scored.
func Evaluate(cfg config.Config, checkpointPath string, ema bool, perImagePath string) (EvalResult, error) {
	s, err := newSession(cfg)
	if err != nil {
		return EvalResult{}, err
	}
	ckpt, err := s.resumePoint("", checkpointPath)
	if err != nil {
		return EvalResult{}, err
	}
	if err := s.checkComplete(ckpt, true); err != nil {
		return EvalResult{}, err
	}
	if ema {
		shadows := 0
		for name := range ckpt.Tensors {
			if strings.HasPrefix(name, trainstep.EMAScope+"/") {
				shadows++
			}
		}
		if shadows == 0 {
			return EvalResult{}, fmt.Errorf("checkpoint %s holds no EMA shadows (the run had ema.decay 0)", checkpointPath)
		}
		s.ctx.SetLoader(emaLoader{ckpt})
		s.loaded = true
	} else {
		s.load(ckpt)
	}
	loader, err := s.loader("test", cfg.Data.EvalBatchSize, false)
	if err != nil {
		return EvalResult{}, err
	}
	if perImagePath == "" {
		return s.evaluate(loader)
	}
	// The writer starts with the first batch, whose logits give the net's number of classes; with ema
	// the shadows were loaded as the model's variables, so s.ctx is the one to score either way.
	var w *stats.PerImageWriter
	sink := func(classes, label, pred int) error {
		if w == nil {
			if w, err = stats.CreatePerImage(perImagePath, classes); err != nil {
				return err
			}
		}
		return w.Add(label, pred)
	}
	res, err := s.evaluateWith(s.ctx, &s.evalExec, loader, sink)
	if err != nil {
		if w != nil {
			w.Abort()
		}
		return res, err
	}
	return res, w.Close()
}

// emaLoader serves a checkpoint's EMA shadow in place of each model variable that has one.
type emaLoader struct{ *checkpoint.Checkpoint }

// LoadVariable implements context.Loader.
func (l emaLoader) LoadVariable(ctx *context.Context, scope, name string) (*tensors.Tensor, bool) {
	if t, ok := l.Tensors[context.JoinScope(trainstep.EMAScope+scope, name)]; ok {
		return t, true
	}
	return l.Checkpoint.LoadVariable(ctx, scope, name)
}

// emaContext returns a context holding, under the model scope, the EMA shadows of s.ctx (the live
// variables where a shadow is missing), as fresh copies: the EMA eval pass runs on it.
func (s *session) emaContext() (*context.Context, error) {
	if s.emaCtx == nil {
		s.emaCtx = context.New()
	}
	var err error
	s.ctx.EnumerateVariables(func(v *context.Variable) {
		if err != nil || !strings.HasPrefix(v.Scope(), "/"+graphs.ModelScope) {
			return
		}
		src := v
		if trainstep.Averaged(v) {
			if sh := s.ctx.GetVariableByScopeAndName(trainstep.EMAScope+v.Scope(), v.Name()); sh != nil {
				src = sh
			}
		}
		var value *tensors.Tensor
		value, err = src.Value()
		if err != nil {
			return
		}
		value, err = value.LocalClone()
		if err != nil {
			return
		}
		if dst := s.emaCtx.GetVariableByScopeAndName(v.Scope(), v.Name()); dst != nil {
			err = dst.SetValue(value)
			return
		}
		s.emaCtx.InAbsPath(v.Scope()).VariableWithValue(v.Name(), value).SetTrainable(v.Trainable)
	})
	return s.emaCtx, err
}
