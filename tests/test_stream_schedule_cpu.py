"""CPU-only: the fast forward's stream kernel (reimpl/fast/cuda/fast_layer_norm.cu), its index
arithmetic written out in Python, keeps torch's order: each thread updates its vectors t + 128 j in
ascending j, each vector once, its k-th element with count k (the count torch's thread would have),
whatever the chunk U, the stash S and the row length; the stash holds the first S vectors of every
thread at distinct slots inside the launch's shared memory; and the normalisation stores every vector
of the row once, reading it from the slot the statistics pass wrote or from global memory. The loops
modelled here are checked against the kernel's own lines. The GPU tests check the bits; this checks,
for lengths and stash sizes they do not reach, that no vector is dropped, doubled or reordered."""
import itertools
import re
from pathlib import Path

import pytest

from reimpl.fast import forward as F
from reimpl.mirror import kernel_table as K

SOURCE = (Path(F.__file__).parent / "cuda" / "fast_layer_norm.cu").read_text()
KERNEL = SOURCE[SOURCE.index("fast_layer_norm_stream_kernel("):SOURCE.index("// --8<-- [end:fast_layer_norm_stream_kernel]")]


def passes(N: int, U: int, S: int):
    """Per thread t of the block: (the statistics pass's (vector j, count) in order, stash writes
    (slot, j), the normalisation's (j, where it reads from) in order)."""
    n_vec, U2 = N // 4, U // 2
    out = {}
    for t in range(128):
        n_mine = (n_vec - t + 127) // 128 if t < n_vec else 0
        updates, stash, stores = [], [], []

        def statistics(j0, n, whole):
            c0 = 4 * j0  # float(j0 * vec_size)
            for u in range(n):
                if whole or j0 + u < n_mine:
                    for ii in range(4):
                        updates.append((j0 + u, c0 + u * 4 + ii + 1))
                    if j0 + u < S:
                        stash.append((128 * (j0 + u) + t, j0 + u))

        n_whole = n_mine // U * U
        for j0 in range(0, n_whole, U):  # chunks held whole
            statistics(j0, U, True)
        for j0 in range(n_whole, n_mine, U2):  # the partial chunk, in halves
            statistics(j0, U2, False)

        def normalise(j0, whole):
            for u in range(U2):
                if whole or j0 + u < n_mine:
                    stores.append((j0 + u, "stash" if j0 + u < S else "global"))

        n_whole2 = n_mine // U2 * U2
        for j0 in range(0, n_whole2, U2):
            normalise(j0, True)
        if n_whole2 < n_mine:
            normalise(n_whole2, False)
        out[t] = (n_mine, updates, stash, stores)
    return out


def test_the_model_is_the_kernels_loops():
    for line in ("const int n_whole = n_mine / U * U;",
                 "for (int j0 = 0; j0 < n_whole; j0 += U) {",
                 "for (int j0 = n_whole; j0 < n_mine; j0 += U2) {",
                 "const int n_whole2 = n_mine / U2 * U2;",
                 "for (int j0 = 0; j0 < n_whole2; j0 += U2) {",
                 "if (n_whole2 < n_mine) {",
                 "const int n_mine = thrx < n_vec ? (n_vec - thrx + 127) / 128 : 0;",
                 "const int S = stash_bytes / (128 * sizeof(words));",
                 "v[u] = j0 + u < S ? stash[(j0 + u) * 128 + thrx] : X_words[(j0 + u) * 128];"):
        assert line in KERNEL, line
    chunk = SOURCE[SOURCE.index("__device__ __forceinline__ void welford_chunk("):SOURCE.index("fast_layer_norm_stream_kernel(")]
    for line in ("const float c0 = float(j0 * vec_size);",
                 "const float c = __fadd_rn(c0, float(u * vec_size + ii + 1));",
                 "if (j0 + u < S) stash[(j0 + u) * 128 + thrx] = v[u];"):
        assert line in chunk, line
    assert re.search(r"static_assert\(U % 2 == 0", KERNEL)


@pytest.mark.parametrize("N", [16388, 16896, 20000, 32768, 32772, 65536, 100000])
@pytest.mark.parametrize("U", [2, 4, 8, 16])
def test_each_thread_updates_its_vectors_in_torchs_order(N, U):
    # stash sizes: none, one vector, part of a thread's, more than any thread has
    n_max = -(-(N // 4) // 128)
    for S in (0, 1, n_max // 2, n_max + 5):
        for t, (n_mine, updates, stash, stores) in passes(N, U, S).items():
            assert [j for j, _ in updates] == [j for j in range(n_mine) for _ in range(4)], (N, U, S, t)
            assert [c for _, c in updates] == list(range(1, 4 * n_mine + 1))  # torch's k-th update, count k
            assert [j for j, _ in stores] == list(range(n_mine))
            assert all(src == ("stash" if j < S else "global") for j, src in stores)
            assert [j for _, j in stash] == list(range(min(S, n_mine)))


def test_the_stash_slots_are_distinct_and_inside_the_launchs_shared_memory():
    for T, N in itertools.product((K.float_, K.Half, K.BFloat16), (16388, 20000, 32768, 65536, 131072)):
        vector = 4 * K.sizeof(T)
        shared = F.stash_bytes(T, N)
        S = shared // (128 * vector)
        slots = [slot for _, _, stash, _ in passes(N, F.STREAM_CHUNK, S).values() for slot, _ in stash]
        assert len(slots) == len(set(slots))
        assert all(0 <= slot and (slot + 1) * vector <= shared for slot in slots), (T, N)
        # every vector of the row is stored once, by the thread torch gives it
        stored = sorted(128 * j + t for t, (_, _, _, stores) in passes(N, F.STREAM_CHUNK, S).items() for j, _ in stores)
        assert stored == list(range(N // 4))


def test_counts_stay_exact_in_float_up_to_torchs_longest_row():
    # the longest row torch's vectorized path takes, 2^24 elements: a thread's last count is
    # 4 * ceil(2^24 / 4 / 128) = 2^17, far below 2^24, so c0 + k is exact
    assert 4 * -(-(2 ** 24 // 4) // 128) == 2 ** 17
