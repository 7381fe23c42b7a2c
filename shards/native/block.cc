// One whole Llama block on a batch of T tokens in one parallel call, so a step costs one
// thread-pool dispatch per block instead of one per op, and no activation crosses into
// JavaScript between ops (decode, and prefill in pieces of up to Shard's maxStepRows). The call runs five phases; each phase is cut into
// shares that any participating thread claims from a shared counter, and a thread moves on
// to the next phase once every share of this one is done:
//   A  qkv rows = rmsnorm(x)·Wqkvᵀ (+ bias, qwen2), per-head RMSNorm of q and k rows (qwen3),
//      RoPE on q and k rows, k and v rows into the KV cache
//   B  attention, one (token, head) per share
//   C  x += att·Woᵀ (each share owns its rows of x)
//   D  gate/up rows of rmsnorm(x)·W13ᵀ, hb = silu(gate)·up for the share's hidden indices
//   E  x += hb·W2ᵀ
// Inputs a phase reads whole (the normalized and quantized x, att, hb) are prepared by every
// thread for itself, bit-identically, instead of in a serial phase. Every output element is
// computed by one share with the same code whatever thread runs it, so results do not depend
// on the thread count, and they equal the op-by-op path (shards/block.ts on the same kernels).
// A thread that never joins (asleep) costs nothing: the others claim all shares.
#include "block.h"

#include "batch.h"

#include <sched.h>

#include <cstring>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "matmul.h"
#include "ops.h"
#include "quant-dot.h"
#include "quant-layout.h"

namespace ls {

#if defined(__AVX512F__)
namespace {

constexpr int kPhases = 5;
constexpr int kSyncStride = 16;
// kBatchedFrom (batch.h): shards/options.ts NATIVE_BATCHED_FROM, as the host's matmul() uses it.

struct Desc {
  int q8, dim, kvDim, hidden, nHeads, nKvHeads, headDim, T, startPos;
  uint32_t x, attnNorm, ffnNorm;
  int64_t keys, values;  // BLOCK_DESC_KV_BYTE
  int64_t wqkv, wo, w13, w2;  // BLOCK_DESC_WEIGHTS_BYTE
  int kvHalf;
  uint32_t rope, scratch, sync;
  // Queries are qDim = nHeads * headDim wide (dim unless qwen3); bias, qNorm, kNorm are heap
  // offsets of [qDim + 2 kvDim] and [headDim] f32 vectors, 0 when the model has none.
  int qDim;
  uint32_t bias, qNorm, kNorm;
  double eps;
  int type[4];  // wqkv, wo, w13, w2
  bool hasWv;   // Wv separate from wqkv (its rows follow wqkv's in the output)
  int64_t wv;
  int wvType;
};

constexpr int kF32 = 0, kQ8 = 8;

Desc readDesc(const uint8_t* base, uint32_t at) {
  int32_t s[BLOCK_DESC_SLOTS];
  std::memcpy(s, base + at, sizeof s);
  Desc d;
  d.q8 = s[0], d.dim = s[1], d.kvDim = s[2], d.hidden = s[3], d.nHeads = s[4], d.nKvHeads = s[5];
  d.headDim = s[6], d.T = s[7], d.startPos = s[8];
  d.x = uint32_t(s[9]), d.attnNorm = uint32_t(s[10]), d.ffnNorm = uint32_t(s[11]);
  d.kvHalf = s[18];
  int64_t kv[2];
  std::memcpy(kv, base + at + BLOCK_DESC_KV_BYTE, sizeof kv);
  d.keys = kv[0], d.values = kv[1];
  d.rope = uint32_t(s[19]), d.scratch = uint32_t(s[20]), d.sync = uint32_t(s[21]);
  int32_t a[BLOCK_DESC_ARCH_SLOTS];
  std::memcpy(a, base + at + BLOCK_DESC_ARCH_BYTE, sizeof a);
  d.qDim = a[0], d.bias = uint32_t(a[1]), d.qNorm = uint32_t(a[2]), d.kNorm = uint32_t(a[3]);
  std::memcpy(&d.eps, base + at + BLOCK_DESC_EPS_BYTE, 8);
  int32_t t[6];
  std::memcpy(t, base + at + BLOCK_DESC_TYPES_BYTE, sizeof t);
  for (int i = 0; i < 4; i++) d.type[i] = t[i];
  d.hasWv = t[4] != 0, d.wvType = t[5];
  int64_t wt[5];
  std::memcpy(wt, base + at + BLOCK_DESC_WEIGHTS_BYTE, sizeof wt);
  d.wqkv = wt[0], d.wo = wt[1], d.w13 = wt[2], d.w2 = wt[3], d.wv = wt[4];
  return d;
}

// Per-thread prepared inputs (the same bits on every thread).
struct Input {
  std::vector<float> xf;  // [T, cols] f32 input (normalized x for A and D)
  std::vector<int8_t> xs;
  std::vector<int32_t> xsum;
  std::vector<float> xd;
  std::vector<float> tmp;  // matvec output before the residual add / swiglu
};
thread_local Input tl;
thread_local std::vector<float> tlAtt;

// The input of a phase in every format its matrices (types a, b; −1: none) multiply.
void prepare(const Desc& d, const float* src, const float* norm, int cols, int a, int b = -1) {
  tl.xf.resize(size_t(d.T) * cols);
  for (int t = 0; t < d.T; t++) {
    if (norm) rmsnormRow(tl.xf.data() + size_t(t) * cols, src + size_t(t) * cols, norm, cols, d.eps);
    else std::memcpy(tl.xf.data() + size_t(t) * cols, src + size_t(t) * cols, size_t(cols) * 4);
  }
  bool f32 = false, q8 = false;
  for (const int type : {a, b}) {
    if (type == kF32) f32 = true;
    else if (type == kQ8) q8 = true;
    else if (type > 0) quantPrepare(baseType(type), tl.xf.data(), cols, d.T);
  }
  if (f32 && d.T >= kBatchedFrom) matmulFPrepare(tl.xf.data(), cols, d.T);
  if (!q8) return;
  const int nb = cols / 32;
  tl.xs.resize(size_t(d.T) * cols);
  tl.xsum.resize(size_t(d.T) * nb);
  tl.xd.resize(size_t(d.T) * nb);
  for (int t = 0; t < d.T; t++)
    quantizeRowQ8(tl.xf.data() + size_t(t) * cols, tl.xs.data() + size_t(t) * cols, tl.xd.data() + size_t(t) * nb,
                  tl.xsum.data() + size_t(t) * nb, cols, decodeQ8Bias());
  if (d.T >= kBatchedFrom) matmulQ8Prepare(tl.xs.data(), tl.xd.data(), cols, d.T);
}

// Rows [r0, r1) of out[T, rows] (stride rows) from the prepared input: the decode kernels
// below 8 tokens, the batched ones (on activations regrouped once by prepare) from 8 on,
// exactly as the op-by-op path picks them; block types through quant-dot.cc (wRows: its own rows).
void matvec(const Desc& d, int type, const uint8_t* w, float* out, int rows, int cols, int r0, int r1, int wRows) {
  if (type != kF32 && type != kQ8) {
    quantRows(type, w, tl.xf.data(), out, rows, cols, d.T, r0, r1, wRows);
  } else if (d.T >= kBatchedFrom) {
    if (type == kQ8) matmulQ8Rows(w, out, rows, cols, d.T, r0, r1);
    else matmulFRows(w, false, tl.xf.data(), out, rows, cols, d.T, r0, r1);
  } else if (type == kQ8) {
    decodeQ8Prepared(w, tl.xs.data(), tl.xsum.data(), tl.xd.data(), out, rows, cols, d.T, r0, r1);
  } else {
    decodeF32(reinterpret_cast<const float*>(w), tl.xf.data(), out, rows, cols, d.T, r0, r1);
  }
}

// Rows [r0, r1) of the qkv projection: wqkv's rows, then (when Wv is separate) Wv's.
void matvecQkv(const Desc& d, uint8_t* base, float* out, int rows, int cols, int r0, int r1) {
  const int split = d.hasWv ? d.qDim + d.kvDim : rows;
  if (r0 < split) matvec(d, d.type[0], base + d.wqkv, out, rows, cols, r0, r1 < split ? r1 : split, split);
  if (r1 > split) {
    // Wv's own row numbering, written from column `split` of out (the kernels use rows only
    // as out's row stride).
    const int v0 = r0 > split ? r0 - split : 0;
    matvec(d, d.wvType, base + d.wv, out + split, rows, cols, v0, r1 - split, rows - split);
  }
}

inline void spinUntil(int32_t* counter, int target) {
  for (int spins = 0; __atomic_load_n(counter, __ATOMIC_ACQUIRE) < target;) {
    _mm_pause();
    // A descheduled peer holds a share: let it run instead of burning its core.
    if (++spins >= 2048) {
      sched_yield();
      spins = 0;
    }
  }
}

// Shares of a phase's rows, shrinking (guided self-scheduling, Polychronopoulos & Kuck 1987):
// each is 1/(2n) of the rows still unassigned, in multiples of 16 (the decode kernels' tile;
// also keeps RoPE pairs and heads inside a share), so the phase ends on small shares and a
// thread waits at the barrier for a few microseconds at most. The cut depends only on the
// rows and n, never on which thread claims what.
// With per-head Q/K norms the qkv phase cuts in whole heads instead (gran = lcm(16, headDim)),
// so one share holds every row a head's norm reads.
struct Shares {
  int rows, n, gran, next = 0, at = 0;
  Shares(int rows_, int n_, int gran_ = 16) : rows(rows_), n(n_), gran(gran_) {}
  int size(int r) const {
    const int per = (rows - r + 2 * n - 1) / (2 * n);
    return per < gran ? gran : (per + gran - 1) / gran * gran;
  }
  /** Rows [r0, r1) of share s (s never below a previous call's), false past the last. */
  bool get(int s, int& r0, int& r1) {
    while (next < s && at < rows) at += size(at), next++;
    if (at >= rows) return false;
    r0 = at;
    r1 = at + size(at) < rows ? at + size(at) : rows;
    return true;
  }
  int count() const {
    int k = 0;
    for (int r = 0; r < rows; r += size(r)) k++;
    return k;
  }
};

void runBlock(uint8_t* base, uint32_t descAt, int n);

}  // namespace

void blockTask(uint8_t* base, uint32_t descAt, int count, int n) {
  // Blocks run one after another: the last phase's barrier leaves x complete for the next.
  for (int i = 0; i < (count > 0 ? count : 1); i++) runBlock(base, descAt + uint32_t(i) * BLOCK_DESC_BYTES, n);
}

namespace {

void runBlock(uint8_t* base, uint32_t descAt, int n) {
  const Desc d = readDesc(base, descAt);
  int32_t* sync = reinterpret_cast<int32_t*>(base + d.sync);
  float* x = reinterpret_cast<float*>(base + d.x);
  const int T = d.T, dim = d.dim, kvDim = d.kvDim, hidden = d.hidden, hd = d.headDim, qDim = d.qDim;
  const int qkvRows = qDim + 2 * kvDim;
  float* qkv = reinterpret_cast<float*>(base + d.scratch);
  float* att = qkv + size_t(T) * qkvRows;
  float* hb = att + size_t(T) * qDim;
  const float* bias = d.bias ? reinterpret_cast<const float*>(base + d.bias) : nullptr;
  const float* qNorm = d.qNorm ? reinterpret_cast<const float*>(base + d.qNorm) : nullptr;
  const float* kNorm = d.kNorm ? reinterpret_cast<const float*>(base + d.kNorm) : nullptr;
  int headGran = 16;
  if (qNorm || kNorm) {
    while (headGran % hd != 0) headGran += 16;
  }
  const int half = hd / 2;
  const double* ropeCos = reinterpret_cast<const double*>(base + d.rope);
  const double* ropeSin = ropeCos + size_t(T) * half;
  const int sizes[kPhases] = {qkvRows, T * d.nHeads, dim, hidden, dim};
  for (int phase = 0; phase < kPhases; phase++) {
    int32_t* claim = sync + phase * 2 * kSyncStride;
    int32_t* done = claim + kSyncStride;
    Shares cut(sizes[phase], n, phase == 0 ? headGran : 16);
    const int shares = phase == 1 ? sizes[phase] : cut.count();
    bool prepared = false;
    for (;;) {
      const int s = __atomic_fetch_add(claim, 1, __ATOMIC_ACQ_REL);
      if (s >= shares) break;
      int r0 = s, r1 = s + 1;
      if (phase != 1) cut.get(s, r0, r1);
      if (phase == 0) {
        if (!prepared) prepare(d, x, reinterpret_cast<const float*>(base + d.attnNorm), dim, d.type[0], d.hasWv ? d.wvType : -1);
        matvecQkv(d, base, qkv, qkvRows, dim, r0, r1);
        for (int t = 0; t < T; t++) {
          float* row = qkv + size_t(t) * qkvRows;
          // The op-by-op order (shards/block.ts): bias add in f32, per-head norms, then RoPE.
          if (bias)
            for (int r = r0; r < r1; r++) row[r] = row[r] + bias[r];
          for (int r = r0; r < r1 && r < qDim + kvDim; r += hd) {
            const float* w = r < qDim ? qNorm : kNorm;
            if (w) rmsnormRow(row + r, row + r, w, hd, d.eps);
          }
          const double* c = ropeCos + size_t(t) * half;
          const double* sn = ropeSin + size_t(t) * half;
          for (int r = r0; r < r1 && r < qDim + kvDim; r += 2) {
            const int j = (r % hd) / 2;
            const double v0 = row[r], v1 = row[r + 1];
            row[r] = float(v0 * c[j] - v1 * sn[j]);
            row[r + 1] = float(v0 * sn[j] + v1 * c[j]);
          }
          const size_t at = size_t(d.startPos + t) * kvDim;
          for (int r = r0 > qDim ? r0 : qDim; r < r1; r++) {
            const bool isV = r >= qDim + kvDim;
            const size_t e = at + (r - qDim - (isV ? kvDim : 0));
            uint8_t* dst = base + (isV ? d.values : d.keys);
            if (d.kvHalf) reinterpret_cast<uint16_t*>(dst)[e] = floatToHalf(row[r]);
            else reinterpret_cast<float*>(dst)[e] = row[r];
          }
        }
      } else if (phase == 1) {
        const int t = s / d.nHeads, h = s % d.nHeads;
        const int len = d.startPos + t + 1;
        tlAtt.resize(size_t(len + 3) & ~size_t(3));
        const size_t ko = size_t(h / (d.nHeads / d.nKvHeads)) * hd;
        const size_t eb = d.kvHalf ? 2 : 4;
        attentionHead(qkv + size_t(t) * qkvRows + size_t(h) * hd, base + d.keys + ko * eb, base + d.values + ko * eb, d.kvHalf != 0,
                      att + size_t(t) * qDim + size_t(h) * hd, len, kvDim, hd, tlAtt.data());
      } else if (phase == 2 || phase == 4) {
        const int cols = phase == 2 ? qDim : hidden;
        const int type = d.type[phase == 2 ? 1 : 3];
        if (!prepared) prepare(d, phase == 2 ? att : hb, nullptr, cols, type);
        tl.tmp.resize(size_t(T) * dim);
        matvec(d, type, base + (phase == 2 ? d.wo : d.w2), tl.tmp.data(), dim, cols, r0, r1, dim);
        for (int t = 0; t < T; t++)
          for (int r = r0; r < r1; r++) x[size_t(t) * dim + r] = x[size_t(t) * dim + r] + tl.tmp[size_t(t) * dim + r];
      } else {
        if (!prepared) prepare(d, x, reinterpret_cast<const float*>(base + d.ffnNorm), dim, d.type[2]);
        tl.tmp.resize(size_t(T) * 2 * hidden);
        matvec(d, d.type[2], base + d.w13, tl.tmp.data(), 2 * hidden, dim, r0, r1, 2 * hidden);
        matvec(d, d.type[2], base + d.w13, tl.tmp.data(), 2 * hidden, dim, hidden + r0, hidden + r1, 2 * hidden);
        for (int t = 0; t < T; t++) {
          const float* g = tl.tmp.data() + size_t(t) * 2 * hidden;
          for (int i = r0; i < r1; i++) {
            const double gv = g[i];
            hb[size_t(t) * hidden + i] = float((gv / (1.0 + jsExp(-gv))) * double(g[hidden + i]));
          }
        }
      }
      prepared = true;
      __atomic_fetch_add(done, 1, __ATOMIC_ACQ_REL);
    }
    spinUntil(done, shares);
  }
}

}  // namespace

bool blockAvailable() { return decodeAvailable(true) && decodeAvailable(false); }
#else
void blockTask(uint8_t*, uint32_t, int, int) {}
bool blockAvailable() { return false; }
#endif

}  // namespace ls
