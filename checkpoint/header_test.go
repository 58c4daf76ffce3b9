package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gomlx/gomlx/pkg/ml/context"
)

// headerJSON is the header JSON of fields over one Int8 tensor of one byte, named fields["_tensor"].
func headerJSON(fields map[string]any) ([]byte, error) {
	out := map[string]any{}
	for k, v := range fields {
		out[k] = v
	}
	out["tensors"] = []map[string]any{{"name": fields["_tensor"], "dtype": "Int8", "shape": []int{1}, "offset": 0, "bytes": 1}}
	delete(out, "_tensor")
	return json.Marshal(out)
}

// headerFile frames a checkpoint of headerJSON(fields) and its one-byte payload.
func headerFile(t testing.TB, fields map[string]any) []byte {
	t.Helper()
	header, err := headerJSON(fields)
	if err != nil {
		t.Fatal(err)
	}
	return frameCheckpoint(formatVersion, header, []byte{7})
}

// validHeaderFields is a header a run writes.
func validHeaderFields() map[string]any {
	config := "name: a\nseed: 1\n"
	return map[string]any{"trainer_version": "0.1.0", "net": "linear", "config": config, "config_hash": ConfigHash(config),
		"step": 20, "epoch": 1, "lr_scale": 0.25, "_tensor": "/model/fc/weights"}
}

// TestCheckpointRefusesImpossibleHeaders: a header that passes its checksum but holds a value no writer
// produces is refused, naming the file, the field and the value; Save refuses to write one.
func TestCheckpointRefusesImpossibleHeaders(t *testing.T) {
	if _, err := parse("ok.tckpt", headerFile(t, validHeaderFields())); err != nil {
		t.Fatalf("a run's header: %v", err)
	}
	cases := map[string]struct {
		set  map[string]any
		want string
	}{
		"negative step":        {map[string]any{"step": -1, "epoch": 0}, "step -1: expected 0 to 999999999"},
		"absurd step":          {map[string]any{"step": 1 << 40}, "step 1099511627776"},
		"negative epoch":       {map[string]any{"epoch": -2}, "epoch -2"},
		"epoch past the steps": {map[string]any{"epoch": 20*1024 + 1}, "epoch 20481 at step 20"},
		"lr scale 0":           {map[string]any{"lr_scale": 0}, "lr_scale 0"},
		"negative lr scale":    {map[string]any{"lr_scale": -0.5}, "lr_scale -0.5"},
		"lr scale above 1":     {map[string]any{"lr_scale": 4}, "lr_scale 4"},
		"lr scale not halved":  {map[string]any{"lr_scale": 0.3}, "lr_scale 0.3"},
		"unknown metric":       {map[string]any{"metric": "loss", "score": 0.5}, `metric "loss"`},
		"score above 1":        {map[string]any{"metric": "top1", "score": 1.5}, "score 1.5 of top1"},
		"score without metric": {map[string]any{"score": 0.5}, "score 0.5 without a metric"},
		"config hash mismatch": {map[string]any{"config_hash": "0123456789abcdef"}, "is not the hash of the config"},
		"config hash format":   {map[string]any{"config": "", "config_hash": "xyz"}, `config_hash "xyz"`},
		"no trainer version":   {map[string]any{"trainer_version": ""}, "trainer_version"},
		"no net":               {map[string]any{"net": ""}, `net ""`},
		"unknown field":        {map[string]any{"learning_rate": 0.1}, `unknown field "learning_rate"`},
		"tensor name":          {map[string]any{"_tensor": "model//fc"}, `tensor "model//fc"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fields := validHeaderFields()
			for k, v := range c.set {
				fields[k] = v
			}
			_, err := parse("bad.tckpt", headerFile(t, fields))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.tckpt") {
				t.Errorf("%v; want an error naming bad.tckpt with %q", err, c.want)
			}
		})
	}
	// A periodic checkpoint's name is its step.
	if _, err := parse(filepath.Join("run", FileName(30)), headerFile(t, validHeaderFields())); err == nil ||
		!strings.Contains(err.Error(), "named for step 30 but its header says step 20") {
		t.Errorf("ckpt-30 holding step 20: %v", err)
	}
	if _, err := parse(filepath.Join("run", FileName(20)), headerFile(t, validHeaderFields())); err != nil {
		t.Errorf("ckpt-20 holding step 20: %v", err)
	}
	// The writer refuses what the reader would.
	ctx := contextWithVariables(t)
	if _, err := Save(t.TempDir(), ctx, Header{TrainerVersion: "0.1.0", Net: "linear", Step: -3}, 2); err == nil ||
		!strings.Contains(err.Error(), "step -3") {
		t.Errorf("Save of step -3: %v", err)
	}
	if err := SaveFile(filepath.Join(t.TempDir(), BestName), ctx, Header{TrainerVersion: "0.1.0", Net: "linear",
		Step: 4, LRScale: 2}); err == nil || !strings.Contains(err.Error(), "lr_scale 2") {
		t.Errorf("SaveFile with lr_scale 2: %v", err)
	}
}

// Present bits of FuzzCheckpointHeader: which optional fields the header JSON carries.
const (
	fuzzLRScale    = 1 << iota // "lr_scale"
	fuzzMetric                 // "metric" and "score"
	fuzzUnknown                // a field no writer writes
	fuzzHashConfig             // config_hash is the config's hash (so the fuzzer reaches the other checks)
)

// FuzzCheckpointHeader: the reader accepts a header exactly when a writer could have produced it,
// by rules restated here independently of Header.Validate, and whatever it accepts the writer writes
// back unchanged. Seeds: testdata/fuzz/FuzzCheckpointHeader; `go test ./checkpoint -run '^$' -fuzz
// FuzzCheckpointHeader` explores.
func FuzzCheckpointHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, version, net, hash, config string, step, epoch int64, lrScale float64,
		metric string, score float64, tensor string, present uint8, nameStep int64) {
		fields := map[string]any{"trainer_version": version, "net": net, "config": config, "config_hash": hash,
			"step": step, "epoch": epoch, "_tensor": tensor}
		if present&fuzzHashConfig != 0 {
			fields["config_hash"] = ConfigHash(config)
		}
		if present&fuzzLRScale != 0 {
			fields["lr_scale"] = lrScale
		}
		if present&fuzzMetric != 0 {
			fields["metric"], fields["score"] = metric, score
		}
		if present&fuzzUnknown != 0 {
			fields["extra"] = 1
		}
		header, err := headerJSON(fields)
		if err != nil {
			return // NaN or ±Inf: JSON cannot carry them
		}
		var seen Header // what the JSON says, decoded leniently
		if err := json.Unmarshal(header, &seen); err != nil {
			t.Fatal(err)
		}
		path := "fuzz.tckpt"
		if nameStep >= 0 {
			path = FileName(int(nameStep % (MaxStep + 1)))
		}
		ckpt, err := parse(path, frameCheckpoint(formatVersion, header, []byte{7}))
		want := writerCouldWrite(seen, present&fuzzLRScale != 0, present&fuzzUnknown != 0, path)
		if (err == nil) != (want == "") {
			t.Fatalf("header %s as %s: reader says %v, the rules say %q", header, path, err, want)
		}
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		// Accepted: the writer writes the same header back, and it reads back identically.
		ctx := context.New()
		scope, name := splitName(ckpt.Header.Tensors[0].Name) // as JSON carried it (invalid UTF-8 replaced)
		ctx.InAbsPath(scope).VariableWithValue(name, []int8{7})
		again, err := encode(ctx, ckpt.Header)
		if err != nil {
			t.Fatalf("the writer refuses a header the reader accepted: %v", err)
		}
		back, err := parse(path, again)
		if err != nil {
			t.Fatalf("the reader refuses what the writer wrote: %v", err)
		}
		if !reflect.DeepEqual(back.Header, ckpt.Header) {
			t.Fatalf("header changed on rewrite: %+v, then %+v", ckpt.Header, back.Header)
		}
	})
}

// splitName splits a valid tensor name into scope and name: "/model/fc/weights" into "/model/fc" and
// "weights", "/x" into "/" and "x".
func splitName(tensor string) (scope, name string) {
	i := strings.LastIndex(tensor, "/")
	if i == 0 {
		return "/", tensor[1:]
	}
	return tensor[:i], tensor[i+1:]
}

// writerCouldWrite restates the header rules (docs/checkpoints.md): "" when a writer could have
// written h into a file at path, else the rule it breaks.
func writerCouldWrite(h Header, lrScalePresent, unknownField bool, path string) string {
	token := func(s string, extra string) bool {
		if len(s) == 0 || len(s) > 64 {
			return false
		}
		for i, r := range s {
			alnum := r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			if !alnum && (i == 0 || !strings.ContainsRune(extra, r)) {
				return false
			}
		}
		return true
	}
	hexDigits := func(s string) bool {
		for _, r := range s {
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
				return false
			}
		}
		return len(s) == 16
	}
	halvings := func(s float64) bool { // s = 2^-n, n >= 0
		if s <= 0 || s > 1 {
			return false
		}
		for s < 1 {
			s *= 2
		}
		return s == 1
	}
	sum := sha256.Sum256([]byte(h.Config))
	switch {
	case unknownField:
		return "unknown field"
	case !token(h.TrainerVersion, ".+_-"):
		return "trainer_version"
	case !token(h.Net, "._-"):
		return "net"
	case h.ConfigHash != "" && !hexDigits(h.ConfigHash):
		return "config_hash format"
	case h.Config != "" && h.ConfigHash != hex.EncodeToString(sum[:8]):
		return "config_hash of config"
	case h.Step < 0 || h.Step >= 1e9:
		return "step"
	case h.Epoch < 0 || h.Epoch > 1024*h.Step:
		return "epoch"
	case lrScalePresent && !halvings(h.LRScale):
		return "lr_scale"
	case h.Metric == "" && h.Score != 0:
		return "score without metric"
	case h.Metric != "" && h.Metric != "top1" && h.Metric != "ema_top1":
		return "metric"
	case h.Metric != "" && (h.Score < 0 || h.Score > 1):
		return "score"
	}
	for _, rec := range h.Tensors {
		name := rec.Name
		if !strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") ||
			len(name) > 1024 || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "tensor name"
		}
	}
	if base := filepath.Base(path); strings.HasPrefix(base, "ckpt-") && base != FileName(h.Step) {
		return fmt.Sprintf("file name %s for step %d", base, h.Step)
	}
	return ""
}
