// Shared between quant-dot.cc (activations, decode-sized dot products) and quant-batch.cc
// (batched rows): this thread's quantised activations.
#pragma once
#include <cstdint>
#include <vector>

namespace ls {

/** Activations: int8 quants [T, cols], one scale per block, Σq per block (Q8_0) or per 16 (Q8_K). */
struct QuantActs {
  std::vector<int8_t> xs;
  std::vector<float> xd;
  std::vector<int32_t> xsum;
  std::vector<int16_t> bsum16;  // Q8_K only: Σq per 16 as i16 (|Σ| ≤ 16·127), for the decode kernels
};

/**
 * Rows [r0, r1) of out[T, rows] for Q4_K, Q5_K and Q6_K with T below kBatchedFrom, 8 rows per
 * pass (quant-decode-k.cc); false for other types (and builds without AVX2).
 */
bool quantDecodeK(int type, const uint8_t* w, const QuantActs& a, float* out, int rows, int cols, int T, int r0, int r1);

/** Regroup this thread's activations for quantRowsBatched (called by quantPrepare, T >= 8). */
void quantBatchPrepare(bool kQuant, const QuantActs& a, int cols, int T);
/** Whether quantRowsBatched runs here (AVX512-VNNI builds). */
bool quantBatchAvailable();
/** Rows [r0, r1) of out[T, rows] from the regrouped activations, 16 tokens per vector. */
void quantRowsBatched(int type, const uint8_t* w, float* out, int rows, int cols, int T, int r0, int r1);

}  // namespace ls
