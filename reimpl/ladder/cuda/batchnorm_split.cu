// BatchNorm's training forward and backward with each channel's reduction split over many blocks.
// bn_train_forward (batchnorm.cu) gives a channel one block: C blocks, 64 on an H100's 132 SMs for
// a ResNet stem, and most of the GPU waits. Here S blocks share a channel, each folds a contiguous
// slice of its values into one Welford state, and the block that finishes the channel last merges
// its S states with Chan, Golub and LeVeque's formula (1979; welford_merge in common.cuh) in slice
// order, so the result does not depend on which block finished first (a channels-last tile too
// wide for one block to merge alone leaves it to bn_finalize_stats, a warp per channel, in the
// same order). The layout of the split
// (partial states in a workspace, then a per-channel merge; channels-last input read as columns,
// by tiles of rows) is after apex's SyncBatchNorm and torch's
// batch_norm_collect_statistics_channels_last_kernel; the last-block merge after CUDA's
// threadFenceReduction sample. The backward is split the same way. For channels short enough that
// one block each is faster and numerous enough to fill the GPU, the launcher runs bn_forward_held
// and bn_backward_held (below) instead: a block per channel, the channel held in its registers.
// Large channels-last input takes bn_forward_cl_resident and bn_backward_cl_resident: the same
// passes in one cooperative launch whose blocks wait for each other. The code is ours, written to teach,
// and not bit-identical to torch (its error bounds are stated in reimpl/ladder/accuracy.py).
//
// Contract (the launchers in reimpl/ladder/batchnorm_split.py, which choose S, the tiles and the
// vector width VEC):
//   x is (N, C, HW) contiguous ("NCHW": a channel is N runs of HW values), or (R, C) with C
//   contiguous ("columns": channels-last input, R = N * H * W, or any input with HW = 1).
//   Statistics: part[c * S + s] is the Welford state of slice s of channel c; the last block of
//   channel c (NCHW) or of a column tile writes save_mean, save_invstd, the running statistics
//   (type P, or nullptr) and the per-channel coefficients of the elementwise pass (coef, C floats
//   per coefficient); or, for columns with arrived = nullptr, bn_finalize_stats does, launched next.
//   Backward: part[c * S + s] holds (sum dy, sum dy * (x - mean)) of the slice; the last block (or
//   bn_backward_finalize) writes dweight and dbias (type P, or nullptr) and the coefficients of dx.
//   arrived: one int per channel (NCHW) or column tile, 0 at launch, left at 0 on return (the
//   launcher keeps one such array per device and stream, zeroed once).
//   VEC > 1 means 16-byte loads: the launcher has checked the alignment and that HW (NCHW) or C
//   (columns) is a multiple of VEC. Arithmetic is float whatever T is.
#include "common.cuh"

namespace ladder {

constexpr unsigned COLUMN_THREADS = 256;  // threads of a columns block: (TX, 256 / TX)
constexpr unsigned CHUNK = 4;             // values of one channel loaded before any is folded

template <typename T, unsigned VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <unsigned VEC, typename T>
__device__ __forceinline__ void load_vec(float (&out)[VEC], const T* p) {
  const Vec<T, VEC> in = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) out[j] = to_f(in.v[j]);
}

template <unsigned VEC, typename T>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[VEC]) {
  Vec<T, VEC> out;
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) out.v[j] = from_f<T>(v[j]);
  *reinterpret_cast<Vec<T, VEC>*>(p) = out;
}

// VEC consecutive per-channel floats (VEC a multiple of 4, p 16-byte aligned)
template <unsigned VEC>
__device__ __forceinline__ void load_floats(float (&out)[VEC], const float* p) {
#pragma unroll
  for (unsigned q = 0; q < VEC / 4; ++q) {
    const float4 f = reinterpret_cast<const float4*>(p)[q];
    out[4 * q] = f.x;
    out[4 * q + 1] = f.y;
    out[4 * q + 2] = f.z;
    out[4 * q + 3] = f.w;
  }
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// --8<-- [start:fold]
// U values of one channel into a Welford state. All U there: their own (count, mean, M2) by two
// passes over registers (dividing by U, a power of two, is exact), then one Chan merge, so one
// division for U values instead of one each; a short tail: one Welford update per value.
template <unsigned U>
__device__ __forceinline__ void fold(Welford& s, const float (&v)[U], unsigned m) {
  if (m == U) {
    float sum = 0.f;
#pragma unroll
    for (unsigned u = 0; u < U; ++u) sum += v[u];
    const float mean = sum * (1.f / U);
    float m2 = 0.f;
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const float d = v[u] - mean;
      m2 += d * d;
    }
    s = welford_merge(s, Welford{(float)U, mean, m2});
  } else {
    for (unsigned u = 0; u < m; ++u) welford_push(s, v[u]);
  }
}
// --8<-- [end:fold]

// The backward's two sums, added in the scaffold's reductions (a float sum commutes bit for bit)
struct Sums {
  float dy, dyx;
};

__device__ __forceinline__ Sums shfl_xor(Sums s, int mask) {
  return {__shfl_xor_sync(FULL_MASK, s.dy, mask), __shfl_xor_sync(FULL_MASK, s.dyx, mask)};
}

struct SumsAdd {
  static constexpr bool commutes = true;
  __device__ __forceinline__ Sums operator()(Sums a, Sums b) const { return {a.dy + b.dy, a.dyx + b.dyx}; }
};

// One slice of channel c in NCHW: the flattened k = n * HW + p from start to end, VEC values a step
// per thread, blockDim.x * VEC values a step per block. The element index i = (n * C + c) * HW + p
// is carried along instead of divided out: a step moves p by ds and n by step / HW, and crossing
// the end of a sample's run of HW values jumps over the other C - 1 channels' runs.
struct SliceWalk {
  int64_t k, end, step, sp, i, ds, di, wrap, HW;

  __device__ __forceinline__ SliceWalk(int64_t c, int64_t C, int64_t HW_, int64_t count, int64_t per_slice,
                                       unsigned vec)
      : HW(HW_) {
    const int64_t start = (int64_t)blockIdx.y * per_slice;
    end = min64(start + per_slice, count);
    step = (int64_t)blockDim.x * vec;
    k = start + (int64_t)threadIdx.x * vec;
    sp = k % HW;
    i = ((k / HW) * C + c) * HW + sp;
    ds = step % HW;
    di = (step / HW) * C * HW + ds;
    wrap = (C - 1) * HW;
  }

  __device__ __forceinline__ void next() {
    k += step;
    sp += ds;
    i += di;
    if (sp >= HW) {
      sp -= HW;
      i += wrap;
    }
  }
};

// The columns kernels' merge of their blockDim.y row-threads: each thread's VEC states into shared
// memory, then a tree over the rows, the lower row first; row-thread 0's slots hold the tile's states.
template <unsigned VEC, typename S, typename Merge>
__device__ __forceinline__ void column_merge(const S (&s)[VEC], S* smem, Merge merge) {
  S* mine = smem + (threadIdx.y * blockDim.x + threadIdx.x) * VEC;
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) mine[j] = s[j];
  __syncthreads();
  for (unsigned half = blockDim.y / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) mine[j] = merge(mine[j], mine[half * blockDim.x * VEC + j]);
    }
    __syncthreads();
  }
}

// --8<-- [start:last_block]
// Whether this block is the last of the S that share the counter *arrived (a channel's slices, or
// a column tile's). Every thread fences its partial writes, then one thread takes a ticket; the
// last ticket's block merges the S partials and resets the counter, so the next launch on the
// stream finds it at 0 with no memset. S = 1: no other block, no counter.
__device__ __forceinline__ bool last_to_arrive(int* arrived, unsigned S) {
  __shared__ int last;
  __threadfence();  // this thread's partials visible GPU-wide before the ticket is taken
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    last = S == 1 || atomicAdd(arrived, 1) == (int)S - 1;
    if (last && S > 1) *arrived = 0;  // all S tickets taken: nobody else touches it this launch
  }
  __syncthreads();
  if (last) __threadfence();  // and the other blocks' partials seen after it
  return last;
}

// Other blocks' partials, read from L2: this SM's L1 may hold an older copy of their line
__device__ __forceinline__ Welford load_cg(const Welford* p) {
  return {__ldcg(&p->n), __ldcg(&p->mean), __ldcg(&p->m2)};
}
__device__ __forceinline__ Sums load_cg(const Sums* p) { return {__ldcg(&p->dy), __ldcg(&p->dyx)}; }

// One warp merges one channel's S partials: lane l those of slices l, l + 32, l + 64, ... in that
// order, then the lanes by the butterfly, lower lane first (warp_all_reduce's order, with the lane
// given: a columns block is 2-D). A fixed order, so the same bits every run whichever block came
// last (and from bn_finalize_stats), and a chain of S / 32 + 5 merges rather than S: channels-last
// input with few channels needs S in the thousands to fill the GPU. Every lane gets the state.
template <typename State, typename Merge>
__device__ __forceinline__ State butterfly(State s, unsigned lane, Merge merge) {
  for (int mask = 16; mask > 0; mask >>= 1) {
    const State o = shfl_xor(s, mask);
    s = (lane & mask) ? merge(o, s) : merge(s, o);
  }
  return s;
}

// The loads go out MERGE_BATCH at a time before any merge: the chain of S / 32 merges then waits on
// memory once a batch, not once a state (the order, and so the bits, unchanged).
constexpr unsigned MERGE_BATCH = 8;

template <typename State, typename Merge>
__device__ __forceinline__ State merge_slices(const State* part, unsigned S, unsigned lane, State s, Merge merge) {
  for (unsigned k0 = lane; k0 < S; k0 += 32 * MERGE_BATCH) {
    State v[MERGE_BATCH];
#pragma unroll
    for (unsigned b = 0; b < MERGE_BATCH; ++b) v[b] = k0 + 32 * b < S ? load_cg(part + k0 + 32 * b) : s;
#pragma unroll
    for (unsigned b = 0; b < MERGE_BATCH; ++b)
      if (k0 + 32 * b < S) s = merge(s, v[b]);
  }
  return butterfly(s, lane, merge);
}

// What the forward writes for channel c from its state: what bn_train_forward's thread 0 writes
// (the same formulas), and the elementwise pass's coefficients coef = [mean | invstd * w | b], so
// that y = (x - mean) * (invstd * w) + b as in bn_train_forward.
template <unsigned N>
struct Coefs {
  float v[N];
};

template <typename P>
struct StatsOut {
  const P *W, *B;
  float *save_mean, *save_invstd, *coef;
  P *running_mean, *running_var;
  float momentum, eps;

  __device__ __forceinline__ void write(Welford s, int64_t c, int64_t C, int64_t count) const {
    const float invstd = bn_invstd(s, count, eps);
    bn_store_stats(s, invstd, c, count, momentum, save_mean, save_invstd, running_mean, running_var);
    const float w = W != nullptr ? to_f(W[c]) : 1.f, b = B != nullptr ? to_f(B[c]) : 0.f;
    coef[c] = s.mean;
    coef[C + c] = invstd * w;
    coef[2 * C + c] = b;
  }
};

// dx = (dy - mean_dy - (x - mean) * proj) * scale, torch's training-mode backward:
// proj = invstd^2 * mean_dy_xmu, scale = invstd * w
struct DxCoef {
  float mean_dy, proj, scale;
};

__device__ __forceinline__ DxCoef dx_coef(Sums t, float invstd, float w, int64_t count) {
  const float mean_dy = t.dy / (float)count, mean_dy_xmu = t.dyx / (float)count;
  return {mean_dy, invstd * invstd * mean_dy_xmu, invstd * w};
}

// What the backward writes for channel c from its sums: dweight = sum(dy * (x - mean)) * invstd,
// dbias = sum(dy) (nullptr: not wanted), and dx's coefficients coef = [mean | mean_dy | proj | scale].
template <typename P>
struct GradOut {
  const float *save_mean, *save_invstd;
  const P* W;
  P *dweight, *dbias;
  float* coef;

  static constexpr unsigned COEFS = 4, PARAMS = 3;
  // what finish reads of channel c: its saved 1/std, weight and saved mean
  __device__ __forceinline__ Coefs<3> params(int64_t c) const {
    return {{save_invstd[c], W != nullptr ? to_f(W[c]) : 1.f, save_mean[c]}};
  }
  // channel c's coefficients; `store`: and dweight, dbias
  __device__ __forceinline__ Coefs<4> finish(Sums t, int64_t c, int64_t count, bool store, Coefs<3> p) const {
    const float invstd = p.v[0], w = p.v[1];
    if (store && dweight != nullptr) dweight[c] = from_f<P>(t.dyx * invstd);
    if (store && dbias != nullptr) dbias[c] = from_f<P>(t.dy);
    const DxCoef k = dx_coef(t, invstd, w, count);
    return {{p.v[2], k.mean_dy, k.proj, k.scale}};
  }
  __device__ __forceinline__ void write(Sums t, int64_t c, int64_t C, int64_t count) const {
    const Coefs<4> k = finish(t, c, count, true, params(c));
#pragma unroll
    for (unsigned i = 0; i < 4; ++i) coef[i * C + c] = k.v[i];
  }
};

// The columns kernels' last block: warp w merges the tile's columns w, w + warps, ... as
// merge_slices does, VEC of them side by side so that their loads are in flight together (the
// chain stays S / 32 long however wide the tile). The launcher sends tiles whose width x S states
// would keep one SM too long to bn_finalize_stats instead (arrived = nullptr).
template <unsigned VEC, typename State, typename Merge, typename Out>
__device__ __forceinline__ void finish_tile(const State* part, State zero, Merge merge, const Out& out, int64_t C,
                                            int64_t count) {
  const unsigned tid = threadIdx.y * blockDim.x + threadIdx.x, lane = tid & 31, warps = blockDim.x * blockDim.y / 32;
  const unsigned S = gridDim.y;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x * VEC, end = min64(first + blockDim.x * VEC, C);
  for (int64_t c0 = first + tid / 32; c0 < end; c0 += (int64_t)warps * VEC) {  // c0 is the same across a warp
    State s[VEC];
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) s[j] = zero;
    for (unsigned k = lane; k < S; k += 32) {
      State v[VEC];
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) {
        const int64_t c = c0 + (int64_t)j * warps;
        v[j] = c < end ? load_cg(part + c * S + k) : zero;
      }
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) s[j] = merge(s[j], v[j]);
    }
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) {
      const int64_t c = c0 + (int64_t)j * warps;
      s[j] = butterfly(s[j], lane, merge);
      if (lane == 0 && c < end) out.write(s[j], c, C, count);
    }
  }
}
// --8<-- [end:last_block]

// --8<-- [start:bn_partial_stats]
// Grid (C, S): block (c, s) folds slice s of channel c (per_slice values of the walk, a multiple of
// VEC) into one Welford state. Each thread folds a vector (VEC > 1) or CHUNK steps of the walk at a
// time, then block_merge, as in bn_train_forward. The channel's last block to arrive merges the S
// states with its first warp and writes the statistics (no finalize launch: one warp's work, as the
// finalize kernel gave a channel).
template <typename T, typename T_ACC, typename P, unsigned VEC>
__global__ void bn_partial_stats(const T* X, Welford* part, int* arrived, const P* W, const P* B, float* save_mean,
                                 float* save_invstd, float* coef, P* running_mean, P* running_var, int64_t N,
                                 int64_t C, int64_t HW, int64_t per_slice, T_ACC momentum, T_ACC eps) {
  __shared__ Welford smem[32];
  const int64_t c = blockIdx.x;
  SliceWalk w(c, C, HW, N * HW, per_slice, VEC);
  Welford s{0.f, 0.f, 0.f};
  if constexpr (VEC > 1) {
    for (; w.k < w.end; w.next()) {
      float v[VEC];
      load_vec<VEC>(v, X + w.i);  // HW % VEC == 0: a vector never crosses a sample's run
      fold<VEC>(s, v, VEC);
    }
  } else {
    while (w.k < w.end) {
      float v[CHUNK] = {};
      unsigned m = 0;
#pragma unroll
      for (unsigned u = 0; u < CHUNK; ++u) {
        if (w.k < w.end) {
          v[u] = to_f(X[w.i]);
          m = u + 1;
        }
        w.next();
      }
      fold<CHUNK>(s, v, m);
    }
  }
  s = block_merge(s, smem);
  if (threadIdx.x == 0) part[c * gridDim.y + blockIdx.y] = s;
  if (!last_to_arrive(arrived + c, gridDim.y) || threadIdx.x >= 32) return;
  s = merge_slices(part + c * gridDim.y, gridDim.y, threadIdx.x, Welford{0.f, 0.f, 0.f}, WelfordMerge());
  if (threadIdx.x == 0)
    StatsOut<P>{W, B, save_mean, save_invstd, coef, running_mean, running_var, momentum, eps}.write(s, c, C, N * HW);
}
// --8<-- [end:bn_partial_stats]

// --8<-- [start:bn_partial_stats_cl]
// Grid (column tiles, S), block (TX, TY) of COLUMN_THREADS: thread (tx, ty) owns VEC adjacent
// columns c0 .. c0 + VEC - 1 and rows ty, ty + TY, ... of slice s, so a warp's loads run along C
// and coalesce. It keeps one Welford state per column, folding CHUNK rows at a time; then the
// TY row-threads of each column merge in shared memory, in a fixed tree. The tile's last block to
// arrive merges each of its columns' S states (finish_tile) and writes the statistics.
template <typename T, unsigned VEC>
__device__ __forceinline__ void columns_stats(const T* X, Welford* part, int64_t R, int64_t C, int64_t per_slice,
                                              Welford* smem) {
  const int64_t c0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  const int64_t start = (int64_t)blockIdx.y * per_slice, end = min64(start + per_slice, R);
  Welford s[VEC];
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) s[j] = Welford{0.f, 0.f, 0.f};
  if (c0 < C) {
    for (int64_t r = start + threadIdx.y; r < end; r += CHUNK * blockDim.y) {
      float v[VEC][CHUNK] = {};
      unsigned m = 0;
#pragma unroll
      for (unsigned u = 0; u < CHUNK; ++u) {
        const int64_t row = r + u * blockDim.y;
        if (row < end) {
          float x[VEC];
          load_vec<VEC>(x, X + row * C + c0);
#pragma unroll
          for (unsigned j = 0; j < VEC; ++j) v[j][u] = x[j];
          m = u + 1;
        }
      }
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) fold<CHUNK>(s[j], v[j], m);
    }
  }
  column_merge<VEC>(s, smem, WelfordMerge());
  if (threadIdx.y == 0 && c0 < C) {
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) part[(c0 + j) * gridDim.y + blockIdx.y] = smem[threadIdx.x * VEC + j];
  }
}

template <typename T, typename T_ACC, typename P, unsigned VEC>
__global__ void bn_partial_stats_cl(const T* X, Welford* part, int* arrived, const P* W, const P* B, float* save_mean,
                                    float* save_invstd, float* coef, P* running_mean, P* running_var, int64_t R,
                                    int64_t C, int64_t per_slice, T_ACC momentum, T_ACC eps) {
  __shared__ Welford smem[COLUMN_THREADS * VEC];
  columns_stats<T, VEC>(X, part, R, C, per_slice, smem);
  if (arrived == nullptr || !last_to_arrive(arrived + blockIdx.x, gridDim.y)) return;  // nullptr: a finalize follows
  finish_tile<VEC>(part, Welford{0.f, 0.f, 0.f}, WelfordMerge(),
                   StatsOut<P>{W, B, save_mean, save_invstd, coef, running_mean, running_var, momentum, eps}, C, R);
}
// --8<-- [end:bn_partial_stats_cl]

// --8<-- [start:bn_finalize_stats]
// The merge as a kernel of its own, for columns tiles too wide for their last block to merge alone
// (bn_partial_stats_cl with arrived = nullptr): a warp per channel, 8 channels a block, spread over
// the GPU; merge_slices's order and StatsOut's formulas, so the same bits as a last block's merge.
template <typename T, typename T_ACC, typename P>
__global__ void bn_finalize_stats(const Welford* part, const P* W, const P* B, float* save_mean, float* save_invstd,
                                  float* coef, P* running_mean, P* running_var, int64_t S, int64_t C, int64_t count,
                                  T_ACC momentum, T_ACC eps) {
  const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31;
  if (c >= C) return;  // a whole warp: its lanes share c
  const Welford s = merge_slices(part + c * S, (unsigned)S, lane, Welford{0.f, 0.f, 0.f}, WelfordMerge());
  if (lane == 0)
    StatsOut<P>{W, B, save_mean, save_invstd, coef, running_mean, running_var, momentum, eps}.write(s, c, C, count);
}
// --8<-- [end:bn_finalize_stats]

// Every element of an (N, C, HW) tensor once, VEC at a time, grid-stride: op(e, c) gets the
// vector's first element e and channel c. NCHW (CL false): HW % VEC == 0, so all VEC share channel
// c; the channel is carried along the stride, not divided out per element (columns input with
// VEC = 1 comes here with HW = 1). CL: C % VEC == 0, the vector holds channels c .. c + VEC - 1.
template <bool CL, unsigned VEC, typename Op>
__device__ __forceinline__ void for_each_vector(int64_t total, int64_t C, int64_t HW, Op op) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x * VEC;
  int64_t e = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (e >= total) return;
  const int64_t hw = CL ? 1 : HW;
  int64_t p = e % hw, c = (e / hw) % C;
  const int64_t dp = stride % hw, dc = (stride / hw) % C;
  for (; e < total; e += stride) {
    op(e, c);
    p += dp;
    c += dc;
    if (p >= hw) {
      p -= hw;
      ++c;
    }
    if (c >= C) c -= C;
  }
}

// --8<-- [start:bn_apply]
// y = (x - mean[c]) * scale[c] + shift[c], coef = [mean | scale | shift] from StatsOut.
template <typename T, typename T_ACC, bool CL, unsigned VEC>
__global__ void bn_apply(const T* X, T* Y, const float* coef, int64_t total, int64_t C, int64_t HW) {
  const float *mean = coef, *scale = coef + C, *shift = coef + 2 * C;
  for_each_vector<CL, VEC>(total, C, HW, [&](int64_t e, int64_t c) {
    float v[VEC];
    load_vec<VEC>(v, X + e);
    if constexpr (CL) {
      float m[VEC], a[VEC], b[VEC];
      load_floats<VEC>(m, mean + c);
      load_floats<VEC>(a, scale + c);
      load_floats<VEC>(b, shift + c);
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) v[j] = (v[j] - m[j]) * a[j] + b[j];
    } else {
      const float m = mean[c], a = scale[c], b = shift[c];
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) v[j] = (v[j] - m) * a + b;
    }
    store_vec<VEC>(Y + e, v);
  });
}
// --8<-- [end:bn_apply]

// --8<-- [start:bn_backward_partials]
// The backward's reduction, sliced as bn_partial_stats: block (c, s) adds dy and dy * (x - mean)
// over slice s of channel c, in float, then over the block (block_tree_reduce); the channel's last
// block adds the S sums in merge_slices's order and writes dweight, dbias and dx's coefficients.
template <typename T, typename T_ACC, typename P, unsigned VEC>
__global__ void bn_backward_partials(const T* DY, const T* X, const float* mean, const float* save_invstd, const P* W,
                                     Sums* part, int* arrived, P* dweight, P* dbias, float* coef, int64_t N, int64_t C,
                                     int64_t HW, int64_t per_slice) {
  __shared__ Sums smem[32];
  const int64_t c = blockIdx.x;
  const float m = mean[c];
  SliceWalk w(c, C, HW, N * HW, per_slice, VEC);
  Sums t{0.f, 0.f};
  for (; w.k < w.end; w.next()) {
    float dy[VEC], x[VEC];
    load_vec<VEC>(dy, DY + w.i);
    load_vec<VEC>(x, X + w.i);
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) {
      t.dy += dy[j];
      t.dyx += dy[j] * (x[j] - m);
    }
  }
  t = block_tree_reduce(t, smem, SumsAdd());
  if (threadIdx.x == 0) part[c * gridDim.y + blockIdx.y] = t;
  if (!last_to_arrive(arrived + c, gridDim.y) || threadIdx.x >= 32) return;
  t = merge_slices(part + c * gridDim.y, gridDim.y, threadIdx.x, Sums{0.f, 0.f}, SumsAdd());
  if (threadIdx.x == 0) GradOut<P>{mean, save_invstd, W, dweight, dbias, coef}.write(t, c, C, N * HW);
}
// --8<-- [end:bn_backward_partials]

// --8<-- [start:bn_backward_partials_cl]
// The same for columns input, tiled as bn_partial_stats_cl, finished as it is.
template <typename T, unsigned VEC>
__device__ __forceinline__ void columns_sums(const T* DY, const T* X, const float* mean, Sums* part, int64_t R,
                                             int64_t C, int64_t per_slice, Sums* smem) {
  const int64_t c0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  const int64_t start = (int64_t)blockIdx.y * per_slice, end = min64(start + per_slice, R);
  Sums t[VEC];
  float m[VEC];
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) {
    t[j] = Sums{0.f, 0.f};
    m[j] = c0 + j < C ? mean[c0 + j] : 0.f;
  }
  if (c0 < C) {
    for (int64_t r = start + threadIdx.y; r < end; r += CHUNK * blockDim.y) {
      float dy[CHUNK][VEC] = {}, x[CHUNK][VEC] = {};
#pragma unroll
      for (unsigned u = 0; u < CHUNK; ++u) {
        const int64_t row = r + u * blockDim.y;
        if (row < end) {
          load_vec<VEC>(dy[u], DY + row * C + c0);
          load_vec<VEC>(x[u], X + row * C + c0);
        }
      }
#pragma unroll
      for (unsigned u = 0; u < CHUNK; ++u)
#pragma unroll
        for (unsigned j = 0; j < VEC; ++j) {
          if (r + u * blockDim.y < end) {
            t[j].dy += dy[u][j];
            t[j].dyx += dy[u][j] * (x[u][j] - m[j]);
          }
        }
    }
  }
  column_merge<VEC>(t, smem, SumsAdd());
  if (threadIdx.y == 0 && c0 < C) {
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) part[(c0 + j) * gridDim.y + blockIdx.y] = smem[threadIdx.x * VEC + j];
  }
}

template <typename T, typename T_ACC, typename P, unsigned VEC>
__global__ void bn_backward_partials_cl(const T* DY, const T* X, const float* mean, const float* save_invstd,
                                        const P* W, Sums* part, int* arrived, P* dweight, P* dbias, float* coef,
                                        int64_t R, int64_t C, int64_t per_slice) {
  __shared__ Sums smem[COLUMN_THREADS * VEC];
  columns_sums<T, VEC>(DY, X, mean, part, R, C, per_slice, smem);
  if (arrived == nullptr || !last_to_arrive(arrived + blockIdx.x, gridDim.y)) return;  // nullptr: a finalize follows
  finish_tile<VEC>(part, Sums{0.f, 0.f}, SumsAdd(), GradOut<P>{mean, save_invstd, W, dweight, dbias, coef}, C, R);
}
// --8<-- [end:bn_backward_partials_cl]

// --8<-- [start:bn_backward_finalize]
// The backward's merge as a kernel of its own, as bn_finalize_stats (GradOut's formulas).
template <typename T, typename T_ACC, typename P>
__global__ void bn_backward_finalize(const Sums* part, const float* save_mean, const float* save_invstd, const P* W,
                                     P* dweight, P* dbias, float* coef, int64_t S, int64_t C, int64_t count) {
  const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31;
  if (c >= C) return;
  const Sums t = merge_slices(part + c * S, (unsigned)S, lane, Sums{0.f, 0.f}, SumsAdd());
  if (lane == 0) GradOut<P>{save_mean, save_invstd, W, dweight, dbias, coef}.write(t, c, C, count);
}
// --8<-- [end:bn_backward_finalize]

// --8<-- [start:bn_backward_dx]
// dx = (dy - mean_dy - (x - mean) * proj) * scale (dx_coef), elementwise as bn_apply.
template <typename T, typename T_ACC, bool CL, unsigned VEC>
__global__ void bn_backward_dx(const T* DY, const T* X, T* DX, const float* coef, int64_t total, int64_t C,
                               int64_t HW) {
  const float *mean = coef, *mean_dy = coef + C, *proj = coef + 2 * C, *scale = coef + 3 * C;
  for_each_vector<CL, VEC>(total, C, HW, [&](int64_t e, int64_t c) {
    float dy[VEC], x[VEC];
    load_vec<VEC>(dy, DY + e);
    load_vec<VEC>(x, X + e);
    if constexpr (CL) {
      float m[VEC], g[VEC], k[VEC], a[VEC];
      load_floats<VEC>(m, mean + c);
      load_floats<VEC>(g, mean_dy + c);
      load_floats<VEC>(k, proj + c);
      load_floats<VEC>(a, scale + c);
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) dy[j] = (dy[j] - g[j] - (x[j] - m[j]) * k[j]) * a[j];
    } else {
      const float m = mean[c], g = mean_dy[c], k = proj[c], a = scale[c];
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) dy[j] = (dy[j] - g - (x[j] - m) * k) * a;
    }
    store_vec<VEC>(DX + e, dy);
  });
}
// --8<-- [end:bn_backward_dx]

// --8<-- [start:tile_barrier]
// The resident kernels (below) put all S blocks of a column tile on the GPU at once (a cooperative
// launch: the launcher sizes the grid to what stays resident) and let them wait for each other once.
// A barrier on two ints per tile, an arrival count and a generation, in the pattern of CUTLASS's
// generic barrier: the block's threads finish their writes (bar.sync), then its thread 0 reads the
// generation and arrives with an acquire-release add; the last to arrive puts the count back to 0
// and moves the generation on with a release, and the others spin until the generation differs
// from the one they read, with acquire loads. No
// __threadfence: release and acquire carry the block's writes (its partial states) to the block
// that reads them. Both ints are left ready for the next launch on the stream (the count at 0; the
// generation is only compared), so a CUDA graph replays it too.
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void tile_barrier(int* bar, unsigned S) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    const int generation = load_acquire(bar + 1);
    int before;
    asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;" : "=r"(before) : "l"(bar) : "memory");
    if (before == (int)S - 1) {
      asm volatile("st.relaxed.gpu.global.s32 [%0], 0;" ::"l"(bar) : "memory");
      asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(bar + 1) : "memory");
    } else {
      while (load_acquire(bar + 1) == generation) {
      }
    }
  }
  __syncthreads();
}
// --8<-- [end:tile_barrier]

// The forward's merge, spread over the tile's S blocks: a warp per column, in merge_slices's order
// (the bits of bn_finalize_stats), the coefficients to global memory for a second barrier to share.
// Merging Welford states takes a division a merge, so the forward shares one block's merge of each
// column through a second barrier rather than have every block repeat all S of them.
template <unsigned VEC, typename State, typename Merge, typename Out>
__device__ __forceinline__ void merge_tile_spread(const State* part, State zero, Merge merge, const Out& out,
                                                  int64_t C, int64_t count) {
  const unsigned tid = threadIdx.y * blockDim.x + threadIdx.x, lane = tid & 31, warps = blockDim.x * blockDim.y / 32;
  const unsigned S = gridDim.y;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x * VEC, end = min64(first + blockDim.x * VEC, C);
  for (int64_t c = first + (int64_t)blockIdx.y * warps + tid / 32; c < end; c += (int64_t)S * warps) {
    const State s = merge_slices(part + c * S, S, lane, zero, merge);
    if (lane == 0) out.write(s, c, C, count);
  }
}

// The backward's: every block of the tile merges the tile's columns itself (finish_tile's order, so
// the same bits in every block; a merge of sums is one addition) and keeps their coefficients in
// shared memory, and no second barrier is needed; the tile's first block also stores dweight, dbias.
template <typename Out>
struct InShared {
  Out out;
  float* shared;       // COEFS x width floats
  const float* given;  // PARAMS x width floats: the tile's parameters, fetched during the first pass
  int64_t first;
  unsigned width;
  template <typename State>
  __device__ __forceinline__ void write(State s, int64_t c, int64_t C, int64_t count) const {
    Coefs<Out::PARAMS> p;
#pragma unroll
    for (unsigned i = 0; i < Out::PARAMS; ++i) p.v[i] = given[i * width + (c - first)];
    const auto k = out.finish(s, c, count, blockIdx.y == 0, p);
#pragma unroll
    for (unsigned i = 0; i < Out::COEFS; ++i) shared[i * width + (c - first)] = k.v[i];
  }
};

// The tile's parameters into shared memory before the first pass, so that the merge after the
// barrier does not wait on their loads one column after another. Visible after the barrier.
constexpr unsigned TILE_MAX = 64;  // columns of a tile at most: 8 threads x 8 16-bit values
template <typename Out>
__device__ __forceinline__ void fetch_params(const Out& out, int64_t C, unsigned width, float* given) {
  const unsigned tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int64_t first = (int64_t)blockIdx.x * width;
  if (tid < width && first + tid < C) {
    const auto p = out.params(first + tid);
#pragma unroll
    for (unsigned i = 0; i < Out::PARAMS; ++i) given[i * width + tid] = p.v[i];
  }
}

// Thread (tx, ty)'s rows of its block's slice, ty, ty + TY, ..., ROWS at a time and from the last:
// the rows this block read last in the first pass are the likeliest still to be in L2. Rows of
// 16-byte words of 16-bit values take 2 at a time (8 floats a word): more would spill.
template <unsigned VEC>
struct ResidentRows {
  static constexpr unsigned value = VEC >= 8 ? 2 : CHUNK;
};

template <unsigned ROWS, typename F>
__device__ __forceinline__ void slice_rows_backwards(int64_t R, int64_t per_slice, F f) {
  const int64_t start = (int64_t)blockIdx.y * per_slice, end = min64(start + per_slice, R);
  const int64_t first = start + threadIdx.y, step = blockDim.y;
  if (first >= end) return;
  for (int64_t r = first + (end - 1 - first) / step * step; r >= first; r -= ROWS * step) f(r, first, step);
}

// A thread's VEC per-channel coefficients, written by other blocks of the launch: read from L2
template <unsigned VEC>
__device__ __forceinline__ void load_coef(float (&out)[VEC], const float* p, int64_t c0, int64_t C) {
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) out[j] = c0 + j < C ? __ldcg(p + c0 + j) : 0.f;
}

// The tile's merge into shared memory, then thread (tx, ty)'s VEC columns' coefficients from there.
template <unsigned VEC, typename State, typename Merge, typename Out>
__device__ __forceinline__ void resident_coefs(const State* part, State zero, Merge merge, const Out& out, int64_t C,
                                               int64_t R, float* shared, const float* given,
                                               float (&k)[Out::COEFS][VEC]) {
  const unsigned width = blockDim.x * VEC;
  const int64_t first = (int64_t)blockIdx.x * width;
  finish_tile<VEC>(part, zero, merge, InShared<Out>{out, shared, given, first, width}, C, R);
  __syncthreads();
#pragma unroll
  for (unsigned i = 0; i < Out::COEFS; ++i)
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) k[i][j] = shared[i * width + threadIdx.x * VEC + j];
}

// --8<-- [start:bn_forward_cl_resident]
// Channels-last training forward in one launch: bn_partial_stats_cl's pass, a barrier over the
// tile, bn_finalize_stats's merge spread over the tile's blocks, a second barrier, then each block
// writes y for the rows it read, from the last (bn_apply's arithmetic). The same bits as the three
// launches with the same plan; two launches fewer, and a second read of x that L2 partly serves.
template <typename T, typename T_ACC, typename P, unsigned VEC>
__global__ void __launch_bounds__(COLUMN_THREADS)
    bn_forward_cl_resident(const T* X, T* Y, Welford* part, int* bar, const P* W, const P* B, float* save_mean,
                           float* save_invstd, float* coef, P* running_mean, P* running_var, int64_t R, int64_t C,
                           int64_t per_slice, T_ACC momentum, T_ACC eps) {
  __shared__ Welford smem[COLUMN_THREADS * VEC];
  columns_stats<T, VEC>(X, part, R, C, per_slice, smem);
  tile_barrier(bar + 2 * blockIdx.x, gridDim.y);
  merge_tile_spread<VEC>(part, Welford{0.f, 0.f, 0.f}, WelfordMerge(),
                         StatsOut<P>{W, B, save_mean, save_invstd, coef, running_mean, running_var, momentum, eps}, C,
                         R);
  tile_barrier(bar + 2 * blockIdx.x, gridDim.y);
  const int64_t c0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= C) return;
  float k[3][VEC];
#pragma unroll
  for (unsigned i = 0; i < 3; ++i) load_coef<VEC>(k[i], coef + i * C, c0, C);
  constexpr unsigned ROWS = ResidentRows<VEC>::value;
  slice_rows_backwards<ROWS>(R, per_slice, [&](int64_t r, int64_t first, int64_t step) {
    float v[ROWS][VEC];
#pragma unroll
    for (unsigned u = 0; u < ROWS; ++u)
      if (r - (int64_t)u * step >= first) load_vec<VEC>(v[u], X + (r - (int64_t)u * step) * C + c0);
#pragma unroll
    for (unsigned u = 0; u < ROWS; ++u) {
      if (r - (int64_t)u * step >= first) {
#pragma unroll
        for (unsigned j = 0; j < VEC; ++j) v[u][j] = (v[u][j] - k[0][j]) * k[1][j] + k[2][j];
        store_vec<VEC>(Y + (r - (int64_t)u * step) * C + c0, v[u]);
      }
    }
  });
}
// --8<-- [end:bn_forward_cl_resident]

// --8<-- [start:bn_backward_cl_resident]
// The backward: bn_backward_partials_cl's sums, one barrier, the tile's merge in every block
// (bn_backward_finalize's bits), then dx for the block's own rows (bn_backward_dx's arithmetic),
// from the last.
template <typename T, typename T_ACC, typename P, unsigned VEC>
__global__ void __launch_bounds__(COLUMN_THREADS)
    bn_backward_cl_resident(const T* DY, const T* X, T* DX, const float* mean, const float* save_invstd, const P* W,
                            Sums* part, int* bar, P* dweight, P* dbias, int64_t R, int64_t C, int64_t per_slice) {
  __shared__ Sums smem[COLUMN_THREADS * VEC];
  __shared__ float given[GradOut<P>::PARAMS * TILE_MAX];
  const GradOut<P> out{mean, save_invstd, W, dweight, dbias, nullptr};
  fetch_params(out, C, blockDim.x * VEC, given);
  columns_sums<T, VEC>(DY, X, mean, part, R, C, per_slice, smem);
  tile_barrier(bar + 2 * blockIdx.x, gridDim.y);
  float k[4][VEC];
  resident_coefs<VEC>(part, Sums{0.f, 0.f}, SumsAdd(), out, C, R, reinterpret_cast<float*>(smem), given, k);
  const int64_t c0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= C) return;
  constexpr unsigned ROWS = ResidentRows<VEC>::value;
  slice_rows_backwards<ROWS>(R, per_slice, [&](int64_t r, int64_t first, int64_t step) {
    float dy[ROWS][VEC], x[ROWS][VEC];
#pragma unroll
    for (unsigned u = 0; u < ROWS; ++u) {
      if (r - (int64_t)u * step >= first) {
        load_vec<VEC>(dy[u], DY + (r - (int64_t)u * step) * C + c0);
        load_vec<VEC>(x[u], X + (r - (int64_t)u * step) * C + c0);
      }
    }
#pragma unroll
    for (unsigned u = 0; u < ROWS; ++u) {
      if (r - (int64_t)u * step >= first) {
#pragma unroll
        for (unsigned j = 0; j < VEC; ++j) dy[u][j] = (dy[u][j] - k[1][j] - (x[u][j] - k[0][j]) * k[2][j]) * k[3][j];
        store_vec<VEC>(DX + (r - (int64_t)u * step) * C + c0, dy[u]);
      }
    }
  });
}
// --8<-- [end:bn_backward_cl_resident]

// --8<-- [start:bn_forward_held]
// One block per channel again, with the channel held in registers between the reduction and the
// elementwise pass, so that x (and, backward, dy) is read from memory once: the single read that
// cuDNN's bn_fw_tr_1C11_singleread and bn_bw_1C11_singleread are named for (their code is not
// public; this is ours). Word w of the channel's N * HW / VEC (VEC values; VEC > 1 where HW is a
// multiple of the 16-byte word) is word w / blockDim.x of thread w % blockDim.x, so a warp's loads
// cover consecutive words of a run; its sample is n = w / (HW / VEC). Every thread issues all its
// loads, a predicated load a word, before it uses any. The forward's statistics take two passes over
// the registers, the mean and then the squared deviations about it: nothing cancels, and there is no
// division per element, which Welford's update would take.
constexpr unsigned HELD_THREADS = 512;  // batchnorm_split.CHANNEL_THREADS

template <typename T, unsigned VEC, unsigned WORDS>
struct ChannelHeld {
  int at[WORDS];  // the word's first element, from the channel's first (the launcher: numel < 2^31)
  int words;      // the channel's
  __device__ __forceinline__ ChannelHeld(int64_t N, int64_t C, int64_t HW) {
    const int run = (int)(HW / VEC), stride = (int)(C * HW);
    words = (int)(N * HW / VEC);
#pragma unroll
    for (unsigned k = 0; k < WORDS; ++k) {
      const int w = (int)(k * blockDim.x + threadIdx.x), n = w / run;
      at[k] = n * stride + (w - n * run) * VEC;
    }
  }
  // word k is the channel's (the last threads' last words may not be)
  __device__ __forceinline__ bool in(unsigned k) const { return (int)(k * blockDim.x + threadIdx.x) < words; }
  // every word's load issued before any is used; a word outside the channel holds zeros
  __device__ __forceinline__ void load(const T* X, float (&v)[WORDS][VEC]) const {
    Vec<T, VEC> raw[WORDS];
#pragma unroll
    for (unsigned k = 0; k < WORDS; ++k) {
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) raw[k].v[j] = from_f<T>(0.f);
      if (in(k)) raw[k] = *reinterpret_cast<const Vec<T, VEC>*>(X + at[k]);
    }
#pragma unroll
    for (unsigned k = 0; k < WORDS; ++k)
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) v[k][j] = to_f(raw[k].v[j]);
  }
};

template <typename T, typename T_ACC, typename P, unsigned VEC, unsigned WORDS>
__global__ void __launch_bounds__(HELD_THREADS)
    bn_forward_held(const T* X, const P* W, const P* B, T* Y, float* save_mean, float* save_invstd,
                    P* running_mean, P* running_var, int64_t N, int64_t C, int64_t HW, T_ACC momentum, T_ACC eps) {
  __shared__ float red[2][32];
  const int64_t c = blockIdx.x, count = N * HW;
  const ChannelHeld<T, VEC, WORDS> ch(N, C, HW);
  float v[WORDS][VEC];
  ch.load(X + c * HW, v);
  float s = 0.f;
#pragma unroll
  for (unsigned k = 0; k < WORDS; ++k)
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) s += v[k][j];
  const float mean = block_all_reduce(s, 0.f, red[0], Sum()) / (float)count;
  float q = 0.f;
#pragma unroll
  for (unsigned k = 0; k < WORDS; ++k) {
    float qk = 0.f;
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) {
      const float d = v[k][j] - mean;
      qk += d * d;
    }
    q += ch.in(k) ? qk : 0.f;  // a zero word outside the channel is not a deviation
  }
  const Welford st{(float)count, mean, block_all_reduce(q, 0.f, red[1], Sum())};
  const float invstd = bn_invstd(st, count, eps);
  if (threadIdx.x == 0) bn_store_stats(st, invstd, c, count, momentum, save_mean, save_invstd, running_mean, running_var);
  const float scale = invstd * (W != nullptr ? to_f(W[c]) : 1.f), b = B != nullptr ? to_f(B[c]) : 0.f;
#pragma unroll
  for (unsigned k = 0; k < WORDS; ++k) {
    if (ch.in(k)) {
      float o[VEC];
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) o[j] = (v[k][j] - mean) * scale + b;
      store_vec<VEC>(Y + c * HW + ch.at[k], o);
    }
  }
}

// --8<-- [end:bn_forward_held]

// --8<-- [start:bn_backward_held]
// The backward of a held channel: x and dy held, their two sums, then dx from the registers.
template <typename T, typename T_ACC, typename P, unsigned VEC, unsigned WORDS>
__global__ void __launch_bounds__(HELD_THREADS)
    bn_backward_held(const T* DY, const T* X, const float* save_mean, const float* save_invstd, const P* W,
                     P* dweight, P* dbias, T* DX, int64_t N, int64_t C, int64_t HW) {
  __shared__ Sums smem[32];
  const int64_t c = blockIdx.x, count = N * HW;
  const ChannelHeld<T, VEC, WORDS> ch(N, C, HW);
  float x[WORDS][VEC], dy[WORDS][VEC];
  ch.load(DY + c * HW, dy);
  ch.load(X + c * HW, x);
  const float m = save_mean[c];
  Sums t{0.f, 0.f};
#pragma unroll
  for (unsigned k = 0; k < WORDS; ++k)
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) {
      t.dy += dy[k][j];  // zero outside the channel, so no test
      t.dyx += dy[k][j] * (x[k][j] - m);
    }
  t = block_tree_reduce(t, smem, SumsAdd());
  const float invstd = save_invstd[c];
  if (threadIdx.x == 0) {
    if (dweight != nullptr) dweight[c] = from_f<P>(t.dyx * invstd);
    if (dbias != nullptr) dbias[c] = from_f<P>(t.dy);
  }
  const DxCoef k = dx_coef(t, invstd, W != nullptr ? to_f(W[c]) : 1.f, count);
#pragma unroll
  for (unsigned w = 0; w < WORDS; ++w) {
    if (ch.in(w)) {
      float o[VEC];
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) o[j] = (dy[w][j] - k.mean_dy - (x[w][j] - m) * k.proj) * k.scale;
      store_vec<VEC>(DX + c * HW + ch.at[w], o);
    }
  }
}
// --8<-- [end:bn_backward_held]

}  // namespace ladder
