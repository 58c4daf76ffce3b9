package gobackend

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/trainer/trainer/gobackend/kernels"
)

// Op statistics of the pure-Go backend, for finding where a step's time goes op by op (pprof shows
// functions, not which graph op or shape called them). With TRAINER_GO_OPSTATS=1 in the environment
// every simplego executor is wrapped with a timer, and the Backend prints a table on Finalize
// (time, calls and the top shapes per op type) to stderr. Off by default: it costs a map lookup per op.

const opStatsEnv = "TRAINER_GO_OPSTATS"

type opStatKey struct {
	op     backends.OpType
	shapes string
}

type opStat struct {
	calls int
	total time.Duration
	flops float64 // DotGeneral's and ConvGeneral's multiply-adds ×2, for their GFLOP/s.
}

var (
	opStatsOnce sync.Once
	opStatsMu   sync.Mutex
	opStats     map[opStatKey]*opStat
)

// installOpStats wraps every executor of simplego's table with a timer (once per process).
func installOpStats() {
	opStatsOnce.Do(func() {
		opStats = map[opStatKey]*opStat{}
		if n, err := strconv.Atoi(os.Getenv(opStatsEnv)); err == nil && n > 0 {
			opStatsShapes = n
		}
		for op := range sgNodeExecutors {
			inner := sgNodeExecutors[op]
			if inner == nil {
				continue
			}
			opType := backends.OpType(op)
			sgNodeExecutors[op] = func(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
				var desc []string
				for _, in := range inputs {
					if s, err := backend.BufferShape(in); err == nil {
						desc = append(desc, s.String())
					}
				}
				if nodeFieldsOK {
					desc = append(desc, "->", nodeShape(node).String())
				}
				var flops float64
				switch opType {
				case backends.OpTypeDotGeneral:
					if p, ok := readDotParams(node); ok {
						flops = 2 * float64(p.batch) * float64(p.lhsCross) * float64(p.rhsCross) * float64(p.contracting)
					}
				case fusedConvOpType:
					if spec, ok := nodeDataOf(node).(*kernels.ConvGemmSpec); ok && len(inputs) == 2 {
						if k, err := backend.BufferShape(inputs[1]); err == nil {
							// Nominal: each output value a dot product over the kernel's positions and input channels.
							flops = 2 * float64(nodeShape(node).Size()) * float64(k.Size()/max(k.Dimensions[spec.Axes.KernelOutputChannels], 1))
						}
					}
				}
				start := time.Now()
				out, err := inner(backend, node, inputs, inputsOwned)
				elapsed := time.Since(start)
				label := strings.Join(desc, " ")
				if opType == fusedOpType && nodeFieldsOK {
					if prog, ok := nodeDataOf(node).(*fusedProgram); ok {
						label = prog.name + " " + label
					}
				}
				if opType == fusedConvOpType && nodeFieldsOK {
					if spec, ok := nodeDataOf(node).(*kernels.ConvGemmSpec); ok {
						label = fmt.Sprintf("%s(stride %v, input dilation %v, flip %v) %s", spec.Kind(), spec.Strides, spec.InputDilations, spec.Flip, label)
					}
				}
				key := opStatKey{opType, label}
				opStatsMu.Lock()
				st := opStats[key]
				if st == nil {
					st = &opStat{}
					opStats[key] = st
				}
				st.calls++
				st.total += elapsed
				st.flops += flops
				opStatsMu.Unlock()
				return out, err
			}
		}
	})
}

// printOpStats writes the op table: per op type its time and calls, then its costliest shapes.
func printOpStats(w io.Writer) {
	opStatsMu.Lock()
	defer opStatsMu.Unlock()
	if len(opStats) == 0 {
		return
	}
	type row struct {
		op    backends.OpType
		total time.Duration
		calls int
		keys  []opStatKey
	}
	byOp := map[backends.OpType]*row{}
	var all time.Duration
	for k, st := range opStats {
		r := byOp[k.op]
		if r == nil {
			r = &row{op: k.op}
			byOp[k.op] = r
		}
		r.total += st.total
		r.calls += st.calls
		r.keys = append(r.keys, k)
		all += st.total
	}
	rows := make([]*row, 0, len(byOp))
	for _, r := range byOp {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].total > rows[j].total })
	fmt.Fprintf(w, "pure-Go backend op time (%s), all steps including the first: %v\n", opStatsEnv, all.Round(time.Millisecond))
	for _, r := range rows {
		fmt.Fprintf(w, "%-22s %9v %5.1f%% %6d calls\n", opStatsName(r.op), r.total.Round(time.Microsecond), 100*float64(r.total)/float64(all), r.calls)
		slices.SortFunc(r.keys, func(a, b opStatKey) int { return int(opStats[b].total - opStats[a].total) })
		for _, k := range r.keys[:min(opStatsShapes, len(r.keys))] {
			st := opStats[k]
			rate := ""
			if st.flops > 0 {
				rate = fmt.Sprintf(" (%.0f GFLOP/s)", st.flops/st.total.Seconds()/1e9)
			}
			fmt.Fprintf(w, "    %9v %5d× %s%s\n", st.total.Round(time.Microsecond), st.calls, k.shapes, rate)
		}
	}
}

// opStatsName names an op type, the backend's own nodes (which borrow op types simplego never runs) by
// what they are.
func opStatsName(op backends.OpType) string {
	switch op {
	case fusedOpType:
		return "Fused element-wise"
	case fusedConvOpType:
		return "Fused convolution"
	case selectAndScatterMaxOpType, selectAndScatterMinOpType:
		return op.String() + " (native)"
	}
	return op.String()
}

// opStatsShapes is how many shapes are listed per op (TRAINER_GO_OPSTATS=N lists N, default 4).
var opStatsShapes = 4

func opStatsEnabled() bool { return os.Getenv(opStatsEnv) != "" }
