package graphs

import "math"

// The MobileNet rows of the mobile family (the builder is in efficientnet.go).

// mobileNetV2 is torchvision 0.14's mobilenet_v2: the paper's (t, c, n, s) rows, ReLU6, BN eps 1e-5 and
// momentum 0.1 (PyTorch's defaults; the TF recipe's 1e-3 is a BNEpsilon override), dropout 0.2, hidden
// width round(in·t) without rounding to 8, and last_channel 1280 scaled only above width 1.
var mobileNetV2 = &mobileDef{
	Layout: layoutTVMobileNetV2,
	Stem:   32,
	Stages: [][]blockRow{
		{{Type: blockIR, Expand: 1, Channels: 16, Repeats: 1, Stride: 1, Kernel: 3}},
		{{Type: blockIR, Expand: 6, Channels: 24, Repeats: 2, Stride: 2, Kernel: 3}},
		{{Type: blockIR, Expand: 6, Channels: 32, Repeats: 3, Stride: 2, Kernel: 3}},
		{{Type: blockIR, Expand: 6, Channels: 64, Repeats: 4, Stride: 2, Kernel: 3}},
		{{Type: blockIR, Expand: 6, Channels: 96, Repeats: 3, Stride: 1, Kernel: 3}},
		{{Type: blockIR, Expand: 6, Channels: 160, Repeats: 3, Stride: 2, Kernel: 3}},
		{{Type: blockIR, Expand: 6, Channels: 320, Repeats: 1, Stride: 1, Kernel: 3}},
	},
	Head:           1280,
	HeadWidth:      headScaledAboveOne,
	Act:            ReLU6,
	Hidden:         func(in int, e float64) int { return int(math.RoundToEven(float64(in) * e)) },
	Dropout:        0.2,
	ConvInit:       torchConvInit,
	ClassifierInit: func(int) Init { return InitNormal(0.01) },
}

// uir is a MobileNetV4 universal inverted residual row (timm's "uir_r{n}_a{start}_k{mid}_s{s}_e{e}_c{c}").
func uir(repeats, start, mid, stride int, expand float64, channels int) blockRow {
	return blockRow{Type: blockUIR, Repeats: repeats, Start: start, Kernel: mid, Stride: stride, Expand: expand, Channels: channels}
}

// mobileNetV4ConvMedium is timm's mobilenetv4_conv_medium (_gen_mobilenet_v4): a fused-IB stage, UIR
// stages (ExtraDW: start and middle depthwise; ConvNeXt-like: start only; FFN: neither; no SE, no layer
// scale), a 1x1 conv to 960, then pooling before a 1x1 head conv to 1280 with BN and ReLU. BN eps 1e-5,
// momentum 0.1; timm's model defaults have no dropout and no stochastic depth (recipes set them).
var mobileNetV4ConvMedium = &mobileDef{
	Layout:          layoutTimm,
	Stem:            32,
	FixStemBelowOne: true,
	Stages: [][]blockRow{
		{{Type: blockER, Repeats: 1, Kernel: 3, Stride: 2, Expand: 4, Channels: 48}},
		{uir(1, 3, 5, 2, 4, 80), uir(1, 3, 3, 1, 2, 80)},
		{
			uir(1, 3, 5, 2, 6, 160), uir(2, 3, 3, 1, 4, 160), uir(1, 3, 5, 1, 4, 160), uir(1, 3, 3, 1, 4, 160),
			uir(1, 3, 0, 1, 4, 160), uir(1, 0, 0, 1, 2, 160), uir(1, 3, 0, 1, 4, 160),
		},
		{
			uir(1, 5, 5, 2, 6, 256), uir(1, 5, 5, 1, 4, 256), uir(2, 3, 5, 1, 4, 256), uir(1, 0, 0, 1, 4, 256),
			uir(1, 3, 0, 1, 4, 256), uir(1, 3, 5, 1, 2, 256), uir(1, 5, 5, 1, 4, 256), uir(2, 0, 0, 1, 4, 256),
			uir(1, 5, 0, 1, 2, 256),
		},
		{{Type: blockCN, Repeats: 1, Kernel: 1, Stride: 1, Channels: 960}},
	},
	Head:           1280,
	HeadWidth:      headFixed,
	PoolBeforeHead: true,
	Act:            ReLU,
	Hidden:         func(in int, e float64) int { return divisibleBy8(float64(in) * e) },
	ConvInit:       timmConvInit,
	ClassifierInit: uniformOverUnits,
}

func init() {
	mobileNetV2.register("mobilenet_v2",
		"MobileNetV2 (torchvision): inverted residuals, ReLU6, dropout 0.2; 3.5M params",
		"torchvision 0.14 mobilenet_v2")
	mobileNetV4ConvMedium.register("mobilenetv4_conv_medium",
		"MobileNetV4-Conv-M (timm): fused IB + universal inverted residuals, ReLU, pooled 1280 head; 9.7M params; "+
			"trained at 224, timm evaluates at 256",
		"timm mobilenetv4_conv_medium")
}
