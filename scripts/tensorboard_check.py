#!/usr/bin/env python3
"""Reads a run's TensorBoard event files with the real `tensorboard` package and checks them against
its metrics.jsonl: every train and eval number must be a scalar at its step (float32-equal), and the
resolved config must be the text summary "config". Run where tensorboard is installed (the GPU image has
it; these 2-core machines do not), on any run directory:

    go run ./cmd/trainer run configs/mnist_linear.yaml --set epochs=1
    python3 scripts/tensorboard_check.py runs/mnist_linear

Exit status: 0 ok, 1 a mismatch, 2 tensorboard missing.
"""
import json
import struct
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError:
    print("tensorboard is not installed", file=sys.stderr)
    sys.exit(2)

run = sys.argv[1]
acc = event_accumulator.EventAccumulator(run, size_guidance={event_accumulator.SCALARS: 0,
                                                            event_accumulator.TENSORS: 0})
acc.Reload()
tags = acc.Tags()
scalars = {(tag, ev.step): ev.value for tag in tags["scalars"] for ev in acc.Scalars(tag)}
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
bad = checked = 0
with open(f"{run}/metrics.jsonl") as f:
    for line in f:
        rec = json.loads(line)
        if rec.get("type") not in ("train", "eval"):
            continue
        for key, value in rec.items():
            if key in ("type", "step", "epoch", "time", "examples") or not isinstance(value, (int, float)):
                continue
            got = scalars.get((f"{rec['type']}/{key}", rec["step"]))
            checked += 1
            if got is None or f32(got) != f32(value):
                bad += 1
                print(f"{rec['type']}/{key} at step {rec['step']}: tensorboard {got}, metrics.jsonl {value}")
texts = [t for t in tags.get("tensors", []) if t.startswith("config")]
if not texts:
    bad += 1
    print(f"no config text among the tensor tags {tags.get('tensors')}")
else:
    text = acc.Tensors(texts[0])[0].tensor_proto.string_val[0].decode()
    with open(f"{run}/config.yaml") as f:
        if text.replace("\n    ", "\n").strip() != f.read().strip():
            bad += 1
            print("the config text differs from config.yaml")
print(f"{checked} scalars checked against metrics.jsonl, {len(tags['scalars'])} tags, {bad} problems")
sys.exit(1 if bad else 0)
