"""Triton kernels that kerntune.triton is tested and measured on (python/tests/test_triton.py,
bench/triton_autotune.py), each with the configs both autotuners get:

  matmul      C = A @ B in fp16 with fp32 accumulation, tiles of BLOCK_M x BLOCK_N walking K by
              BLOCK_K, blocks ordered in groups of GROUP_M rows for L2 reuse: the shape of
              Triton's matrix-multiplication tutorial;
  layer_norm  y = (x - mean) / sqrt(var + eps) * w + b over each row, one program per row in
              blocks of BLOCK_N columns: the shape of Triton's layer-norm tutorial (forward);
  add_one     x += 1 in place: the reproducer of Triton issue #1563;
  count       out[0] += the number of elements (atomic adds): an accumulating output, for
              reset_to_zero.

make(autotune) builds the autotuned kernels with the decorator given (triton.autotune or
kerntune.triton.autotune), so both get the same kernels and configs.
"""

import triton
import triton.language as tl


def matmul_configs():
    out = []
    for bm, bn, bk, stages, warps in [
        (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
        (128, 128, 64, 3, 8), (256, 128, 64, 3, 8), (64, 64, 64, 4, 4), (128, 256, 32, 3, 8),
    ]:
        out.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=stages, num_warps=warps))
    return out


def layer_norm_configs():
    return [triton.Config({"BLOCK_N": b}, num_warps=w) for b in (256, 512, 1024, 2048) for w in (1, 2, 4, 8)]


def add_one_configs():
    return [triton.Config({"BLOCK": b}, num_warps=w) for b in (128, 256, 512, 1024) for w in (2, 4)]


def count_configs():
    return [triton.Config({"BLOCK": b}) for b in (64, 256, 1024)]


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    pm = first_m + (pid % per_group) % rows_in_group
    pn = (pid % per_group) // rows_in_group
    rm = (pm * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pn * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        ta = tl.load(a, mask=rk[None, :] < left, other=0.0)
        tb = tl.load(b, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(ta, tb, acc)
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    cm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    c = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c, acc.to(tl.float16), mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def _layer_norm(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    total = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        total += tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(total, axis=0) / N
    squares = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        v = tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        d = tl.where(cols < N, v - mean, 0.0)
        squares += d * d
    rstd = 1 / tl.sqrt(tl.sum(squares, axis=0) / N + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        m = cols < N
        v = tl.load(x_ptr + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m)
        b = tl.load(b_ptr + cols, mask=m)
        tl.store(y_ptr + cols, ((v - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.jit
def _count(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum((offs < n).to(tl.int32), axis=0))


def make(autotune, **extra):
    """The four autotuned kernels, built with autotune (triton.autotune or kerntune.triton.autotune)."""
    return {
        "matmul": autotune(configs=matmul_configs(), key=["M", "N", "K"], **extra)(_matmul),
        "layer_norm": autotune(configs=layer_norm_configs(), key=["N"], **extra)(_layer_norm),
        "add_one": autotune(configs=add_one_configs(), key=["n"], **extra)(_add_one),
        "count": autotune(configs=count_configs(), key=["n"], reset_to_zero=["out_ptr"], **extra)(_count),
    }


def matmul(kernel, a, b, c):
    M, K = a.shape
    _, N = b.shape
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def layer_norm(kernel, x, w, b, y, eps=1e-5):
    rows, N = x.shape
    kernel[(rows,)](x, y, w, b, x.stride(0), N, eps)


def add_one(kernel, x):
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)


def count(kernel, out, n):
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](out, n)
