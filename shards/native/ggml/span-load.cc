// Opening ggml at run time and uploading a span's weights (issue 32).
// The addon is linked with -z lazy and without libggml: its ggml_* references resolve on first
// call against the libraries loadLibraries opens with RTLD_GLOBAL, so the addon builds and
// loads on machines without the package, and the JS side calls nothing before loading.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "include/gguf.h"
#include "span.h"

namespace lsg {

namespace {
bool loaded = false;
// ggml logs every backend it loads and each buffer it makes to stderr; a node's stderr is for
// its own coded lines, so only ggml's errors pass.
void quietLog(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}
}  // namespace

bool librariesLoaded() { return loaded; }

std::string loadLibraries(const std::string& base, const std::string& ggml, const std::string& dir) {
  if (loaded) return "";
  if (!dlopen(base.c_str(), RTLD_NOW | RTLD_GLOBAL)) return std::string("cannot open ") + base + ": " + dlerror();
  if (!dlopen(ggml.c_str(), RTLD_NOW | RTLD_GLOBAL)) return std::string("cannot open ") + ggml + ": " + dlerror();
  loaded = true;
  ggml_log_set(quietLog, nullptr);
  // The CPU variants (libggml-cpu-haswell.so, …: ggml scores each against this CPU) and any GPU
  // backend library of the package.
  ggml_backend_load_all_from_path(dir.c_str());
  return "";
}

/** A read-only mapping of the whole file (weights are copied from it once, then it is unmapped). */
struct Mapped {
  void* at = MAP_FAILED;
  size_t bytes = 0;
  explicit Mapped(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      bytes = size_t(st.st_size);
      at = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    }
    close(fd);
  }
  ~Mapped() {
    if (at != MAP_FAILED) munmap(at, bytes);
  }
};

bool Span::loadWeights() {
  ggml_context* meta = nullptr;
  gguf_init_params gp = {true, &meta};
  gguf_context* g = gguf_init_from_file(c_.path.c_str(), gp);
  if (!g) {
    error_ = "ggml could not read the GGUF header of " + c_.path;
    return false;
  }
  const int n = c_.end - c_.start;
  const size_t tensors = size_t(n) * 14 + 1;
  ggml_init_params ip = {ggml_tensor_overhead() * tensors, nullptr, true};
  wctx_ = ggml_init(ip);
  layers_.resize(n);
  struct Pending {
    ggml_tensor* t;
    size_t offset;
  };
  std::vector<Pending> pending;
  const size_t dataOffset = gguf_get_data_offset(g);
  auto take = [&](int l, const char* name, bool required) -> ggml_tensor* {
    char full[128];
    snprintf(full, sizeof full, "blk.%d.%s", c_.start + l, name);
    const int64_t id = gguf_find_tensor(g, full);
    if (id < 0) {
      if (required && error_.empty()) error_ = std::string("tensor ") + full + " is missing from " + c_.path;
      return nullptr;
    }
    ggml_tensor* t = ggml_dup_tensor(wctx_, ggml_get_tensor(meta, full));
    ggml_set_name(t, full);
    pending.push_back({t, dataOffset + gguf_get_tensor_offset(g, id)});
    return t;
  };
  for (int l = 0; l < n; l++) {
    Layer& L = layers_[l];
    L.attnNorm = take(l, "attn_norm.weight", true);
    L.wq = take(l, "attn_q.weight", true);
    L.wk = take(l, "attn_k.weight", true);
    L.wv = take(l, "attn_v.weight", true);
    if (c_.qkvBias) {
      L.bq = take(l, "attn_q.bias", true);
      L.bk = take(l, "attn_k.bias", true);
      L.bv = take(l, "attn_v.bias", true);
    }
    if (c_.qkNorm) {
      L.qNorm = take(l, "attn_q_norm.weight", true);
      L.kNorm = take(l, "attn_k_norm.weight", true);
    }
    L.wo = take(l, "attn_output.weight", true);
    L.ffnNorm = take(l, "ffn_norm.weight", true);
    L.w1 = take(l, "ffn_gate.weight", true);
    L.w3 = take(l, "ffn_up.weight", true);
    L.w2 = take(l, "ffn_down.weight", true);
  }
  if (!c_.freqFactors.empty()) freqFactors_ = ggml_new_tensor_1d(wctx_, GGML_TYPE_F32, int64_t(c_.freqFactors.size()));
  if (error_.empty()) {
    wbuf_ = ggml_backend_alloc_ctx_tensors(wctx_, backend_);
    if (!wbuf_) error_ = "could not allocate the span's weights on " + deviceName();
  }
  if (error_.empty()) {
    ggml_backend_buffer_set_usage(wbuf_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    Mapped file(c_.path);
    if (file.at == MAP_FAILED) error_ = "cannot map " + c_.path;
    for (const Pending& p : pending) {
      if (!error_.empty()) break;
      const size_t bytes = ggml_nbytes(p.t);
      if (p.offset + bytes > file.bytes) {
        error_ = std::string("tensor ") + ggml_get_name(p.t) + " runs past the end of " + c_.path;
        break;
      }
      ggml_backend_tensor_set(p.t, static_cast<const uint8_t*>(file.at) + p.offset, 0, bytes);
      weightBytes_ += bytes;
    }
    if (error_.empty() && freqFactors_)
      ggml_backend_tensor_set(freqFactors_, c_.freqFactors.data(), 0, c_.freqFactors.size() * sizeof(float));
  }
  gguf_free(g);
  ggml_free(meta);
  return error_.empty();
}

}  // namespace lsg
