package graphs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

var mobileNets = []string{"mobilenet_v2", "efficientnet_b0", "mobilenetv4_conv_medium"}

// mobileGraphOnly builds the net's graph (nothing runs) in a fresh context under ModelScope and returns
// the context.
func mobileGraphOnly(t *testing.T, name string, opts Options, size int) *context.Context {
	t.Helper()
	spec, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	g := NewGraph(testBackend(), "shapes_"+name)
	defer g.Finalize()
	images := Parameter(g, "images", shapes.Make(dtypes.Float32, 1, size, size, 3))
	logits := spec.Build(ctx.In(ModelScope), images, false, opts)
	if want := []int{1, classes(opts, 1000)}; !slices.Equal(logits.Shape().Dimensions, want) {
		t.Fatalf("%s: logits %s, want %v", name, logits.Shape(), want)
	}
	return ctx
}

// mobileTorchShape is a variable's shape in the reference's layout: HWIO kernels as OIHW, [in, out] Linear
// weights as [out, in].
func mobileTorchShape(name string, dims []int) []int {
	switch {
	case name == "weight" && len(dims) == 4:
		return []int{dims[3], dims[2], dims[0], dims[1]}
	case name == "weight" && len(dims) == 2:
		return []int{dims[1], dims[0]}
	}
	return dims
}

// mobileStateDictDigest lists "key:shape" for every variable as the reference's state_dict would (without
// num_batches_tracked), sorted, and returns the first 16 hex digits of its SHA-256, the number of keys,
// the trainable parameter count and the list itself.
func mobileStateDictDigest(t *testing.T, ctx *context.Context) (digest string, keys, params int, lines []string) {
	t.Helper()
	for v := range ctx.IterVariables() {
		key, ok := DefaultTorchName(v.Scope(), v.Name())
		if !ok {
			t.Fatalf("variable %s/%s is outside the model scope", v.Scope(), v.Name())
		}
		dims := mobileTorchShape(v.Name(), v.Shape().Dimensions)
		parts := make([]string, len(dims))
		for i, d := range dims {
			parts[i] = fmt.Sprint(d)
		}
		lines = append(lines, key+":"+strings.Join(parts, ","))
		if v.Trainable {
			params += v.Shape().Size()
		}
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])[:16], len(lines), params, lines
}

// The references' numbers come from /usr/bin/python3 with torch 1.13 and torchvision 0.14: parameters
// (sum of numel over parameters()), conv and linear multiply-accumulates of a forward pass (forward hooks:
// output positions · in/groups · k², and in·out), and the SHA-256 of the sorted "key:shape" lines of
// state_dict() without num_batches_tracked. torchvision is called as mobilenet_v2(width_mult=w,
// num_classes=c) and _efficientnet(_efficientnet_conf("efficientnet_b0", width_mult=w, depth_mult=1), 0.2,
// None, None, True, num_classes=c). timm is not installed: mobilenetv4_conv_medium's numbers come from a
// PyTorch replica written from timm's _gen_mobilenet_v4, UniversalInvertedResidual, EdgeResidual,
// ConvBnAct and ConvNormAct (same module names: conv_stem, bn1, blocks.s.j.{dw_start,pw_exp,dw_mid,
// pw_proj}.{conv,bn}, conv_exp/bn1/conv_pwl/bn2, conv_head, norm_head, classifier). Its 9,715,512
// parameters and 0.83 GMACs at 224 match timm's published 9.7M and 0.8 GMACs.
var mobileReferences = []struct {
	name         string
	width        float64
	classes      int
	size         int
	params, keys int
	macs         int64
	digest       string
}{
	{"mobilenet_v2", 1, 1000, 224, 3504872, 262, 300774272, "42d3c1bab9e8a39b"},
	{"mobilenet_v2", 0.25, 10, 32, 250922, 262, 745888, "e5ac52c8eb0e2e2a"},
	{"efficientnet_b0", 1, 1000, 224, 5288548, 311, 385814752, "dfcd21b951dc4b4d"},
	{"efficientnet_b0", 0.25, 10, 32, 328956, 311, 1002912, "1691284f4a472d76"},
	{"mobilenetv4_conv_medium", 1, 1000, 224, 9715512, 387, 827649984, "3eabd43e67658d79"},
	{"mobilenetv4_conv_medium", 0.25, 10, 32, 871266, 387, 4084560, "6ba19599b028eb42"},
	// Above width 1: MobileNetV2's last_channel and timm's stem scale too.
	{"mobilenet_v2", 1.4, 100, 32, 4495076, 262, 12024176, "6ed1541183589d08"},
	{"efficientnet_b0", 1.4, 100, 32, 8056510, 311, 16555712, "b88407adfe9a51e8"},
	{"mobilenetv4_conv_medium", 1.4, 100, 32, 15896956, 387, 35094824, "4c02f34267dced4b"},
}

func TestMobileFamilyMatchesReferenceStateDicts(t *testing.T) {
	for _, ref := range mobileReferences {
		t.Run(fmt.Sprintf("%s/width=%g", ref.name, ref.width), func(t *testing.T) {
			var stats Stats
			opts := Options{Width: ref.width, NumClasses: ref.classes, Stats: &stats}
			ctx := mobileGraphOnly(t, ref.name, opts, ref.size)
			digest, keys, params, lines := mobileStateDictDigest(t, ctx)
			if params != ref.params {
				t.Errorf("%d trainable parameters, reference %d", params, ref.params)
			}
			if stats.MACs != ref.macs {
				t.Errorf("%d MACs at %d px, reference %d", stats.MACs, ref.size, ref.macs)
			}
			if keys != ref.keys || digest != ref.digest {
				t.Errorf("state_dict: %d keys, digest %s; reference %d keys, digest %s. Ours:\n%s",
					keys, digest, ref.keys, ref.digest, strings.Join(lines, "\n"))
			}
		})
	}
}

func TestMobileFamilySummaries(t *testing.T) {
	for _, ref := range mobileReferences {
		if ref.width != 1 {
			continue
		}
		spec, _ := Get(ref.name)
		sum, err := Summarize(testBackend(), spec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sum.ForwardFLOPs != 2*ref.macs || sum.InputShape != [3]int{224, 224, 3} || sum.NumClasses != 1000 {
			t.Errorf("%s: %d FLOPs (want %d), input %v, %d classes", ref.name, sum.ForwardFLOPs, 2*ref.macs,
				sum.InputShape, sum.NumClasses)
		}
		// Summarize's count is the reference's when it counts trainable variables only, and exceeds it by
		// the BatchNorm running statistics when it counts every variable (GoMLX's NumParameters).
		stats := 0
		for v := range mobileGraphOnly(t, ref.name, Options{}, 224).IterVariables() {
			if strings.HasPrefix(v.Name(), "running_") {
				stats += v.Shape().Size()
			}
		}
		if sum.Parameters != ref.params && sum.Parameters != ref.params+stats {
			t.Errorf("%s: Summarize reports %d parameters; the reference has %d, plus %d running statistics",
				ref.name, sum.Parameters, ref.params, stats)
		}
	}
}

func TestMobileFamilyHonoursBatchNormOverrides(t *testing.T) {
	// One training pass from running_mean 0: the stem BatchNorm's running_mean becomes (1−decay)·batch mean,
	// so decay 0.5 stores 5 times what PyTorch's momentum 0.1 (decay 0.9) does. In eval mode a larger
	// epsilon changes the logits.
	runningMean := func(opts Options) []float64 {
		ctx := context.New()
		mobileForward(t, ctx, "efficientnet_b0", opts, true)
		v := ctx.In(ModelScope).In("features").In("0").In("1").GetVariable("running_mean")
		if v == nil {
			t.Fatal("no running_mean at /model/features/0/1")
		}
		return tensors.MustCopyFlatData[float64](v.MustValue())
	}
	zero := 0.0
	opts := Options{Width: 0.25, NumClasses: 10, Precision: "float64", DropoutRate: &zero, DropPathRate: &zero}
	def := runningMean(opts)
	opts.BNDecay = 0.5
	half := runningMean(opts)
	for i := range def {
		if def[i] == 0 || math.Abs(half[i]/def[i]-5) > 1e-9 {
			t.Fatalf("running_mean[%d]: %g with decay 0.5, %g with the default 0.9", i, half[i], def[i])
		}
	}
	opts.BNDecay = 0
	a := mobileFlat(t, mobileForward(t, context.New(), "efficientnet_b0", opts, false))
	opts.BNEpsilon = 1e-3
	b := mobileFlat(t, mobileForward(t, context.New(), "efficientnet_b0", opts, false))
	if d := mobileMaxRelDiff(b, a); !(d > 1e-6) {
		t.Errorf("BatchNorm epsilon 1e-3 instead of 1e-5 changed eval logits by only %g", d)
	}
}

func TestMobileFamilyNoWeightDecayIsBiasesAndNorms(t *testing.T) {
	// timm and torchvision put every parameter of rank <= 1 (biases, BatchNorm) in the no-decay group.
	for _, name := range mobileNets {
		spec, _ := Get(name)
		ctx := mobileGraphOnly(t, name, Options{NumClasses: 10}, 64)
		decayed, excluded := 0, 0
		for v := range ctx.IterVariables() {
			if !v.Trainable {
				continue
			}
			want := v.Shape().Rank() <= 1
			if got := spec.ExcludedFromWeightDecay(v.Scope(), v.Name()); got != want {
				t.Errorf("%s: %s/%s %s: excluded from weight decay = %v", name, v.Scope(), v.Name(), v.Shape(), got)
			}
			if want {
				excluded++
			} else {
				decayed++
			}
		}
		if decayed == 0 || excluded == 0 {
			t.Errorf("%s: %d decayed and %d excluded variables", name, decayed, excluded)
		}
	}
}

func TestMobileFamilyInitialisation(t *testing.T) {
	// torchvision: kaiming_normal_(fan_out) with PyTorch's fan_out = out·k² even for depthwise kernels;
	// MobileNetV2's classifier N(0, 0.01), EfficientNet's U(±1/√out); zero biases; BatchNorm ones/zeros.
	// timm (MobileNetV4): N(0, 2/fan_out) with fan_out = k²·out/groups, classifier U(±1/√out).
	cases := map[string][]initWant{
		"mobilenet_v2": {
			{"features/0/0", "weight", math.Sqrt(2.0 / (9 * 32)), 0, 0},
			{"features/17/conv/1/0", "weight", math.Sqrt(2.0 / (9 * 960)), 0, 0}, // depthwise [3, 3, 1, 960]
			{"features/17/conv/2", "weight", math.Sqrt(2.0 / 320), 0, 0},
			{"features/17/conv/3", "weight", 0, 0, 1},
			{"features/17/conv/3", "bias", 0, 0, 0},
			{"classifier/1", "weight", 0.01, 0, 0},
			{"classifier/1", "bias", 0, 0, 0},
		},
		"efficientnet_b0": {
			{"features/6/3/block/1/0", "weight", math.Sqrt(2.0 / (25 * 1152)), 0, 0}, // depthwise 5x5
			{"features/6/3/block/2/fc1", "weight", math.Sqrt(2.0 / 48), 0, 0},
			{"features/6/3/block/2/fc1", "bias", 0, 0, 0},
			{"features/8/0", "weight", math.Sqrt(2.0 / 1280), 0, 0},
			{"classifier/1", "weight", 0, 1 / math.Sqrt(1000), 0},
			{"classifier/1", "bias", 0, 0, 0},
		},
		"mobilenetv4_conv_medium": {
			{"blocks/3/0/dw_mid/conv", "weight", math.Sqrt(2.0 / 25), 0, 0}, // depthwise 5x5 over 960
			{"blocks/3/0/dw_start/conv", "weight", math.Sqrt(2.0 / 25), 0, 0},
			{"blocks/3/0/pw_exp/conv", "weight", math.Sqrt(2.0 / 960), 0, 0},
			{"conv_head", "weight", math.Sqrt(2.0 / 1280), 0, 0},
			{"norm_head", "weight", 0, 0, 1},
			{"classifier", "weight", 0, 1 / math.Sqrt(1000), 0},
			{"classifier", "bias", 0, 0, 0},
		},
	}
	for _, name := range mobileNets {
		checkInitialisation(t, name, 32, cases[name])
	}
}

// mobileClosedFormValue is the value of element i (in the reference's row-major layout) of the state_dict
// entry key with reference shape dims: sin(0.7·i + 0.1·len(key)), scaled per kind of entry so that
// activations stay of order one.
func mobileClosedFormValue(key string, dims []int, i int) float64 {
	s := math.Sin(float64(i)*0.7 + 0.1*float64(len(key)))
	switch name := key[strings.LastIndex(key, ".")+1:]; {
	case name == "weight" && len(dims) >= 2:
		fanIn := 1
		for _, d := range dims[1:] {
			fanIn *= d
		}
		return s / math.Sqrt(float64(fanIn))
	case name == "weight":
		return 1 + 0.2*s
	case name == "running_var":
		return 1 + 0.5*s*s
	}
	return 0.1 * s // bias, running_mean
}

// mobileSetClosedFormWeights gives every variable of the model its closed-form value, converting the reference
// layout (OIHW kernels, [out, in] Linear weights) to ours.
func mobileSetClosedFormWeights(t *testing.T, ctx *context.Context) {
	t.Helper()
	for v := range ctx.IterVariables() {
		key, ok := DefaultTorchName(v.Scope(), v.Name())
		if !ok {
			continue
		}
		dims := v.Shape().Dimensions
		values := make([]float64, v.Shape().Size())
		switch {
		case v.Name() == "weight" && len(dims) == 4: // ours [h, w, in, out], reference [out, in, h, w]
			kh, kw, in, out := dims[0], dims[1], dims[2], dims[3]
			for o := range out {
				for i := range in {
					for y := range kh {
						for x := range kw {
							values[((y*kw+x)*in+i)*out+o] = mobileClosedFormValue(key, []int{out, in, kh, kw}, ((o*in+i)*kh+y)*kw+x)
						}
					}
				}
			}
		case v.Name() == "weight" && len(dims) == 2: // ours [in, out], reference [out, in]
			in, out := dims[0], dims[1]
			for o := range out {
				for i := range in {
					values[i*out+o] = mobileClosedFormValue(key, []int{out, in}, o*in+i)
				}
			}
		default:
			for i := range values {
				values[i] = mobileClosedFormValue(key, dims, i)
			}
		}
		v.MustSetValue(tensors.FromFlatDataAndDimensions(values, dims...))
	}
}

// mobileReferenceLogits are the float64 logits of torchvision 0.14's mobilenet_v2(width_mult=0.25,
// num_classes=10) and efficientnet_b0 at width 0.25 (built as in mobileReferences), and of the
// mobilenetv4_conv_medium replica at channel multiplier 0.25, 10 classes, with every state_dict entry set
// by mobileClosedFormValue, dropout and stochastic depth off, on the two 64x64 images of
// mobileClosedFormImages: eval() and train() mode (batch statistics), with PyTorch's symmetric padding and
// with TF-SAME padding (every conv's padding set to 0 and a forward pre-hook doing F.pad with XLA's SAME
// amounts). Printed with %.15g by /usr/bin/python3 (torch 1.13).
var mobileReferenceLogits = map[string]map[string][]float64{
	"mobilenet_v2": {
		"eval/sym":   {0.74845473524986, -0.110582461560404, -0.360679281694241, 0.699545725940436, -0.947715256261732, 0.508213690003951, -0.140060885003363, -0.401447852277805, 0.87853185154997, -0.735570371578623, 0.748454746990893, -0.110582471214275, -0.360679278019169, 0.699545729725642, -0.947715265981341, 0.508213701739825, -0.140060894024579, -0.401447849607849, 0.878531856307575, -0.735570381845924},
		"train/sym":  {1.84934299706487, -1.29747115998987, 0.433755416851103, 0.617814774816896, -1.6116351487921, 1.65014735248362, -1.29967599838434, 0.308388708078192, 0.904620685064353, -1.48706775930177, 2.95309248047448, -2.27272343600275, 0.887370186144365, 0.868697117458818, -2.4658797875812, 2.76339416517446, -2.22315680885853, 0.669833149807429, 1.25091683600778, -2.40150680518883},
		"eval/same":  {0.748146039687334, -0.1103202181417, -0.360789358315941, 0.699459262060944, -0.947467106898874, 0.507903888264226, -0.139814317084612, -0.40153179077532, 0.878419323631606, -0.735306739106739, 0.748146038660671, -0.110320217294047, -0.36078935864288, 0.699459261735374, -0.947467106052039, 0.507903887237499, -0.139814316291882, -0.401531791014489, 0.878419323220802, -0.735306738211564},
		"train/same": {2.3836013378308, -1.78981655329899, 0.685715303288203, 0.707809586739609, -2.00730626407116, 2.19199320981072, -1.7692695837693, 0.516429091639395, 1.04199801784936, -1.91448373672016, 2.59666297065764, -1.93175018108776, 0.699305136560279, 0.82804183422028, -2.2128929876397, 2.40005900581078, -1.89593969350515, 0.510640701845517, 1.17791151164807, -2.12573336048273},
	},
	"efficientnet_b0": {
		"eval/sym":   {0.22881096418753, 0.268538256091636, -0.360319106890143, 0.163665994977936, 0.00401437400525093, -0.432099078183279, 0.262475910321553, 0.0245565306037777, -0.207111478670408, 0.446878353312615, 0.228810964187437, 0.268538256091676, -0.360319106890096, 0.163665994977843, 0.00401437400531428, -0.432099078183259, 0.262475910321467, 0.0245565306038591, -0.207111478670417, 0.446878353312544},
		"train/sym":  {1.01588635867175, -0.318330997518359, -0.461714832604175, 0.869002841147351, -0.718683396537094, -0.293058467400966, 0.822722982756318, -0.769059225653447, 0.159877260847743, 0.811715951901348, 1.35958826432474, -0.622370827818925, -0.450186116017147, 1.15957287979988, -1.06970505236435, -0.173505789250329, 1.03406303105224, -1.1355350019593, 0.376716040057125, 0.924844084945581},
		"eval/same":  {0.228811284123201, 0.268538186430211, -0.360319345435586, 0.163666343348391, 0.00401420552555753, -0.432099229707332, 0.262476255837209, 0.0245562784381531, -0.207111529563639, 0.446878664940299, 0.228811284123183, 0.268538186430219, -0.360319345435576, 0.163666343348372, 0.0040142055255698, -0.432099229707328, 0.262476255837191, 0.0245562784381692, -0.207111529563641, 0.446878664940285},
		"train/same": {1.36478908898684, -0.527668719100949, -0.566033920629439, 1.20022372032176, -1.0013524175754, -0.294017709038901, 1.10651275170305, -1.09967106833248, 0.262364021784336, 1.02258547061298, 0.998559675583437, -0.408356407708293, -0.339205277759997, 0.815891921618163, -0.779139815206776, -0.169312160392296, 0.738598089184347, -0.794516639855192, 0.273745800436515, 0.704132928171938},
	},
	"mobilenetv4_conv_medium": {
		"eval/sym":   {1.91180703806298, -0.825815704184357, -0.340293691851689, 1.44402800685348, -2.10400780281986, 1.62938180741563, -0.797739276883932, -0.527660703080086, 1.67679183879448, -1.92206337398717, 1.9118000513772, -0.825810855453878, -0.340294448023532, 1.44402436564132, -2.10400123205646, 1.62937495588424, -0.797734906550006, -0.527660830462765, 1.67678767187585, -1.92205659252095},
		"train/sym":  {2.75566735549909, -1.74017367294929, 0.27596912987597, 1.3742860535427, -2.60890085113463, 2.5053791309762, -1.69171188695445, 0.0239120698999974, 1.68996699724014, -2.49467533989455, 2.6785330671386, -1.70013826320672, 0.289171533626814, 1.31316794329587, -2.52450475403381, 2.43172650761342, -1.65849332622359, 0.04451852225564, 1.62384233307019, -2.40968840812459},
		"eval/same":  {1.91280168223334, -0.826506132163414, -0.340185802985115, 1.44454614888335, -2.10494310413651, 1.63035723261129, -0.79836161595249, -0.52764232529545, 1.67738483068227, -1.92302869072382, 1.91256796085791, -0.826342771505989, -0.340212949545532, 1.44442613811992, -2.10472431437002, 1.63012786161004, -0.798214126955296, -0.527648477037958, 1.67724716530108, -1.92280270340772},
		"train/same": {2.72671017779581, -1.75213103701107, 0.32402082476669, 1.30951045963537, -2.55351346992176, 2.48170753057945, -1.70929848044424, 0.0756674109877096, 1.62490634131672, -2.44253639405289, 2.7036385106907, -1.68846232753184, 0.245420981230378, 1.37135654217686, -2.5736746141715, 2.45205644631755, -1.64178800944152, -0.00248786091968368, 1.68220073324286, -2.45587359036195},
	},
}

// mobileClosedFormImages is x[n, h, w, c] = sin(0.05·i + 0.001·i²/64) with i the NHWC row-major index:
// two 64x64 RGB images.
func mobileClosedFormImages() *tensors.Tensor {
	const n, size = 2, 64
	values := make([]float64, n*size*size*3)
	for i := range values {
		fi := float64(i)
		values[i] = math.Sin(0.05*fi + 0.001*fi*fi/size)
	}
	return tensors.FromFlatDataAndDimensions(values, n, size, size, 3)
}

func TestMobileFamilyMatchesReferenceForward(t *testing.T) {
	// Same weights, same images, float64: our logits must be the reference's to rounding, in eval and
	// training mode and under both padding phases.
	if testing.Short() {
		t.Skip("twelve float64 forward passes at 64 px")
	}
	zero := 0.0
	images := mobileClosedFormImages()
	for _, name := range mobileNets {
		spec, _ := Get(name)
		for _, mode := range []string{"eval/sym", "train/sym", "eval/same", "train/same"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				train := strings.HasPrefix(mode, "train")
				opts := Options{Width: 0.25, NumClasses: 10, Precision: "float64", Padding: PadSymmetric,
					DropoutRate: &zero, DropPathRate: &zero}
				if strings.HasSuffix(mode, "same") {
					opts.Padding = PadSame
				}
				ctx := context.New()
				g := NewGraph(testBackend(), "variables")
				spec.Build(ctx.In(ModelScope), Parameter(g, "images", shapes.Make(dtypes.Float64, 2, 64, 64, 3)), train, opts)
				g.Finalize()
				mobileSetClosedFormWeights(t, ctx)
				exec, err := context.NewExec(testBackend(), ctx.Reuse(), func(ctx *context.Context, images *Node) *Node {
					return spec.Build(ctx.In(ModelScope), images, train, opts)
				})
				if err != nil {
					t.Fatal(err)
				}
				outs, err := exec.Exec(images)
				if err != nil {
					t.Fatal(err)
				}
				got, want := mobileFlat(t, outs[0]), mobileReferenceLogits[name][mode]
				if len(got) != len(want) {
					t.Fatalf("%d logits, reference %d", len(got), len(want))
				}
				if d := mobileMaxRelDiff(got, want); d > 1e-10 {
					t.Errorf("logits differ from the reference's by %.3g of their scale:\n got  %.6f\n want %.6f", d, got, want)
				}
			})
		}
	}
}

// mobileImages is a tiny generated dataset of n size x size images: image k is a plane wave whose
// direction and frequency depend on k, plus a little noise, and its label is k mod 10.
func mobileImages(n, size int) (*tensors.Tensor, *tensors.Tensor) {
	rng := rand.New(rand.NewPCG(3, 7))
	values := make([]float32, 0, n*size*size*3)
	labels := make([]int32, n)
	for k := range n {
		labels[k] = int32(k % 10)
		angle := math.Pi * float64(k) / float64(n)
		freq := 1 + float64(k%3)
		for i := range size {
			for j := range size {
				phase := 2 * math.Pi * freq * (math.Cos(angle)*float64(j) + math.Sin(angle)*float64(i)) / float64(size)
				for c := range 3 {
					values = append(values, float32(math.Sin(phase+float64(c))+0.1*rng.NormFloat64()))
				}
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(values, n, size, size, 3), tensors.FromValue(labels)
}

// mobileStepResult is what one SGD step reports.
type mobileStepResult struct {
	logitsDims []int
	loss       float64
	gradNorm   float64
	gradsOK    bool
}

// mobileLoss is the mean softmax cross-entropy of the logits against integer labels.
func mobileLoss(logits, labels *Node) *Node {
	onehot := OneHot(labels, logits.Shape().Dimensions[1], logits.DType())
	return ReduceAllMean(Neg(ReduceSum(Mul(onehot, LogSoftmax(logits, -1)), -1)))
}

// mobileTrainableValues lists the net's trainable variables (not the RNG state) and their values in g.
func mobileTrainableValues(ctx *context.Context, g *Graph) ([]*context.Variable, []*Node) {
	var vars []*context.Variable
	var values []*Node
	for v := range ctx.IterVariables() {
		if v.Trainable && strings.HasPrefix(v.Scope(), "/"+ModelScope) {
			vars = append(vars, v)
			values = append(values, v.ValueGraph(g))
		}
	}
	return vars, values
}

// mobileTrain runs steps of SGD on a batch of 2 generated images: forward in training mode, softmax
// cross-entropy, GoMLX's gradient of every trainable variable, and w -= (step/‖g‖)·g, all in one graph.
// The learning rate step/‖g‖ makes every update the same length: at initialisation these nets' gradient
// norms on two examples range from ~500 (MobileNetV2) to ~8e4 (MobileNetV4, whose head BatchNorm sees only
// the two pooled examples), and plain SGD with one learning rate overshoots erratically; PyTorch does the
// same with the torchvision models (measured: losses up and down, NaN for MobileNetV2 at 32 px).
func mobileTrain(t *testing.T, name string, opts Options, size, steps int, step float64) []mobileStepResult {
	t.Helper()
	spec, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	exec, err := context.NewExec(testBackend(), ctx, func(ctx *context.Context, images, labels *Node) []*Node {
		g := images.Graph()
		logits := spec.Build(ctx.In(ModelScope), images, true, opts)
		loss := mobileLoss(logits, labels)
		vars, values := mobileTrainableValues(ctx, g)
		grads := Gradient(loss, values...)
		sumSq := ScalarZero(g, loss.DType())
		finite := Const(g, true)
		for _, grad := range grads {
			sumSq = Add(sumSq, ConvertDType(ReduceAllSum(Square(grad)), loss.DType()))
			finite = LogicalAnd(finite, LogicalAll(IsFinite(grad)))
		}
		norm := Sqrt(sumSq)
		lr := Div(Scalar(g, loss.DType(), step), norm)
		for i, v := range vars {
			v.SetValueGraph(Sub(values[i], Mul(grads[i], ConvertDType(lr, grads[i].DType()))))
		}
		return []*Node{logits, loss, norm, finite}
	})
	if err != nil {
		t.Fatal(err)
	}
	images, labels := mobileImages(2, size)
	var results []mobileStepResult
	for range steps {
		outs, err := exec.Exec(images, labels)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, mobileStepResult{
			logitsDims: outs[0].Shape().Dimensions,
			loss:       mobileFlat(t, outs[1])[0],
			gradNorm:   mobileFlat(t, outs[2])[0],
			gradsOK:    tensors.ToScalar[bool](outs[3]),
		})
	}
	return results
}

func TestMobileFamilyTrainsAtReducedWidth(t *testing.T) {
	// Width 0.25, 10 classes, batch 2 at 64 px: at 32 px the last stages are 1x1, so their BatchNorms see
	// two values per channel and the loss is numerically degenerate (float32 and float64 disagree on the
	// gradient norm by 50x there).
	const step = 3e-6
	zero := 0.0
	for _, name := range mobileNets {
		t.Run(name, func(t *testing.T) {
			// No dropout or stochastic depth, so the loss of the fixed batch is a function of the weights.
			opts := Options{Width: 0.25, NumClasses: 10, DropoutRate: &zero, DropPathRate: &zero}
			results := mobileTrain(t, name, opts, 64, 5, step)
			var losses []float64
			for i, r := range results {
				if !slices.Equal(r.logitsDims, []int{2, 10}) {
					t.Fatalf("step %d: logits %v, want [2 10]", i, r.logitsDims)
				}
				if math.IsNaN(r.loss) || math.IsInf(r.loss, 0) || !r.gradsOK || !(r.gradNorm > 0) {
					t.Fatalf("step %d: loss %g, gradient norm %g, gradients finite %v", i, r.loss, r.gradNorm, r.gradsOK)
				}
				losses = append(losses, r.loss)
			}
			t.Logf("losses %.5f, first gradient norm %.4g", losses, results[0].gradNorm)
			for i := 1; i < len(losses); i++ {
				if !(losses[i] < losses[i-1]) {
					t.Errorf("loss rose at step %d: %.6f", i, losses)
				}
			}
			// A step of length s against the gradient lowers the loss by about s·‖g‖.
			predicted := step * results[0].gradNorm
			if got := losses[0] - losses[1]; got < 0.5*predicted || got > 1.5*predicted {
				t.Errorf("first step lowered the loss by %.4g; the gradient predicts %.4g", got, predicted)
			}
		})
	}
}

func TestMobileFamilyGradientsMatchFiniteDifferences(t *testing.T) {
	// In float64, training mode, batch 2 at 64 px: the directional derivative <g, d> along a random d
	// against the central difference (L(w+εd) − L(w−εd)) / 2ε, weights moved on the host.
	if testing.Short() {
		t.Skip("three float64 forward/backward passes per net")
	}
	const eps = 1e-6
	zero := 0.0
	for _, name := range mobileNets {
		t.Run(name, func(t *testing.T) {
			spec, _ := Get(name)
			opts := Options{Width: 0.25, NumClasses: 10, DropoutRate: &zero, DropPathRate: &zero, Precision: "float64"}
			ctx := context.New()
			var vars []*context.Variable
			exec, err := context.NewExec(testBackend(), ctx, func(ctx *context.Context, images, labels *Node) []*Node {
				loss := mobileLoss(spec.Build(ctx.In(ModelScope), images, true, opts), labels)
				var values []*Node
				vars, values = mobileTrainableValues(ctx, images.Graph())
				return append([]*Node{loss}, Gradient(loss, values...)...)
			})
			if err != nil {
				t.Fatal(err)
			}
			images, labels := mobileImages(2, 64)
			outs, err := exec.Exec(images, labels)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			weights := make([][]float64, len(vars))
			dirs := make([][]float64, len(vars))
			slope := 0.0
			for i, v := range vars {
				weights[i] = tensors.MustCopyFlatData[float64](v.MustValue())
				grad := tensors.MustCopyFlatData[float64](outs[1+i])
				dirs[i] = make([]float64, len(grad))
				for j := range grad {
					dirs[i][j] = 1e-3 * rng.NormFloat64()
					slope += grad[j] * dirs[i][j]
				}
			}
			lossAt := func(t0 float64) float64 {
				for i, v := range vars {
					moved := make([]float64, len(weights[i]))
					for j := range moved {
						moved[j] = weights[i][j] + t0*dirs[i][j]
					}
					v.MustSetValue(tensors.FromFlatDataAndDimensions(moved, v.Shape().Dimensions...))
				}
				outs, err := exec.Exec(images, labels)
				if err != nil {
					t.Fatal(err)
				}
				return tensors.ToScalar[float64](outs[0])
			}
			fd := (lossAt(eps) - lossAt(-eps)) / (2 * eps)
			t.Logf("<g, d> = %.8g, finite difference %.8g", slope, fd)
			if math.Abs(fd-slope) > 1e-5*math.Abs(slope) || slope == 0 {
				t.Errorf("directional derivative %.10g, finite difference %.10g", slope, fd)
			}
		})
	}
}

// mobileForward runs the net's eval forward pass on the tiny dataset with the weights in ctx (created
// on first use).
func mobileForward(t *testing.T, ctx *context.Context, name string, opts Options, train bool) *tensors.Tensor {
	t.Helper()
	spec, _ := Get(name)
	exec, err := context.NewExec(testBackend(), ctx, func(ctx *context.Context, images *Node) *Node {
		return spec.Build(ctx.In(ModelScope), images, train, opts)
	})
	if err != nil {
		t.Fatal(err)
	}
	images, _ := mobileImages(2, 32)
	outs, err := exec.Exec(images)
	if err != nil {
		t.Fatal(err)
	}
	return outs[0]
}

func mobileFlat(t *testing.T, x *tensors.Tensor) []float64 {
	t.Helper()
	switch x.DType() {
	case dtypes.Float32:
		v := tensors.MustCopyFlatData[float32](x)
		out := make([]float64, len(v))
		for i := range v {
			out[i] = float64(v[i])
		}
		return out
	case dtypes.Float64:
		return tensors.MustCopyFlatData[float64](x)
	}
	t.Fatalf("logits dtype %s", x.DType())
	return nil
}

// mobileMaxRelDiff is max|a−b| / max|b|.
func mobileMaxRelDiff(a, b []float64) float64 {
	diff, scale := 0.0, 0.0
	for i := range b {
		diff = max(diff, math.Abs(a[i]-b[i]))
		scale = max(scale, math.Abs(b[i]))
	}
	return diff / scale
}

func TestMobileFamilyPaddingPhase(t *testing.T) {
	// The same weights under SAME padding and symmetric padding: every stride-2 conv on an even input
	// reads a window shifted by one pixel, so the logits must differ; symmetric is the default.
	for _, name := range mobileNets {
		t.Run(name, func(t *testing.T) {
			ctx := context.New()
			opts := Options{Width: 0.25, NumClasses: 10}
			def := mobileFlat(t, mobileForward(t, ctx, name, opts, false))
			opts.Padding = PadSymmetric
			sym := mobileFlat(t, mobileForward(t, ctx.Reuse(), name, opts, false))
			opts.Padding = PadSame
			same := mobileFlat(t, mobileForward(t, ctx.Reuse(), name, opts, false))
			if d := mobileMaxRelDiff(def, sym); d != 0 {
				t.Errorf("default and symmetric padding differ by %g", d)
			}
			if d := mobileMaxRelDiff(same, sym); !(d > 1e-3) {
				t.Errorf("SAME and symmetric padding give logits within %g of each other", d)
			}
		})
	}
}

// mobileCosine is the mobileCosine similarity of a and b.
func mobileCosine(a, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += a[i] * b[i]
		aa += a[i] * a[i]
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

func TestMobileFamilyRefusesValidPadding(t *testing.T) {
	for _, name := range mobileNets {
		spec, _ := Get(name)
		if _, err := Summarize(testBackend(), spec, Options{Padding: PadValid, Width: 0.25}); err == nil ||
			!strings.Contains(err.Error(), "valid") {
			t.Errorf("%s: Padding valid should be refused with a clear error, got %v", name, err)
		}
	}
}

func TestMobileFamilyPrecisions(t *testing.T) {
	// The same weights at float64 (float64 variables), float32 and bfloat16 compute, in eval mode (in
	// training mode at 32 px the 1x1 BatchNorms over two examples amplify rounding without bound).
	for _, name := range mobileNets {
		t.Run(name, func(t *testing.T) {
			opts := Options{Width: 0.25, NumClasses: 10, Seed: 5}
			ctx64 := context.New()
			opts.Precision = "float64"
			l64 := mobileForward(t, ctx64, name, opts, false)
			ctx32 := context.New()
			opts.Precision = ""
			l32 := mobileForward(t, ctx32, name, opts, false)
			opts.Precision = "bfloat16"
			l16 := mobileForward(t, ctx32.Reuse(), name, opts, false)
			if l64.DType() != dtypes.Float64 || l32.DType() != dtypes.Float32 || l16.DType() != dtypes.Float32 {
				t.Fatalf("logits dtypes %s, %s, %s", l64.DType(), l32.DType(), l16.DType())
			}
			f64, f32, f16 := mobileFlat(t, l64), mobileFlat(t, l32), mobileFlat(t, l16)
			if d := mobileMaxRelDiff(f32, f64); d > 1e-5 {
				t.Errorf("float32 logits differ from float64 by %g of their scale", d)
			}
			// GoMLX's float32->bfloat16 conversion truncates (bfloat16.FromFloat32 keeps the top 16 bits), so
			// on the pure-Go backend every bfloat16 op shrinks magnitudes a little and the logits come out
			// ~30% small (measured); their direction must still match.
			if c := mobileCosine(f16, f64); c < 0.99 || mobileMaxRelDiff(f16, f64) == 0 {
				t.Errorf("bfloat16 logits: mobileCosine %.5f with float64, max difference %g", c, mobileMaxRelDiff(f16, f64))
			}
		})
	}
}

func TestMobileFamilyHonoursDropoutOptions(t *testing.T) {
	// EfficientNet-B0 in training mode draws dropout (0.2) and stochastic-depth (ramped to 0.2) masks, so two
	// passes differ while either is on; with both overridden to 0 the pass is deterministic.
	zero := 0.0
	for _, c := range []struct {
		dropout, dropPath *float64
		differ            bool
	}{
		{nil, nil, true},
		{&zero, nil, true},
		{nil, &zero, true},
		{&zero, &zero, false},
	} {
		opts := Options{Width: 0.25, NumClasses: 10, DropoutRate: c.dropout, DropPathRate: c.dropPath}
		ctx := context.New()
		if err := ctx.SetRNGStateFromSeed(1); err != nil {
			t.Fatal(err)
		}
		a := mobileFlat(t, mobileForward(t, ctx, "efficientnet_b0", opts, true))
		b := mobileFlat(t, mobileForward(t, ctx.Reuse(), "efficientnet_b0", opts, true))
		if d := mobileMaxRelDiff(a, b); (d > 0) != c.differ {
			t.Errorf("dropout override %v, drop path override %v: two training passes differ by %g", c.dropout != nil,
				c.dropPath != nil, d)
		}
	}
}
