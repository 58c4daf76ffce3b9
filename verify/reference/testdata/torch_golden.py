"""Golden values for reference_test.go, from PyTorch (float64, CPU).

Run: /usr/bin/python3 verify/reference/testdata/torch_golden.py
Inputs are deterministic functions of the flat NHWC / HWIO index, as in the Go test (fill); each
output is reduced to checksum(y) = sum_i y_i * cos(0.11 i + 0.2) over its NHWC-flattened values, so
a layout or padding mistake changes the number.
"""
import math
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def fill(shape, a, b):
    n = math.prod(shape)
    return torch.tensor([math.sin(a * i + b) for i in range(n)]).reshape(shape)


def checksum(y):
    flat = y.reshape(-1)
    w = torch.tensor([math.cos(0.11 * i + 0.2) for i in range(flat.numel())])
    return float((flat * w).sum())


def nchw(x):
    return x.permute(0, 3, 1, 2)


def nhwc(x):
    return x.permute(0, 2, 3, 1).contiguous()


def oihw(w):
    return w.permute(3, 2, 0, 1)


def conv(x, w, b, stride, dilation, pads, groups):
    # pads = ((top, bottom), (left, right)); F.pad takes (left, right, top, bottom).
    xp = F.pad(nchw(x), (pads[1][0], pads[1][1], pads[0][0], pads[0][1]))
    return nhwc(F.conv2d(xp, oihw(w), b, stride=stride, dilation=dilation, groups=groups))


out = {}
x = fill((2, 7, 6, 4), 0.37, 0.1)
w = fill((3, 3, 2, 6), 0.23, 0.5)
b = fill((6,), 0.9, 0.0)
out["conv_grouped_s2_pads"] = checksum(conv(x, w, b, 2, 1, ((0, 1), (1, 0)), 2))
wd = fill((3, 3, 1, 4), 0.41, 0.2)
out["depthwise_s2_d2"] = checksum(conv(x, wd, None, 2, 2, ((2, 2), (2, 2)), 4))
wp = fill((2, 2, 4, 5), 0.13, 0.7)
xp = fill((1, 4, 6, 4), 0.29, 0.3)
out["patchify2"] = checksum(conv(xp, wp, None, 2, 1, ((0, 0), (0, 0)), 1))

gamma = 1 + 0.5 * fill((4,), 1.3, 0.2)
beta = fill((4,), 0.7, 0.9)
out["batchnorm_train"] = checksum(nhwc(F.batch_norm(nchw(x), None, None, gamma, beta, training=True, eps=1e-5)))
rm, rv = fill((4,), 0.5, 0.1), 1.5 + fill((4,), 0.8, 0.4)
out["batchnorm_eval"] = checksum(nhwc(F.batch_norm(nchw(x), rm, rv, gamma, beta, training=False, eps=1e-3)))
out["layernorm"] = checksum(F.layer_norm(x, (4,), gamma, beta, eps=1e-6))

a = 3 * fill((5, 7), 0.61, 0.4)
out["gelu_erf"] = checksum(F.gelu(a))
out["gelu_tanh"] = checksum(F.gelu(a, approximate="tanh"))
out["silu"] = checksum(F.silu(a))
out["sigmoid"] = checksum(torch.sigmoid(a))
out["relu6"] = checksum(F.relu6(3 * a))

labels = torch.tensor([3, 0, 6, 2, 5])
out["cross_entropy"] = float(F.cross_entropy(a, labels))
out["cross_entropy_smooth"] = float(F.cross_entropy(a, labels, label_smoothing=0.1))
t = (fill((5, 7), 0.33, 0.8) + 1) / 2
out["bce_with_logits"] = float(F.binary_cross_entropy_with_logits(a, t))

xm = torch.floor(3 * (fill((2, 6, 6, 3), 0.77, 0.3) + 1) / 2)  # values 0, 1, 2: many ties
xm.requires_grad_(True)
ym = nhwc(F.max_pool2d(nchw(xm), 3, 2, 1))
out["maxpool3_s2_p1"] = checksum(ym)
g = torch.tensor([math.cos(0.11 * i + 0.2) for i in range(ym.numel())]).reshape(ym.shape)
(ym * g).sum().backward()
out["maxpool3_s2_p1_grad"] = checksum(xm.grad)
out["avgpool2_s2"] = checksum(nhwc(F.avg_pool2d(nchw(x[:, :6]), 2, 2)))

q, k, v = fill((2, 2, 3, 4), 0.3, 0.1), fill((2, 2, 5, 4), 0.47, 0.6), fill((2, 2, 5, 4), 0.19, 0.2)
att = torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1) @ v
out["sdpa"] = checksum(att)

# timm's Attention.forward with the Linear weights stored [in, out] as the Go side keeps them.
xt = fill((2, 5, 6), 0.21, 0.9)
wqkv, bqkv = 0.3 * fill((6, 18), 0.17, 0.4), fill((18,), 0.5, 0.3)
wproj, bproj = 0.3 * fill((6, 6), 0.27, 0.1), fill((6,), 0.6, 0.2)
B, T, D, H = 2, 5, 6, 2
qkv = (xt @ wqkv + bqkv).reshape(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
o = torch.softmax(qkv[0] @ qkv[1].transpose(-2, -1) * (D // H) ** -0.5, -1) @ qkv[2]
out["mha"] = checksum(o.transpose(1, 2).reshape(B, T, D) @ wproj + bproj)

for name, value in out.items():
    print(f'\t"{name}": {value!r},')
