// A span of transformer blocks run by ggml (issue 32): weights uploaded once from the GGUF into a
// backend buffer, one KV cache per session in backend buffers, and one graph per step built top
// to bottom like shards/block.ts. Only ggml's public API (the vendored headers in include/);
// the libraries come from @node-llama-cpp/<platform>@3.21.1 and are opened at run time
// (span-load.cc), so every ggml_* call below binds lazily once they are loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "include/ggml-alloc.h"
#include "include/ggml-backend.h"
#include "include/ggml.h"

namespace lsg {

/** The span's hyperparameters, from the engine's ModelConfig (shards/types.ts). */
struct SpanConfig {
  std::string path;
  int start = 0, end = 0;
  int dim = 0, hiddenDim = 0, nHeads = 0, nKvHeads = 0, headDim = 0, seqLen = 0;
  float rmsEps = 1e-5f, ropeTheta = 10000.f, ropeFreqScale = 1.f;
  int ropeMode = 0;  // GGML_ROPE_TYPE_NORMAL (llama) or GGML_ROPE_TYPE_NEOX (qwen2, qwen3)
  bool qkvBias = false, qkNorm = false;
  std::vector<float> freqFactors;  // llama3 rope_freqs, empty when none
  ggml_type kvType = GGML_TYPE_F16;
  int device = 0;  // index into ggml_backend_dev_get
  int threads = 0;  // CPU backend threads, 0: ggml's default
};

struct Layer {
  ggml_tensor *attnNorm = nullptr, *wq = nullptr, *wk = nullptr, *wv = nullptr;
  ggml_tensor *bq = nullptr, *bk = nullptr, *bv = nullptr, *qNorm = nullptr, *kNorm = nullptr;
  ggml_tensor *wo = nullptr, *ffnNorm = nullptr, *w1 = nullptr, *w3 = nullptr, *w2 = nullptr;
};

struct Session {
  ggml_context* ctx = nullptr;
  ggml_backend_buffer_t buf = nullptr;
  std::vector<ggml_tensor*> k, v;  // per block [kvDim, maxLength] in kvType
  int maxLength = 0;
};

/** One session's rows in a step (forward runs several sessions' rows through one graph). */
struct StepPart {
  Session* session;
  int rows;
  int startPos;
};

class Span {
 public:
  explicit Span(const SpanConfig& c);
  ~Span();
  /** Empty when the span loaded, else why not. */
  const std::string& error() const { return error_; }
  size_t weightBytes() const { return weightBytes_; }
  std::string deviceName() const;

  std::string openSession(int id, int maxLength);
  bool closeSession(int id);
  Session* session(int id);
  /** Rows of every part, back to back in x ([Σ rows, dim], f32), replaced by the span's output. */
  std::string forward(const std::vector<StepPart>& parts, float* x);
  /** exportKv / importKv bytes (shards/kv-cache.ts layout) of positions [from, from + n). */
  void readKv(Session& s, int from, int n, uint8_t* out) const;
  void writeKv(Session& s, int from, int n, const uint8_t* data);
  size_t kvRowBytes() const;

 private:
  bool loadWeights();
  ggml_tensor* block(ggml_context* ctx, ggml_cgraph* gf, int l, ggml_tensor* cur, ggml_tensor* pos,
                     const std::vector<ggml_tensor*>& masks, const std::vector<StepPart>& parts);

  SpanConfig c_;
  std::string error_;
  ggml_backend_dev_t dev_ = nullptr;
  ggml_backend_t backend_ = nullptr;
  ggml_context* wctx_ = nullptr;
  ggml_backend_buffer_t wbuf_ = nullptr;
  ggml_tensor* freqFactors_ = nullptr;
  ggml_gallocr_t galloc_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<uint8_t> meta_;
  std::map<int, Session> sessions_;
  size_t weightBytes_ = 0;
  int graphSize_ = 0;
};

/** dlopen libggml-base and libggml (RTLD_GLOBAL), then load the backends in `dir`. */
std::string loadLibraries(const std::string& base, const std::string& ggml, const std::string& dir);
bool librariesLoaded();

}  // namespace lsg
