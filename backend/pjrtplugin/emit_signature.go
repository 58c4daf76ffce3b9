package pjrtplugin

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// StepIO is what the main function of an emitted module takes: the host's inputs (%argN: the batch and
// the runtime scalars, sent every step) and the variables (%var__...: parameters, optimizer slots,
// BatchNorm statistics, EMA shadows), which GoMLX keeps on the device between steps, donating each
// buffer to the step and keeping the updated value it returns.
type StepIO struct {
	HostInputs, HostBytes int64
	Variables, VarBytes   int64
}

var (
	reMainArg = regexp.MustCompile(`%(arg\d+|var__[A-Za-z0-9_]+): tensor<([^>]*)>`)
	dtypeBits = map[string]int64{"f64": 64, "f32": 32, "bf16": 16, "f16": 16, "i64": 64, "i32": 32, "i16": 16,
		"i8": 8, "ui8": 8, "ui32": 32, "ui64": 64, "i1": 8}
)

// ParseStepIO reads the arguments of func.func @main in a StableHLO module (logical, unpartitioned sizes).
func ParseStepIO(module string) (StepIO, error) {
	var io StepIO
	start := strings.Index(module, "func.func @main(")
	if start < 0 {
		return io, errors.New("no func.func @main in the module")
	}
	sig := module[start:]
	if end := strings.Index(sig, ") -> ("); end >= 0 {
		sig = sig[:end]
	}
	for _, m := range reMainArg.FindAllStringSubmatch(sig, -1) {
		bytes, err := tensorBytes(m[2])
		if err != nil {
			return io, errors.WithMessagef(err, "argument %%%s", m[1])
		}
		if strings.HasPrefix(m[1], "arg") {
			io.HostInputs++
			io.HostBytes += bytes
		} else {
			io.Variables++
			io.VarBytes += bytes
		}
	}
	return io, nil
}

// tensorBytes is the size of a tensor type body such as "8x28x28x1xf32" or "f32".
func tensorBytes(body string) (int64, error) {
	parts := strings.Split(body, "x")
	bits, ok := dtypeBits[parts[len(parts)-1]]
	if !ok {
		return 0, errors.Errorf("unknown element type in tensor<%s>", body)
	}
	n := int64(1)
	for _, d := range parts[:len(parts)-1] {
		v, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			return 0, errors.Errorf("bad dimension %q in tensor<%s>", d, body)
		}
		n *= v
	}
	return n * bits / 8, nil
}
