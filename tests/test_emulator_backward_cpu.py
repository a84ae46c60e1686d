"""CPU checks of the backward emulator's building blocks, with no GPU data: the sum reductions on
exactly computable values and against a lane-by-lane model of their trees, the kernels on rows whose
results are exact, torch's .sum(0) configuration against torch's recorded launches, the entry points'
contracts and torch's error messages, and the traces."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from reimpl.emulator import api, trace
from reimpl.emulator import layer_norm_backward as B
from reimpl.emulator.block_reduce import BlockReduceSum, WarpReduceSum
from reimpl.emulator.fp import BY_NAME, float_to_bf16_bits
from reimpl.mirror.input_checks import TorchCheckError

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(11)
F32 = np.float32


# ---- WarpReduceSum / BlockReduceSum ----------------------------------------------------------------
def _tree_lane0(v):
    """Lane 0 after shuffle-down rounds 16, 8, 4, 2, 1, written out lane by lane."""
    v = list(v)
    for off in (16, 8, 4, 2, 1):
        v = [v[i] + (v[i + off] if i + off < 32 else v[i]) for i in range(32)]
    return v[0]


def test_warp_reduce_sum_is_the_shuffle_down_tree():
    for _ in range(20):
        v = (RNG.standard_normal(64) * np.exp2(RNG.integers(-20, 20, 64))).astype(F32)
        got = WarpReduceSum(v)
        assert got[0] == _tree_lane0(v[:32]) and got[32] == _tree_lane0(v[32:])


def test_warp_reduce_sum_exact_on_integers():
    v = RNG.integers(-1000, 1000, 32 * 6).astype(F32)
    got = WarpReduceSum(v)
    np.testing.assert_array_equal(got[::32], v.reshape(6, 32).sum(1))


def test_block_reduce_sum_of_several_blocks_and_back_to_back_calls():
    """Thread 0 of each 128-thread block holds its sum; a second call reusing `shared` (as compute_gI
    does for stats_x2) is unaffected by the first."""
    blocks = 5
    a = RNG.integers(-2**20, 2**20, 128 * blocks).astype(F32)
    b = RNG.integers(-2**20, 2**20, 128 * blocks).astype(F32)
    tid = np.tile(np.arange(128), blocks)
    shared = np.zeros((blocks, 4), F32)
    ra = BlockReduceSum(a, shared, tid, 128)
    rb = BlockReduceSum(b, shared, tid, 128)
    np.testing.assert_array_equal(ra[::128], a.reshape(blocks, 128).sum(1))
    np.testing.assert_array_equal(rb[::128], b.reshape(blocks, 128).sum(1))


def test_block_reduce_sum_order_is_warps_then_warp_zero():
    v = (RNG.standard_normal(128) * np.exp2(RNG.integers(-24, 24, 128))).astype(F32)
    got = BlockReduceSum(v.copy(), np.zeros((1, 4), F32), np.arange(128), 128)[0]
    partial = [_tree_lane0(v[32 * w:32 * w + 32]) for w in range(4)]
    assert got == _tree_lane0(partial + [F32(0)] * 28)


# ---- the kernels on exact data -----------------------------------------------------------------------
def _exact_case(M, N, dtype=np.float32):
    """Integer dy and x, mean and rstd exact: every product and sum below 2^24 is exact in float32."""
    x = RNG.integers(-8, 8, (M, N)).astype(dtype)
    dy = RNG.integers(-8, 8, (M, N)).astype(dtype)
    w = RNG.integers(-4, 4, N).astype(dtype)
    mean = RNG.integers(-2, 2, M).astype(np.float64 if dtype == np.float64 else F32)
    rstd = np.exp2(RNG.integers(-2, 2, M)).astype(mean.dtype)
    return dy, x, w, mean, rstd


@pytest.mark.parametrize("M", [1, 7, 63, 64, 100, 127, 128, 200, 255, 256, 300, 512])
@pytest.mark.parametrize("N", [1, 5, 32, 33, 64])
def test_gamma_beta_tiles_give_exact_column_sums(M, N):
    dy, x, w, mean, rstd = _exact_case(M, N)
    _, dg, db = api.native_layer_norm_backward(dy, x, (N,), mean, rstd, w, w, (False, True, True))
    xhat = (x.astype(np.float64) - mean[:, None]) * rstd[:, None]
    np.testing.assert_array_equal(dg, (dy * xhat).sum(0))
    np.testing.assert_array_equal(db, dy.astype(np.float64).sum(0))


@pytest.mark.parametrize("M,N", [(65537, 1), (65537, 3), (65568, 32), (70000, 100)])
def test_partial_path_and_torch_sum_give_exact_column_sums(M, N):
    dy, x, w, mean, rstd = _exact_case(M, N)
    _, dg = api.fused_rms_norm_backward(dy, x, (N,), rstd, w, (False, True))
    np.testing.assert_array_equal(dg, (dy.astype(np.float64) * x * rstd[:, None]).sum(0))


@pytest.mark.parametrize("N", [1, 3, 4, 64, 256, 600, 1024])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_grad_input_exact_for_power_of_two_rows(op, N):
    """With N a power of two or not, integer data and rstd a power of two, the grad-input formula
    (N*g - sum(g) - xhat*sum(g*xhat)) * rstd / N is exact where N is a power of two."""
    M = 3
    dy, x, w, mean, rstd = _exact_case(M, N)
    if op == "layer_norm":
        dx, _, _ = api.native_layer_norm_backward(dy, x, (N,), mean, rstd, w, None, (True, False, False))
        xhat = (x.astype(np.float64) - mean[:, None]) * rstd[:, None]
        g = dy.astype(np.float64) * w
        want = (N * g - g.sum(1, keepdims=True) - xhat * (g * xhat).sum(1, keepdims=True)) * rstd[:, None] / N
    else:
        dx, _ = api.fused_rms_norm_backward(dy, x, (N,), rstd, w, (True, False))
        xhat = x.astype(np.float64) * rstd[:, None]
        g = dy.astype(np.float64) * w
        want = (N * g - xhat * (g * xhat).sum(1, keepdims=True)) * rstd[:, None] / N
    if N & (N - 1) == 0:
        np.testing.assert_array_equal(dx, want.astype(F32))
    else:
        np.testing.assert_allclose(dx, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_vectorized_and_plain_grad_input_kernels_agree(dtype):
    """The two kernels visit each thread's elements in the same order: the same bits (the host picks
    the plain one when grad_out is misaligned)."""
    M, N = 4, 1024
    x = RNG.standard_normal((M, N)).astype(F32)
    dy = RNG.standard_normal((M, N)).astype(F32)
    w = RNG.standard_normal(N).astype(F32)
    conv = {"fp32": lambda a: a, "fp16": lambda a: a.astype(np.float16), "bf16": float_to_bf16_bits}[dtype]
    mean, rstd = x.mean(1).astype(F32), (1 / x.std(1)).astype(F32)
    args = (conv(dy), conv(x), (N,), mean, rstd, conv(w), None, (True, False, False))
    vec = api.native_layer_norm_backward(*args)[0]
    with trace.recording() as t:
        plain = api.native_layer_norm_backward(*args, offsets=(1, 0, 0, 0))[0]
    assert {s.kernel.split("<")[0] for s in t.steps} == {"layer_norm_grad_input_kernel"}
    np.testing.assert_array_equal(vec.view(np.uint8), plain.view(np.uint8))


# ---- torch's .sum(0) ------------------------------------------------------------------------------------
def _reference_reduce_launches():
    d = json.loads((ROOT / "reference" / "torch_launches_backward.json").read_text())
    seen = set()
    for c in d["cases"]:
        case = c["case"]
        nd = case["norm_ndim"]
        M = int(np.prod(case["shape"][:len(case["shape"]) - nd]))
        N = int(np.prod(case["shape"][len(case["shape"]) - nd:]))
        R = min(32768 // -(-N // 32), -(-M // 32))
        for launch in c["launches"]:
            if "reduce_kernel" in launch["kernel"] and nd == 1:
                key = (case["dtype"], R, N, tuple(launch["block"]), tuple(launch["grid"]))
                if key not in seen:
                    seen.add(key)
                    yield key + (launch["kernel"],)


@pytest.mark.parametrize("dtype,R,N,block,grid,kernel", list(_reference_reduce_launches()))
def test_sum_configuration_matches_torchs_recorded_launches(dtype, R, N, block, grid, kernel):
    itemsize = {"fp32": 4, "fp64": 8, "fp16": 2, "bf16": 2}[dtype]
    cfg = B.setReduceConfig(R, N, itemsize)
    assert (*cfg.block(), 1) == block and (*cfg.grid(), 1) == grid
    assert re.match(rf"void at::native::reduce_kernel<{512 // cfg.output_vec_size}, {cfg.output_vec_size},", kernel)


def test_sum_of_exact_values_and_signed_zeros():
    T = BY_NAME["float"]
    a = RNG.integers(-100, 100, (2049, 12)).astype(F32)
    np.testing.assert_array_equal(B.torch_sum0(a, T), a.sum(0))
    z = np.full((2049, 4), -0.0, F32)          # the accumulators start at ident = +0: -0 sums to +0
    assert not np.signbit(B.torch_sum0(z, T)).any()
    assert not np.signbit(B.torch_sum0(z[:, :1].copy(), T)).any()


# ---- entry points ----------------------------------------------------------------------------------------
def _small(dtype=np.float32, M=6, N=40):
    x = RNG.standard_normal((M, N)).astype(dtype)
    dy = RNG.standard_normal((M, N)).astype(dtype)
    acc = np.float64 if dtype == np.float64 else F32
    return dy, x, x.mean(1).astype(acc), (1 / x.std(1)).astype(acc), np.ones(N, dtype), np.zeros(N, dtype)


def test_output_mask_gives_none_and_shapes():
    dy, x, mean, rstd, w, b = _small()
    for mask in [(a, c, d) for a in (0, 1) for c in (0, 1) for d in (0, 1)]:
        outs = api.native_layer_norm_backward(dy, x, (40,), mean, rstd, w, b, mask)
        for m, o, shape in zip(mask, outs, (x.shape, w.shape, b.shape)):
            assert (o is None) == (not m) and (o is None or (o.shape == shape and o.dtype == x.dtype))
    dx, dw = api.fused_rms_norm_backward(dy, x, (40,), rstd, w, (False, True))
    assert dx is None and dw.shape == (40,)


def test_no_rows_gives_zero_gradients_from_the_fill():
    x = np.zeros((0, 8), F32)
    dx, dg, db = api.native_layer_norm_backward(x, x, (8,), np.zeros(0, F32), np.zeros(0, F32),
                                                np.ones(8, F32), np.ones(8, F32), (True, True, True))
    assert dx.shape == (0, 8)
    np.testing.assert_array_equal(dg, np.zeros(8, F32))
    np.testing.assert_array_equal(db, np.zeros(8, F32))


def test_partial_path_dbeta_alone_is_empty_as_in_torch():
    M, N = 65537, 8
    dy, x, w, mean, rstd = _exact_case(M, N)
    _, dg, db = api.native_layer_norm_backward(dy, x, (N,), mean, rstd, w, w, (False, False, True))
    assert dg is None and db.shape == (0,)


def test_partial_path_with_a_2d_normalized_shape_is_refused():
    """torch 2.11 sizes dgamma_blocks by dgamma.size(-1): with two normalized dims its kernel writes past
    the buffer (undefined on the GPU), so the emulator says so rather than guessing."""
    x = np.zeros((65537, 2, 4), F32)
    with pytest.raises(NotImplementedError, match="past the end of the buffer"):
        api.fused_rms_norm_backward(x, x, (2, 4), np.ones(65537, F32), np.ones((2, 4), F32), (False, True))


def test_torch_messages():
    dy, x, mean, rstd, w, b = _small()
    with pytest.raises(TorchCheckError, match=re.escape("Given normalized_shape=[41], expected input with shape "
                                                        "[*, 41], but got input of size[6, 40]")):
        api.native_layer_norm_backward(dy, x, (41,), mean, rstd, None, None, (True, False, False))
    with pytest.raises(TorchCheckError, match=re.escape("Expected mean.numel() == M to be true, but got false.")):
        api.native_layer_norm_backward(dy, x, (40,), mean[:5], rstd, w, b, (True, True, True))
    with pytest.raises(TorchCheckError, match="expected scalar type Float but found Double"):
        api.native_layer_norm_backward(dy, x, (40,), mean.astype(np.float64), rstd, w, b, (True, True, True))
    with pytest.raises(TorchCheckError, match="tensor does not have a device"):
        api.native_layer_norm_backward(dy, x, (40,), mean, rstd, None, b, (True, True, True))
    with pytest.raises(TorchCheckError, match=re.escape("Expected weight to be of same shape as normalized_shape")):
        api.fused_rms_norm_backward(dy, x, (40,), rstd, w[:5], (True, True))


# ---- traces ---------------------------------------------------------------------------------------------
def test_trace_of_grad_input_and_gamma_beta():
    dy, x, mean, rstd, w, b = _small(M=70, N=33)      # tile <32,8,64>: the shared-memory + XOR reduction
    with trace.recording() as t:
        dx, dg, db = api.native_layer_norm_backward(dy, x, (33,), mean, rstd, w, b, (True, True, True))
    kinds = {s.kind for s in t.steps}
    assert {"gi_sums", "sum_shfl_down", "sum_smem_write", "sum_smem_read", "gi_stats", "gi_dx",
            "gb_sums", "gb_smem_write", "gb_smem_read", "gb_shfl_xor", "gb_out"} <= kinds
    # each row: 2 BlockReduceSums x 2 warp reductions x 5 rounds; the partner is WARP_SHFL_DOWN(thread)
    rounds = [s for s in t.steps if s.kind == "sum_shfl_down" and s.block == 3]
    assert [s.index for s in rounds] == [0, 1, 2, 3, 4] * 4
    assert rounds[0].aux[5] == 21 and rounds[4].aux[31] == 31 and rounds[4].aux[32] == 33
    # the traced dX and column sums are the outputs
    for s in (s for s in t.steps if s.kind == "gi_dx"):
        act = np.flatnonzero(s.active)
        np.testing.assert_array_equal(s.values["dx"][act], dx[s.block, s.aux[act]])
    outs = [s for s in t.steps if s.kind == "gb_out"]
    got = {int(s.aux[i]): s.values["dg"][i] for s in outs for i in np.flatnonzero(s.active)}
    np.testing.assert_array_equal([got[j] for j in range(33)], dg)
    xor = [s for s in t.steps if s.kind == "gb_shfl_xor" and s.block == 0]
    assert xor and xor[0].aux[0] == 4 and xor[1].aux[0] == 2 and xor[2].aux[0] == 1  # deltas 4, 2, 1
    records = t.records()
    assert records.shape[1] == trace.RECORD_WORDS and (records[:, 1] >> 16).max() == trace.CODE_OF["gb_out"]


def test_gamma_beta_trace_blocks_are_linear_ids_on_the_partial_path():
    M, N = 65537, 40
    dy, x, w, mean, rstd = _exact_case(M, N)
    with trace.recording() as t:
        api.fused_rms_norm_backward(dy, x, (N,), rstd, w, (False, True))
    gb = [s for s in t.steps if s.kind == "gb_sums"]
    # grid (2, 2049): block b is blockIdx.x = b % 2, blockIdx.y = b // 2
    assert {s.block for s in gb} == set(range(2 * 2049))
