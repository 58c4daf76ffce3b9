#!/usr/bin/env python3
"""PyTorch peer of `trainer bench` for the GPU check: the reference model itself, compiled.

What it measures: the wall time of one full training step of a seed ImageNet net, built by its reference
(torchvision's resnet34, resnet50, mobilenet_v2, efficientnet_b0, convnext_tiny, shufflenet_v2_x1_0,
densenet121, googlenet without aux heads, swin_t; timm's mobilenetv4_conv_medium; timm's
vit_tiny_patch16_224, or torchvision's VisionTransformer of the same shape without timm), each checked by its parameter count: the model in training mode with its default
dropout and stochastic depth, torch.compile'd (default mode), channels-last, bf16 autocast (float32 master
weights, BatchNorm in float32), softmax cross-entropy on the float32 logits, backward, SGD momentum 0.9 at
lr 0.01 without weight decay -- the step `trainer bench --net NET` and scripts/jax_peer.py time. Images
N(0,1) and labels uniform in [0,1000) are made once on the device. Two untimed steps (the first compiles),
then --steps steps, each ending with the loss read to the host (loss.item()), and the median.

    python3 scripts/torch_peer.py --net resnet50 --batch 256 --size 224 --steps 20 --precision bf16 [--json]

--no-compile runs eager and --device cpu on the CPU: how this script is checked where there is no GPU
(Debian's torch 1.13 has no torch.compile: it runs eager there anyway).
Exit status: 0 ok, 1 a parameter count that is not the reference's or a non-finite loss, 2 missing packages.
"""
import argparse
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    import torchvision
except ImportError as err:
    print(f"torch_peer: needs torch and torchvision: {err}", file=sys.stderr)
    sys.exit(2)
try:
    import timm
except ImportError:
    timm = None

# The references' parameter counts with 1000 classes at 224 px (the same numbers `trainer nets` lists).
REFERENCE_PARAMS = {"resnet34": 21_797_672, "resnet50": 25_557_032, "mobilenet_v2": 3_504_872,
                    "efficientnet_b0": 5_288_548, "mobilenetv4_conv_medium": 9_715_512,
                    "convnext_tiny": 28_589_128, "vit_tiny": 5_717_416, "shufflenet_v2_x1_0": 2_278_604,
                    "densenet121": 7_978_856, "googlenet": 6_624_904, "swin_t": 28_288_354}
NETS = sorted(REFERENCE_PARAMS)


def reference_params(net, size):
    """The reference count at size: ViT's position embeddings grow with the number of patches."""
    if net == "vit_tiny":
        return REFERENCE_PARAMS[net] + ((size // 16) ** 2 - 196) * 192
    return REFERENCE_PARAMS[net]


def log(msg):
    print(f"torch_peer: {msg}", file=sys.stderr, flush=True)


def build(net, size):
    """The reference model and where it comes from."""
    tv = torchvision.models
    if net in ("resnet34", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "shufflenet_v2_x1_0",
               "densenet121", "swin_t"):
        return getattr(tv, net)(num_classes=1000), f"torchvision {torchvision.__version__}"
    if net == "googlenet":  # as graphs registers it: no auxiliary heads, no transform_input
        return tv.googlenet(num_classes=1000, aux_logits=False, transform_input=False, init_weights=True), \
            f"torchvision {torchvision.__version__}"
    if net == "vit_tiny":
        if timm is not None:
            return timm.create_model("vit_tiny_patch16_224", img_size=size, num_classes=1000), f"timm {timm.__version__}"
        return tv.VisionTransformer(image_size=size, patch_size=16, num_layers=12, num_heads=3, hidden_dim=192,
                                    mlp_dim=768, num_classes=1000), f"torchvision {torchvision.__version__}"
    if timm is None:
        log(f"{net} needs timm, which is not importable")
        sys.exit(2)
    return timm.create_model(net, num_classes=1000), f"timm {timm.__version__}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", choices=NETS, default="resnet50")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=20, help="timed steps, after 2 untimed ones")
    ap.add_argument("--precision", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-compile", action="store_true", help="run eager (no torch.compile)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout (the text goes to stderr)")
    args = ap.parse_args()
    if args.batch < 1 or args.steps < 1 or args.size < 32:
        ap.error("--batch and --steps must be >= 1, --size >= 32")

    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
        device = torch.cuda.get_device_name(dev)
    else:
        device = "cpu"
        log("warning: running on the CPU, not a GPU")
    model, source = build(args.net, args.size)
    n_params = sum(p.numel() for p in model.parameters())
    want = reference_params(args.net, args.size)
    params_ok = n_params == want
    if not params_ok:
        log(f"ERROR: {n_params:,} parameters, the reference {args.net} has {want:,}")
    model = model.to(dev, memory_format=torch.channels_last).train()
    compiled = not args.no_compile and hasattr(torch, "compile")
    if not args.no_compile and not compiled:
        log(f"torch {torch.__version__} has no torch.compile: running eager")
    fwd = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    bf16 = args.precision == "bf16"

    gen = torch.Generator(device=dev).manual_seed(args.seed)
    images = torch.randn(args.batch, 3, args.size, args.size, device=dev, generator=gen)
    images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (args.batch,), device=dev, generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
            logits = fwd(images)
        loss = F.cross_entropy(logits.float(), labels)
        loss.backward()
        opt.step()
        return loss.item()  # waits for the step: a Go bench step ends when its loss is on the host too

    finite = True
    log(f"{args.net} ({source}, {args.precision}, {'compiled' if compiled else 'eager'}) on {device}")
    t0 = time.perf_counter()
    value = step()  # compiles
    compile_s = time.perf_counter() - t0
    finite = finite and value == value and abs(value) != float("inf")
    value = step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        value = step()
        times.append((time.perf_counter() - t0) * 1e3)
        finite = finite and value == value and abs(value) != float("inf")
    median_ms = statistics.median(times)
    images_per_s = args.batch / (median_ms / 1e3)

    out = sys.stderr if args.json else sys.stdout
    print(f"net {args.net} ({source})  batch {args.batch}  size {args.size}  precision {args.precision}  "
          f"{'compiled' if compiled else 'eager'}  torch {torch.__version__}  device {device}", file=out)
    print(f"params {n_params:,} ({'= the reference' if params_ok else f'the reference has {want:,}: MISMATCH'})",
          file=out)
    print(f"first step (compile) {compile_s:.1f} s  step median {median_ms:.2f} ms  min {min(times):.2f}  "
          f"max {max(times):.2f}  over {args.steps} steps  {images_per_s:,.1f} images/s  last loss {value:.4f}",
          file=out)
    if args.json:
        print(json.dumps({
            "peer": "torch", "net": args.net, "batch": args.batch, "size": args.size, "precision": args.precision,
            "images_per_s": round(images_per_s, 2), "median_ms": round(median_ms, 3),
            "steps_ms": [round(t, 3) for t in times], "compile_s": round(compile_s, 2), "compiled": compiled,
            "params": n_params, "torch": torch.__version__, "source": source, "device": device,
            "data": "device", "loss_finite": finite,
        }), flush=True)
    if not finite:
        log("ERROR: a loss was not finite")
    return 0 if params_ok and finite else 1


if __name__ == "__main__":
    sys.exit(main())
