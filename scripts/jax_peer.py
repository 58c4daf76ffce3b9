#!/usr/bin/env python3
"""JAX/Flax peer of `trainer bench` for the GPU check.

What it measures: the wall time of one full training step of one of the seed ImageNet nets, in the layout of
the reference our Go net follows (torchvision's resnet34, resnet50, mobilenet_v2, efficientnet_b0 and
convnext_tiny; timm's mobilenetv4_conv_medium; ViT-Tiny/16 as timm's vit_tiny_patch16_224 and torchvision's
VisionTransformer agree on it), each checked by its parameter count: forward in training mode (BatchNorm on
batch statistics, running statistics updated; stochastic depth and dropout active where the reference has
them by default: EfficientNet-B0 0.2/0.2, MobileNetV2 dropout 0.2, ConvNeXt-T drop path 0.1), softmax
cross-entropy on integer
labels in float32, backward, SGD momentum 0.9, lr 0.01, no weight decay, one jitted function with the state
donated. Images N(0,1) float32 NHWC and labels uniform in [0,1000) are made once on the device. It runs two
untimed steps after compiling, then times --steps steps, each ending with loss.block_until_ready() and the
loss read to the host (a Go bench step ends when its loss is on the host too), and reports the median.

    python3 scripts/jax_peer.py --net resnet50 --batch 256 --size 224 --steps 20 --precision bf16 [--json]

bf16 is mixed precision as our Go nets do it: float32 master parameters and optimizer state; convolutions,
matmuls and activations in bfloat16; BatchNorm statistics in float32; logits cast to float32 for the loss.

The Go side of the comparison:

    trainer bench --net resnet50 --batch 256 --precision bf16 --backend <plugin> [--json]

Compare the two only at the same batch, size, precision and data placement: this script keeps the batch on
the device (--data device, the default, as `trainer bench --data device`); --data host copies it from host
memory inside every timed step instead (as `trainer bench --data host`).
Needs jax, flax (linen), optax and numpy, and nothing else; exits 2 without them.
Exit status: 0 ok, 1 a parameter count that is not the reference's or a non-finite loss, 2 missing packages.
"""
import argparse
import json
import statistics
import sys
import time

try:
    import numpy as np
    import jax
    import jax.numpy as jnp
    import flax
    import flax.linen as nn
    import optax
except ImportError as err:  # A pure jax.lax fallback is not worth its size here: say what is missing.
    print(f"jax_peer: needs numpy, jax, flax (flax.linen) and optax: {err}", file=sys.stderr)
    sys.exit(2)

# The references' parameter counts with 1000 classes (sum of parameters(), BatchNorm buffers excluded):
# torchvision's, timm's for mobilenetv4_conv_medium; the same numbers `trainer nets` lists for ours.
REFERENCE_PARAMS = {"resnet34": 21_797_672, "resnet50": 25_557_032, "mobilenet_v2": 3_504_872,
                    "efficientnet_b0": 5_288_548, "mobilenetv4_conv_medium": 9_715_512,
                    "convnext_tiny": 28_589_128, "vit_tiny": 5_717_416}
F32 = jnp.float32


def act(name, x):
    if name == "relu":
        return jax.nn.relu(x)
    if name == "relu6":
        return jax.nn.relu6(x)
    if name == "silu":
        return jax.nn.silu(x)
    return x


def drop_path(module, x, rate, train):
    """torchvision's StochasticDepth(p, "row"): one keep/drop draw per example, survivors scaled by 1/(1-p)."""
    if not train or rate <= 0:
        return x
    keep = 1.0 - rate
    mask = jax.random.bernoulli(module.make_rng("dropout"), keep, (x.shape[0],) + (1,) * (x.ndim - 1))
    return x * (mask.astype(F32) / keep).astype(x.dtype)


def make_divisible(v, divisor=8):
    """timm's and torchvision's _make_divisible: the nearest multiple of divisor, never 10% below v."""
    n = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return n + divisor if n < 0.9 * v else n


class ConvBN(nn.Module):
    """Conv (no bias, symmetric padding (k-1)//2 as PyTorch) -> BatchNorm -> activation."""
    features: int
    kernel: int
    stride: int = 1
    groups: int = 1
    activation: str = ""
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        p = (self.kernel - 1) // 2
        x = nn.Conv(self.features, (self.kernel, self.kernel), strides=(self.stride, self.stride),
                    padding=((p, p), (p, p)), feature_group_count=self.groups, use_bias=False,
                    dtype=self.dtype, param_dtype=F32)(x)
        # PyTorch's BatchNorm2d defaults: eps 1e-5, momentum 0.1 (flax's momentum is the decay: 0.9).
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5,
                         dtype=self.dtype, param_dtype=F32)(x)
        return act(self.activation, x)


class Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck: the stride is on the 3x3 conv."""
    width: int
    stride: int
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        out_ch = self.width * 4
        y = ConvBN(self.width, 1, activation="relu", dtype=self.dtype)(x, train)
        y = ConvBN(self.width, 3, self.stride, activation="relu", dtype=self.dtype)(y, train)
        y = ConvBN(out_ch, 1, dtype=self.dtype)(y, train)
        if self.stride != 1 or x.shape[-1] != out_ch:
            x = ConvBN(out_ch, 1, self.stride, dtype=self.dtype)(x, train)
        return jax.nn.relu(y + x)


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: two 3x3 convs, the stride on the first."""
    width: int
    stride: int
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        y = ConvBN(self.width, 3, self.stride, activation="relu", dtype=self.dtype)(x, train)
        y = ConvBN(self.width, 3, dtype=self.dtype)(y, train)
        if self.stride != 1 or x.shape[-1] != self.width:
            x = ConvBN(self.width, 1, self.stride, dtype=self.dtype)(x, train)
        return jax.nn.relu(y + x)


class ResNet(nn.Module):
    """torchvision's resnet34 (basic blocks) and resnet50 (bottlenecks, v1.5), stages [3, 4, 6, 3]."""
    block: object = Bottleneck
    num_classes: int = 1000
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        x = ConvBN(64, 7, 2, activation="relu", dtype=self.dtype)(x, train)
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for i, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
            for j in range(blocks):
                stride = 2 if i > 0 and j == 0 else 1
                x = self.block(width, stride, dtype=self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=F32)(x)


class InvertedResidual(nn.Module):
    """torchvision's MobileNetV2 block: [1x1 expand] -> 3x3 depthwise -> 1x1 project, ReLU6."""
    cin: int
    cout: int
    expand: int
    stride: int
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        hidden = int(round(self.cin * self.expand))
        y = x
        if self.expand != 1:
            y = ConvBN(hidden, 1, activation="relu6", dtype=self.dtype)(y, train)
        y = ConvBN(hidden, 3, self.stride, groups=hidden, activation="relu6", dtype=self.dtype)(y, train)
        y = ConvBN(self.cout, 1, dtype=self.dtype)(y, train)
        return x + y if self.stride == 1 and self.cin == self.cout else y


# MobileNetV2's (t, c, n, s) rows.
V2_ROWS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    num_classes: int = 1000
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        x = ConvBN(32, 3, 2, activation="relu6", dtype=self.dtype)(x, train)
        cin = 32
        for t, c, n, s in V2_ROWS:
            for j in range(n):
                x = InvertedResidual(cin, c, t, s if j == 0 else 1, dtype=self.dtype)(x, train)
                cin = c
        x = ConvBN(1280, 1, activation="relu6", dtype=self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        x = nn.Dropout(rate=0.2, deterministic=not train)(x)
        return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=F32)(x)


class EdgeResidual(nn.Module):
    """timm's EdgeResidual (MobileNetV4's fused IB): kxk conv to the expanded width, then 1x1 project."""
    cin: int
    cout: int
    kernel: int
    stride: int
    expand: float
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        y = ConvBN(make_divisible(self.cin * self.expand), self.kernel, self.stride, activation="relu",
                   dtype=self.dtype)(x, train)
        y = ConvBN(self.cout, 1, dtype=self.dtype)(y, train)
        return x + y if self.stride == 1 and self.cin == self.cout else y


class UniversalInvertedResidual(nn.Module):
    """timm's UniversalInvertedResidual without layer scale: [start dw] -> 1x1 expand -> [middle dw] ->
    1x1 project; the stride on the middle depthwise conv, or on the start one when there is no middle."""
    cin: int
    cout: int
    start: int
    mid: int
    stride: int
    expand: float
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        y = x
        if self.start:
            y = ConvBN(self.cin, self.start, 1 if self.mid else self.stride, groups=self.cin,
                       dtype=self.dtype)(y, train)
        hidden = make_divisible(self.cin * self.expand)
        y = ConvBN(hidden, 1, activation="relu", dtype=self.dtype)(y, train)
        if self.mid:
            y = ConvBN(hidden, self.mid, self.stride, groups=hidden, activation="relu", dtype=self.dtype)(y, train)
        y = ConvBN(self.cout, 1, dtype=self.dtype)(y, train)
        return x + y if self.stride == 1 and self.cin == self.cout else y


# timm's mobilenetv4_conv_medium UIR stages: (repeats, start kernel, middle kernel, stride, expand, channels).
MNV4_M_UIR = (
    ((1, 3, 5, 2, 4, 80), (1, 3, 3, 1, 2, 80)),
    ((1, 3, 5, 2, 6, 160), (2, 3, 3, 1, 4, 160), (1, 3, 5, 1, 4, 160), (1, 3, 3, 1, 4, 160),
     (1, 3, 0, 1, 4, 160), (1, 0, 0, 1, 2, 160), (1, 3, 0, 1, 4, 160)),
    ((1, 5, 5, 2, 6, 256), (1, 5, 5, 1, 4, 256), (2, 3, 5, 1, 4, 256), (1, 0, 0, 1, 4, 256),
     (1, 3, 0, 1, 4, 256), (1, 3, 5, 1, 2, 256), (1, 5, 5, 1, 4, 256), (2, 0, 0, 1, 4, 256),
     (1, 5, 0, 1, 2, 256)),
)


class MobileNetV4ConvMedium(nn.Module):
    """timm's mobilenetv4_conv_medium: stem, a fused-IB stage, three UIR stages, a 1x1 conv to 960, global
    pooling, then a 1x1 conv to 1280 with BN and ReLU before the classifier; no dropout or drop path."""
    num_classes: int = 1000
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        x = ConvBN(32, 3, 2, activation="relu", dtype=self.dtype)(x, train)
        x = EdgeResidual(32, 48, 3, 2, 4.0, dtype=self.dtype)(x, train)
        cin = 48
        for stage in MNV4_M_UIR:
            for repeats, start, mid, stride, expand, c in stage:
                for j in range(repeats):
                    x = UniversalInvertedResidual(cin, c, start, mid, stride if j == 0 else 1, float(expand),
                                                  dtype=self.dtype)(x, train)
                    cin = c
        x = ConvBN(960, 1, activation="relu", dtype=self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2), keepdims=True)
        x = ConvBN(1280, 1, activation="relu", dtype=self.dtype)(x, train)
        return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=F32)(x.reshape(x.shape[0], -1))


class ConvNeXtBlock(nn.Module):
    """torchvision's CNBlock: x + drop_path(layer_scale * MLP(LN(dwconv7x7(x))))."""
    dim: int
    sd_prob: float
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        y = nn.Conv(self.dim, (7, 7), padding=((3, 3), (3, 3)), feature_group_count=self.dim, dtype=self.dtype,
                    param_dtype=F32)(x)
        y = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, param_dtype=F32)(y)
        y = nn.Dense(4 * self.dim, dtype=self.dtype, param_dtype=F32)(y)
        y = jax.nn.gelu(y, approximate=False)
        y = nn.Dense(self.dim, dtype=self.dtype, param_dtype=F32)(y)
        scale = self.param("layer_scale", lambda k, s: jnp.full(s, 1e-6, F32), (self.dim,))
        y = y * scale.astype(y.dtype)
        return x + drop_path(self, y, self.sd_prob, train)


class ConvNeXtTiny(nn.Module):
    """torchvision's convnext_tiny: 4x4/4 stem + LN, stages (3, 3, 9, 3) of (96, 192, 384, 768), LN + 2x2/2
    downsamples, stochastic depth rising linearly to 0.1, LN head."""
    num_classes: int = 1000
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        depths, dims = (3, 3, 9, 3), (96, 192, 384, 768)
        x = nn.Conv(dims[0], (4, 4), strides=(4, 4), padding="VALID", dtype=self.dtype, param_dtype=F32)(x)
        x = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, param_dtype=F32)(x)
        total, block = sum(depths), 0
        for i, (depth, dim) in enumerate(zip(depths, dims)):
            if i > 0:
                x = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, param_dtype=F32)(x)
                x = nn.Conv(dim, (2, 2), strides=(2, 2), padding="VALID", dtype=self.dtype, param_dtype=F32)(x)
            for _ in range(depth):
                x = ConvNeXtBlock(dim, 0.1 * block / (total - 1), dtype=self.dtype)(x, train)
                block += 1
        x = jnp.mean(x, axis=(1, 2))
        x = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, param_dtype=F32)(x)
        return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=F32)(x)


class ViTBlock(nn.Module):
    """A pre-norm encoder block: x + MHA(LN(x)), then x + MLP(LN(x)); LayerNorm eps 1e-6, exact GELU."""
    dim: int
    heads: int
    mlp: int
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        y = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, param_dtype=F32)(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.heads, qkv_features=self.dim, dtype=self.dtype,
                                            param_dtype=F32, deterministic=True)(y, y)
        x = x + y
        y = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, param_dtype=F32)(x)
        y = nn.Dense(self.mlp, dtype=self.dtype, param_dtype=F32)(y)
        y = jax.nn.gelu(y, approximate=False)
        return x + nn.Dense(self.dim, dtype=self.dtype, param_dtype=F32)(y)


class ViTTiny(nn.Module):
    """ViT-Tiny/16: 16x16 patches, class token, learned position embeddings, 12 blocks of width 192 with 3
    heads and MLP 768, final LN, head on the class token."""
    num_classes: int = 1000
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        dim = 192
        x = nn.Conv(dim, (16, 16), strides=(16, 16), padding="VALID", dtype=self.dtype, param_dtype=F32)(x)
        n, h, w, _ = x.shape
        x = x.reshape(n, h * w, dim)
        cls = self.param("cls_token", nn.initializers.zeros, (1, 1, dim), F32)
        x = jnp.concatenate([jnp.broadcast_to(cls.astype(x.dtype), (n, 1, dim)), x], axis=1)
        pos = self.param("pos_embedding", nn.initializers.normal(0.02), (1, h * w + 1, dim), F32)
        x = x + pos.astype(x.dtype)
        for _ in range(12):
            x = ViTBlock(dim, 3, 768, dtype=self.dtype)(x, train)
        x = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, param_dtype=F32)(x)
        return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=F32)(x[:, 0])


class MBConv(nn.Module):
    """torchvision's MBConv: [1x1 expand] -> kxk depthwise -> SE -> 1x1 project, residual with stochastic depth."""
    cin: int
    cout: int
    expand: int
    kernel: int
    stride: int
    sd_prob: float
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        hidden = self.cin * self.expand  # _make_divisible(cin*expand, 8) is the identity for every B0 row.
        y = x
        if hidden != self.cin:
            y = ConvBN(hidden, 1, activation="silu", dtype=self.dtype)(y, train)
        y = ConvBN(hidden, self.kernel, self.stride, groups=hidden, activation="silu", dtype=self.dtype)(y, train)
        # Squeeze-and-excitation on a quarter of the block's input channels (1x1 convs with bias = Dense).
        s = jnp.mean(y, axis=(1, 2), keepdims=True)
        s = jax.nn.silu(nn.Dense(max(1, self.cin // 4), dtype=self.dtype, param_dtype=F32)(s))
        s = jax.nn.sigmoid(nn.Dense(hidden, dtype=self.dtype, param_dtype=F32)(s))
        y = ConvBN(self.cout, 1, dtype=self.dtype)(y * s, train)
        if self.stride == 1 and self.cin == self.cout:
            if train and self.sd_prob > 0:  # torchvision's StochasticDepth(p, "row"): one draw per example.
                keep = 1.0 - self.sd_prob
                mask = jax.random.bernoulli(self.make_rng("dropout"), keep, (y.shape[0], 1, 1, 1))
                y = y * (mask.astype(F32) / keep).astype(y.dtype)
            y = y + x
        return y


# torchvision's efficientnet_b0 rows: (expand, kernel, stride, in, out, repeats).
B0_ROWS = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
           (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))


class EfficientNetB0(nn.Module):
    num_classes: int = 1000
    dtype: object = F32

    @nn.compact
    def __call__(self, x, train):
        # torchvision gives B0 PyTorch's default BatchNorm2d (eps 1e-5, momentum 0.1); only B5-B7 use eps 1e-3.
        x = ConvBN(32, 3, 2, activation="silu", dtype=self.dtype)(x, train)
        total = sum(row[5] for row in B0_ROWS)
        block = 0
        for expand, kernel, stride, cin, cout, repeats in B0_ROWS:
            for j in range(repeats):
                x = MBConv(cin if j == 0 else cout, cout, expand, kernel, stride if j == 0 else 1,
                           0.2 * block / total, dtype=self.dtype)(x, train)
                block += 1
        x = ConvBN(4 * B0_ROWS[-1][4], 1, activation="silu", dtype=self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        x = nn.Dropout(rate=0.2, deterministic=not train)(x)
        return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=F32)(x)


NETS = {
    "resnet34": lambda **kw: ResNet(block=BasicBlock, **kw),
    "resnet50": lambda **kw: ResNet(block=Bottleneck, **kw),
    "mobilenet_v2": MobileNetV2,
    "efficientnet_b0": EfficientNetB0,
    "mobilenetv4_conv_medium": MobileNetV4ConvMedium,
    "convnext_tiny": ConvNeXtTiny,
    "vit_tiny": ViTTiny,
}


def new_key(seed):
    # jax.random.key (typed keys) where present, else the legacy uint32 PRNGKey.
    make = getattr(jax.random, "key", None) or jax.random.PRNGKey
    return make(seed)


def log(msg):
    print(f"jax_peer: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", choices=sorted(NETS), default="resnet50")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=20, help="timed steps, after 2 untimed ones")
    ap.add_argument("--precision", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--data", choices=("device", "host"), default="device",
                    help="device: the batch made once on the device; host: copied from host memory every step")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout (the text goes to stderr)")
    args = ap.parse_args()
    if args.batch < 1 or args.steps < 1 or args.size < 32:
        ap.error("--batch and --steps must be >= 1, --size >= 32")

    num_classes = 1000
    dtype = jnp.bfloat16 if args.precision == "bf16" else F32
    model = NETS[args.net](num_classes=num_classes, dtype=dtype)
    dev = jax.devices()[0]
    device = getattr(dev, "device_kind", str(dev))
    if dev.platform != "gpu":
        log(f"warning: the first device is {dev.platform} ({device}), not a GPU")

    key = new_key(args.seed)
    k_init, k_img, k_lab, k_state = jax.random.split(key, 4)
    log(f"initialising {args.net} ({args.precision}) on {device}")
    init = jax.jit(lambda k, x: model.init({"params": k}, x, train=False))
    variables = init(k_init, jnp.zeros((1, args.size, args.size, 3), F32))
    params, batch_stats = variables["params"], variables.get("batch_stats", {})
    n_params = int(sum(int(np.prod(p.shape)) for p in jax.tree_util.tree_leaves(params)))
    want = REFERENCE_PARAMS[args.net]
    params_ok = n_params == want
    if not params_ok:
        log(f"ERROR: {n_params:,} parameters, the reference {args.net} has {want:,}: not the reference layout")

    tx = optax.sgd(learning_rate=0.01, momentum=0.9)
    state = (params, batch_stats, tx.init(params), k_state)

    def train_step(state, images, labels):
        params, batch_stats, opt_state, key = state
        key, drop_key = jax.random.split(key)

        def loss_fn(p):
            logits, updates = model.apply({"params": p, "batch_stats": batch_stats}, images, train=True,
                                          mutable=["batch_stats"], rngs={"dropout": drop_key})
            logp = jax.nn.log_softmax(logits.astype(F32), axis=-1)
            nll = -jnp.take_along_axis(logp, labels[:, None], axis=-1)[:, 0]
            return jnp.mean(nll), updates.get("batch_stats", batch_stats)

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, new_stats, opt_state, key), loss

    shape = (args.batch, args.size, args.size, 3)
    if args.data == "host":
        rng = np.random.default_rng(args.seed)
        host_images = rng.standard_normal(shape, dtype=np.float32)
        host_labels = rng.integers(0, num_classes, size=(args.batch,), dtype=np.int32)
        images, labels = jax.device_put(host_images), jax.device_put(host_labels)
    else:
        images = jax.random.normal(k_img, shape, F32)
        labels = jax.random.randint(k_lab, (args.batch,), 0, num_classes, dtype=jnp.int32)
    images.block_until_ready()

    jitted = jax.jit(train_step, donate_argnums=0)
    log("compiling the train step")
    t0 = time.perf_counter()
    step = jitted.lower(state, images, labels).compile()
    compile_s = time.perf_counter() - t0
    log(f"compiled in {compile_s:.1f} s")

    def one_step(state):
        x, y = images, labels
        if args.data == "host":
            x, y = jax.device_put(host_images), jax.device_put(host_labels)
        return step(state, x, y)

    finite = True
    for i in range(2):  # Untimed: first execution and warm-up.
        try:
            state, loss = one_step(state)
        except (TypeError, ValueError) as err:  # The AOT executable refused its own output state (checked
            # before it runs, so nothing donated is lost): fall back to jax.jit.
            log(f"warning: compiled step refused its own state ({err}); using jax.jit (compiles again, untimed)")
            step = jitted
            state, loss = one_step(state)
        loss.block_until_ready()
        finite = finite and bool(np.isfinite(float(loss)))
    times = []
    for i in range(args.steps):
        t0 = time.perf_counter()
        state, loss = one_step(state)
        loss.block_until_ready()
        value = float(loss)
        times.append(time.perf_counter() - t0)
        finite = finite and bool(np.isfinite(value))
    steps_ms = [t * 1e3 for t in times]
    median_ms = statistics.median(steps_ms)
    images_per_s = args.batch / (median_ms / 1e3)

    out = sys.stderr if args.json else sys.stdout
    print(f"net {args.net}  batch {args.batch}  size {args.size}  precision {args.precision}  "
          f"data {args.data}", file=out)
    print(f"jax {jax.__version__}  flax {getattr(flax, '__version__', '?')}  device {device} ({dev.platform})",
          file=out)
    print(f"params {n_params:,} ({'= the reference' if params_ok else f'the reference has {want:,}: MISMATCH'})",
          file=out)
    print(f"compile {compile_s:.1f} s  step median {median_ms:.2f} ms  min {min(steps_ms):.2f}  "
          f"max {max(steps_ms):.2f}  over {args.steps} steps  {images_per_s:,.1f} images/s  "
          f"last loss {float(loss):.4f}", file=out)
    if args.json:
        print(json.dumps({
            "peer": "jax", "net": args.net, "batch": args.batch, "size": args.size, "precision": args.precision,
            "images_per_s": round(images_per_s, 2), "median_ms": round(median_ms, 3),
            "steps_ms": [round(t, 3) for t in steps_ms], "compile_s": round(compile_s, 2),
            "params": n_params, "jax": jax.__version__, "device": device,
            "data": args.data, "loss_finite": finite,
        }), flush=True)
    if not finite:
        log("ERROR: a loss was not finite")
    return 0 if params_ok and finite else 1


if __name__ == "__main__":
    sys.exit(main())
