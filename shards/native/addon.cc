// Node-API entry points of the native kernels. The host (shards/kernels-wasm/) writes the op
// and its arguments into the argument block of the shared WebAssembly memory, exactly as for
// the WebAssembly task(); task(base, tid, n) runs share tid of n on the calling thread.
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#include <napi.h>

#include <cstdint>
#include <cstring>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "batch.h"
#include "block.h"
#include "matmul.h"
#include "ops.h"
#include "quant-dot.h"
#include "quant-layout.h"

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
  // Matmuls: slot 15 = 1 when the weights live in a native buffer (allocBuffer) past the
  // WebAssembly heap; slots 13/14 then hold their address as an i64 distance from base.
  if (a[15] == 1) {
    int64_t delta;
    const uint32_t lohi[2] = {a[13], a[14]};
    std::memcpy(&delta, lohi, 8);
    base += delta;  // only the weight operand is read through it below
    if (op == kMatmulQuant) {
      const int code = int(a[3]), type = ls::baseType(code);
      uint8_t* heap = base - delta;
      const float* x = reinterpret_cast<const float*>(heap + a[2]);
      if (!ls::quantAvailable(type) || ls::quantRowBytes(type, cols) == 0) {
        Napi::Error::New(env, "native kernels: unsupported block type").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      ls::quantPrepare(type, x, cols, T);
      ls::quantRows(code, base, x, out, rows, cols, T, r0, r1, rows);
    } else if (op == kMatmulQ8) {
      uint8_t* heap = base - delta;
      const int16_t* xq = reinterpret_cast<const int16_t*>(heap + a[2]);
      const float* xd = reinterpret_cast<const float*>(heap + a[3]);
      if (T < ls::kBatchedFrom && ls::decodeAvailable(true)) ls::decodeQ8(base, xq, xd, out, rows, cols, T, r0, r1);
      else ls::matmulQ8(base, xq, xd, out, rows, cols, T, r0, r1);
    } else if (op == kMatmulF32 && T < ls::kBatchedFrom && ls::decodeAvailable(false)) {
      ls::decodeF32(reinterpret_cast<const float*>(base), reinterpret_cast<const float*>(base - delta + a[2]), out, rows, cols, T, r0, r1);
    } else if (op == kMatmulF32 || op == kMatmulF16) {
      ls::matmulF(base, op == kMatmulF16, reinterpret_cast<const float*>(base - delta + a[2]), out, rows, cols, T, r0, r1);
    } else {
      Napi::Error::New(env, "native kernels: unsupported op").ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }
  // T < kBatchedFrom: the decode kernels (decode.cc); the host only sends these ops when decodeF32/decodeQ8.
  if (op == kMatmulQuant) {
    // slot 3: the ggml type (quant-dot.h), with kRows8 for a repacked matrix (quant-layout.h);
    // every thread quantises the activations itself (the same bits), then computes its rows.
    const int code = int(a[3]), type = ls::baseType(code);
    if (!ls::quantAvailable(type) || ls::quantRowBytes(type, cols) == 0) {
      Napi::Error::New(env, "native kernels: unsupported block type").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    const float* x = reinterpret_cast<const float*>(base + a[2]);
    ls::quantPrepare(type, x, cols, T);
    ls::quantRows(code, base + a[1], x, out, rows, cols, T, r0, r1, rows);
  } else if (T < ls::kBatchedFrom && op == kMatmulQ8 && ls::decodeAvailable(true)) {
    ls::decodeQ8(base + a[1], reinterpret_cast<const int16_t*>(base + a[2]), reinterpret_cast<const float*>(base + a[3]), out, rows, cols, T, r0, r1);
  } else if (T < ls::kBatchedFrom && op == kMatmulF32 && ls::decodeAvailable(false)) {
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

// allocBuffer(bytes): a zeroed native buffer (anonymous mmap, huge pages advised) for weights
// that do not fit the 4 GiB WebAssembly heap; unmapped when the ArrayBuffer is collected. One
// inaccessible page follows the mapping, so a kernel reading past a buffer whose size is a
// whole number of pages faults every time rather than whenever the next page happens to be
// unmapped (test/shards/native-guard.test.ts).
Napi::Value AllocBuffer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double want = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
  if (!(want > 0) || want > 9.0e15) {
    Napi::RangeError::New(env, "allocBuffer(bytes): bytes must be a positive integer").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t bytes = size_t(want);
#if defined(__linux__)
  const size_t page = 4096, mapped = (bytes + page - 1) / page * page + page;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    Napi::Error::New(env, "allocBuffer: out of memory").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  mprotect(static_cast<uint8_t*>(p) + mapped - page, page, PROT_NONE);
#if defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);
#endif
  // Tell V8 the bytes exist, so that dropped buffers (a closed session's KV layers) are
  // collected, and unmapped, as the process's memory grows rather than whenever.
  Napi::MemoryManagement::AdjustExternalMemory(env, int64_t(bytes));
  return Napi::ArrayBuffer::New(env, p, bytes, [](Napi::Env e, void* data, size_t* len) {
    munmap(data, len[1]);
    Napi::MemoryManagement::AdjustExternalMemory(e, -int64_t(len[0]));
    delete[] len;
  }, new size_t[2]{bytes, mapped});
#else
  Napi::Error::New(env, "allocBuffer: not available on this platform").ThrowAsJavaScriptException();
  return env.Undefined();
#endif
}

// addressOf(view): the address of a typed array's first byte, as a number (exact below 2^53).
Napi::Value AddressOf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsTypedArray()) {
    Napi::TypeError::New(env, "addressOf(view: TypedArray)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  // napi_get_typedarray_info's data pointer (views of a SharedArrayBuffer too, unlike the
  // array buffer's own info).
  napi_typedarray_type type;
  size_t length, offset;
  void* data = nullptr;
  napi_value buffer;
  if (napi_get_typedarray_info(env, info[0], &type, &length, &data, &buffer, &offset) != napi_ok) return env.Undefined();
  return Napi::Number::New(env, double(reinterpret_cast<uintptr_t>(data)));
}

// repackRows8(view, type, rows, cols): rearrange the Q4_K/Q5_K/Q6_K matrix the view holds into
// the rows8 layout in place (quant-layout.h); false (view untouched) for other types or shapes.
Napi::Value RepackRows8(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    Napi::TypeError::New(env, "repackRows8(view: Uint8Array, type, rows, cols)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Uint8Array view = info[0].As<Napi::Uint8Array>();
  const int type = info[1].As<Napi::Number>().Int32Value(), rows = info[2].As<Napi::Number>().Int32Value();
  const int cols = info[3].As<Napi::Number>().Int32Value();
  const size_t rb = ls::quantRowBytes(type, cols);
  if (rows < 0 || rb == 0 || view.ByteLength() < rb * size_t(rows)) return Napi::Boolean::New(env, false);
  return Napi::Boolean::New(env, ls::repackRows8(type, view.Data(), rows, cols));
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
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD) && defined(__linux__)
  ok = ok && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;  // SDOT (neon-q8.cc)
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
  exports.Set("repackRows8", Napi::Function::New(env, RepackRows8));
  exports.Set("adviseHugePages", Napi::Function::New(env, AdviseHugePages));
  exports.Set("batchedFrom", Napi::Number::New(env, ls::kBatchedFrom));
  exports.Set("allocBuffer", Napi::Function::New(env, AllocBuffer));
  exports.Set("addressOf", Napi::Function::New(env, AddressOf));
  return exports;
}

}  // namespace

NODE_API_MODULE(layerswarm_kernels, Init)
