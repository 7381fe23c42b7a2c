// Node-API entry points of the native kernels. The host (shards/kernels-wasm/) writes the op
// and its arguments into the argument block of the shared WebAssembly memory, exactly as for
// the WebAssembly task(); task(base, tid, n) runs share tid of n on the calling thread.
#include <napi.h>

#include <cstdint>
#include <cstring>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "block.h"
#include "matmul.h"
#include "ops.h"
#include "quant-dot.h"

namespace {

constexpr size_t kArgs = 256;  // shards/kernels-wasm/layout.ts ARGS_OFFSET
constexpr int kMatmulF32 = 1, kMatmulF16 = 2, kMatmulQ8 = 3, kDecodeBlock = 7, kMatmulQuant = 8;

int chunk(int rows, int tid, int n) {
  const int per = ((rows + n - 1) / n + 3) & ~3;
  const int v = tid * per;
  return v < rows ? v : rows;
}

Napi::Value Task(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    Napi::TypeError::New(env, "task(base: Uint8Array, tid, n)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  // The view's own data pointer: its buffer is a SharedArrayBuffer, which napi_get_arraybuffer_info
  // rejects, while napi_get_typedarray_info (used by Uint8Array::Data) accepts it.
  uint8_t* base = info[0].As<Napi::Uint8Array>().Data();
  const int tid = info[1].As<Napi::Number>().Int32Value();
  const int n = info[2].As<Napi::Number>().Int32Value();
  uint32_t a[16];
  std::memcpy(a, base + kArgs, sizeof a);
  const int op = int(a[0]);
  if (op == kDecodeBlock) {
    // slot 1: the first block descriptor (block.h), slot 2: the number of blocks; shares are
    // claimed inside, tid does not matter
    if (ls::blockAvailable()) ls::blockTask(base, a[1], int(a[2]), n);
    else Napi::Error::New(env, "native kernels: no fused block in this build").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const int rows = int(a[5]), cols = int(a[6]), T = int(a[7]);
  const int r0 = chunk(rows, tid, n), r1 = chunk(rows, tid + 1, n);
  if (r0 >= r1) return env.Undefined();
  float* out = reinterpret_cast<float*>(base + a[4]);
  // T < 8: the decode kernels (decode.cc); the host only sends these ops when decodeF32/decodeQ8.
  if (op == kMatmulQuant) {
    // slot 3: the ggml type (quant-dot.h); every thread quantises the activations itself (the
    // same bits), then computes its rows.
    const int type = int(a[3]);
    if (!ls::quantAvailable(type) || ls::quantRowBytes(type, cols) == 0) {
      Napi::Error::New(env, "native kernels: unsupported block type").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    const float* x = reinterpret_cast<const float*>(base + a[2]);
    ls::quantPrepare(type, x, cols, T);
    ls::quantRows(type, base + a[1], x, out, rows, cols, T, r0, r1);
  } else if (T < 8 && op == kMatmulQ8 && ls::decodeAvailable(true)) {
    ls::decodeQ8(base + a[1], reinterpret_cast<const int16_t*>(base + a[2]), reinterpret_cast<const float*>(base + a[3]), out, rows, cols, T, r0, r1);
  } else if (T < 8 && op == kMatmulF32 && ls::decodeAvailable(false)) {
    ls::decodeF32(reinterpret_cast<const float*>(base + a[1]), reinterpret_cast<const float*>(base + a[2]), out, rows, cols, T, r0, r1);
  } else if (op == kMatmulF32 || op == kMatmulF16) {
    ls::matmulF(base + a[1], op == kMatmulF16, reinterpret_cast<const float*>(base + a[2]), out, rows, cols, T, r0, r1);
  } else if (op == kMatmulQ8) {
    ls::matmulQ8(base + a[1], reinterpret_cast<const int16_t*>(base + a[2]), reinterpret_cast<const float*>(base + a[3]), out, rows, cols, T, r0, r1);
  } else {
    Napi::Error::New(env, "native kernels: unsupported op").ThrowAsJavaScriptException();
  }
  return env.Undefined();
}

// adviseHugePages(base, offset, bytes): ask Linux to back the 2 MiB-aligned part of the range
// of the shared memory with transparent huge pages (MADV_HUGEPAGE; honoured where THP is
// "madvise" or "always"). Decode streams every weight byte once per token, 8-16 rows at a
// time: with 4 KiB pages, TLB misses and the hardware prefetchers' stops at page boundaries
// cost ~15 % of decode speed here (110m Q8_0, same process A/B). Only advice: false where it
// does not apply, never an error.
Napi::Value AdviseHugePages(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (info.Length() < 3 || !info[0].IsTypedArray()) return Napi::Boolean::New(env, false);
  const uintptr_t base = reinterpret_cast<uintptr_t>(info[0].As<Napi::Uint8Array>().Data());
  const uintptr_t huge = uintptr_t(2) << 20;
  const uintptr_t from = (base + uintptr_t(info[1].As<Napi::Number>().Int64Value()) + huge - 1) & ~(huge - 1);
  const uintptr_t to = (base + uintptr_t(info[1].As<Napi::Number>().Int64Value()) + uintptr_t(info[2].As<Napi::Number>().Int64Value())) & ~(huge - 1);
  if (to <= from) return Napi::Boolean::New(env, false);
  return Napi::Boolean::New(env, madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE) == 0);
#else
  return Napi::Boolean::New(env, false);
#endif
}

// The fused block's port of V8's Math.exp, exposed so a test can compare it with Math.exp.
Napi::Value JsExp(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), ls::jsExp(info[0].As<Napi::Number>().DoubleValue()));
}

// The addon is built with -march=native; refuse to run on a CPU without those features
// (a copied node_modules), so the loader falls back to WebAssembly.
Napi::Value SelfTest(const Napi::CallbackInfo& info) {
  bool ok = true;
#if defined(__x86_64__)
  __builtin_cpu_init();
#if defined(__AVX512VNNI__)
  ok = ok && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#endif
#if defined(__AVX2__)
  ok = ok && __builtin_cpu_supports("avx2");
#endif
#if defined(__AVX512F__)
  ok = ok && __builtin_cpu_supports("avx512f");
#endif
#if defined(__AVX512VL__)
  ok = ok && __builtin_cpu_supports("avx512vl");
#endif
#if defined(__AVXVNNI__)
  ok = ok && __builtin_cpu_supports("avxvnni");
#endif
#endif
  return Napi::Boolean::New(info.Env(), ok);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("task", Napi::Function::New(env, Task));
  exports.Set("selfTest", Napi::Function::New(env, SelfTest));
  exports.Set("isa", Napi::String::New(env, ls::isa()));
  exports.Set("decodeQ8", Napi::Boolean::New(env, ls::decodeAvailable(true)));
  exports.Set("quantTypes", Napi::Boolean::New(env, ls::quantAvailable(ls::kTypeQ4_K)));
  exports.Set("decodeF32", Napi::Boolean::New(env, ls::decodeAvailable(false)));
  exports.Set("fusedBlock", Napi::Boolean::New(env, ls::blockAvailable()));
  exports.Set("jsExp", Napi::Function::New(env, JsExp));
  exports.Set("adviseHugePages", Napi::Function::New(env, AdviseHugePages));
  return exports;
}

}  // namespace

NODE_API_MODULE(layerswarm_kernels, Init)
