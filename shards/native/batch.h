// The batch size from which matmuls take the batched kernels (below it, the decode kernels):
// NATIVE_BATCHED_FROM of shards/options.ts, which build.mjs reads and passes as
// LS_BATCHED_FROM, so TypeScript and C++ share one definition.
#pragma once

#ifndef LS_BATCHED_FROM
#error "LS_BATCHED_FROM comes from shards/options.ts NATIVE_BATCHED_FROM through shards/native/build.mjs"
#endif

namespace ls {
constexpr int kBatchedFrom = LS_BATCHED_FROM;
}  // namespace ls
