// The span's forward pass as one ggml graph per step, read top to bottom like shards/block.ts
// (the exact engine's reference): RMSNorm, Q/K/V (+ bias, qwen2), per-head Q/K RMSNorm (qwen3),
// RoPE in llama.cpp's mode per family (NORM for llama, whose converter permutes Q/K; NEOX for
// qwen2/qwen3), causal attention over the session's KV cache, SwiGLU feed-forward.
#include <cmath>
#include <cstring>

#include "span.h"

namespace lsg {

namespace {
// Nodes per block in block(): about 45; the rest is headroom for several sessions per step.
constexpr int kNodesPerBlock = 64;
}  // namespace

Span::Span(const SpanConfig& c) : c_(c) {
  if (!librariesLoaded()) {
    error_ = "ggml libraries are not loaded";
    return;
  }
  if (c_.device < 0 || size_t(c_.device) >= ggml_backend_dev_count()) {
    error_ = "no ggml device " + std::to_string(c_.device);
    return;
  }
  dev_ = ggml_backend_dev_get(size_t(c_.device));
  backend_ = ggml_backend_dev_init(dev_, nullptr);
  if (!backend_) {
    error_ = "could not start ggml device " + deviceName();
    return;
  }
  if (c_.threads > 0) {
    // ggml_backend_set_n_threads is the CPU backend's (and BLAS's) extension, reached through
    // its registry rather than linked, as ggml-backend.h documents.
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev_);
    auto setThreads = reinterpret_cast<void (*)(ggml_backend_t, int)>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    if (setThreads) setThreads(backend_, c_.threads);
  }
  if (!loadWeights()) return;
  graphSize_ = (c_.end - c_.start) * kNodesPerBlock + 256;
  meta_.resize(ggml_tensor_overhead() * size_t(graphSize_) + ggml_graph_overhead_custom(size_t(graphSize_), false));
  galloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend_));
}

Span::~Span() {
  for (auto& [id, s] : sessions_) {
    ggml_backend_buffer_free(s.buf);
    ggml_free(s.ctx);
  }
  if (galloc_) ggml_gallocr_free(galloc_);
  if (wbuf_) ggml_backend_buffer_free(wbuf_);
  if (wctx_) ggml_free(wctx_);
  if (backend_) ggml_backend_free(backend_);
}

std::string Span::deviceName() const { return dev_ ? ggml_backend_dev_name(dev_) : "none"; }

size_t Span::kvRowBytes() const { return ggml_row_size(c_.kvType, int64_t(c_.headDim) * c_.nKvHeads); }

std::string Span::openSession(int id, int maxLength) {
  closeSession(id);
  const int n = c_.end - c_.start;
  const int64_t kvDim = int64_t(c_.headDim) * c_.nKvHeads;
  Session s;
  ggml_init_params ip = {ggml_tensor_overhead() * size_t(2 * n), nullptr, true};
  s.ctx = ggml_init(ip);
  for (int l = 0; l < n; l++) {
    s.k.push_back(ggml_new_tensor_2d(s.ctx, c_.kvType, kvDim, maxLength));
    s.v.push_back(ggml_new_tensor_2d(s.ctx, c_.kvType, kvDim, maxLength));
  }
  s.buf = ggml_backend_alloc_ctx_tensors(s.ctx, backend_);
  if (!s.buf) {
    ggml_free(s.ctx);
    return "could not allocate a KV cache of " + std::to_string(maxLength) + " positions on " + deviceName();
  }
  ggml_backend_buffer_set_usage(s.buf, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
  s.maxLength = maxLength;
  sessions_[id] = s;
  return "";
}

bool Span::closeSession(int id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  ggml_backend_buffer_free(it->second.buf);
  ggml_free(it->second.ctx);
  sessions_.erase(it);
  return true;
}

Session* Span::session(int id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

ggml_tensor* Span::block(ggml_context* ctx, ggml_cgraph* gf, int l, ggml_tensor* cur, ggml_tensor* pos,
                         const std::vector<ggml_tensor*>& masks, const std::vector<StepPart>& parts) {
  const Layer& L = layers_[l];
  const int64_t T = cur->ne[1], hd = c_.headDim, nh = c_.nHeads, nkv = c_.nKvHeads, kvDim = hd * nkv;
  // attention: xn = rmsnorm(x) * attn_norm; q, k, v (+ biases); per-head norms; RoPE
  ggml_tensor* xn = ggml_mul(ctx, ggml_rms_norm(ctx, cur, c_.rmsEps), L.attnNorm);
  ggml_tensor* q = ggml_mul_mat(ctx, L.wq, xn);
  ggml_tensor* k = ggml_mul_mat(ctx, L.wk, xn);
  ggml_tensor* v = ggml_mul_mat(ctx, L.wv, xn);
  if (L.bq) {
    q = ggml_add(ctx, q, L.bq);
    k = ggml_add(ctx, k, L.bk);
    v = ggml_add(ctx, v, L.bv);
  }
  q = ggml_reshape_3d(ctx, q, hd, nh, T);
  k = ggml_reshape_3d(ctx, k, hd, nkv, T);
  if (L.qNorm) {
    q = ggml_mul(ctx, ggml_rms_norm(ctx, q, c_.rmsEps), L.qNorm);
    k = ggml_mul(ctx, ggml_rms_norm(ctx, k, c_.rmsEps), L.kNorm);
  }
  // ext_factor 0 (no YaRN), attn_factor 1; beta_fast/slow are then unused.
  q = ggml_rope_ext(ctx, q, pos, freqFactors_, int(hd), c_.ropeMode, c_.seqLen, c_.ropeTheta, c_.ropeFreqScale, 0.f,
                    1.f, 32.f, 1.f);
  k = ggml_rope_ext(ctx, k, pos, freqFactors_, int(hd), c_.ropeMode, c_.seqLen, c_.ropeTheta, c_.ropeFreqScale, 0.f,
                    1.f, 32.f, 1.f);
  ggml_tensor* out = nullptr;
  int64_t row = 0;
  for (size_t p = 0; p < parts.size(); p++) {
    const StepPart& part = parts[p];
    Session& s = *part.session;
    const int64_t rows = part.rows, nKv = part.startPos + rows;
    ggml_tensor* kc = s.k[size_t(l)];
    ggml_tensor* vc = s.v[size_t(l)];
    // This part's new keys and values go into the cache first: the copies are expanded into
    // the graph before the attention reading the cache, and backends run nodes in order.
    ggml_tensor* kNew = ggml_view_1d(ctx, k, rows * kvDim, size_t(row * kvDim) * ggml_element_size(k));
    ggml_tensor* vNew = ggml_view_1d(ctx, v, rows * kvDim, size_t(row) * v->nb[1]);
    ggml_build_forward_expand(gf, ggml_cpy(ctx, kNew, ggml_view_1d(ctx, kc, rows * kvDim, size_t(part.startPos) * kc->nb[1])));
    ggml_build_forward_expand(gf, ggml_cpy(ctx, vNew, ggml_view_1d(ctx, vc, rows * kvDim, size_t(part.startPos) * vc->nb[1])));
    // scores [nKv, rows, heads] = Kᵀ Q per head (GQA: ggml broadcasts KV head h / (nh / nkv))
    const size_t es = ggml_row_size(kc->type, hd);
    ggml_tensor* K = ggml_permute(ctx, ggml_view_3d(ctx, kc, hd, nkv, nKv, es, kc->nb[1], 0), 0, 2, 1, 3);
    ggml_tensor* Q = ggml_permute(ctx, ggml_view_3d(ctx, q, hd, nh, rows, q->nb[1], q->nb[2], size_t(row) * q->nb[2]), 0, 2, 1, 3);
    ggml_tensor* kq = ggml_mul_mat(ctx, K, Q);
    kq = ggml_soft_max_ext(ctx, kq, masks[p], 1.0f / std::sqrt(float(hd)), 0.0f);
    // V as [nKv, hd, heads] (contiguous along positions) for the weighted sum
    ggml_tensor* V = ggml_cont(ctx, ggml_permute(ctx, ggml_view_3d(ctx, vc, hd, nkv, nKv, es, vc->nb[1], 0), 1, 2, 0, 3));
    ggml_tensor* kqv = ggml_mul_mat(ctx, V, kq);  // [hd, rows, heads]
    ggml_tensor* o = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), hd * nh, rows);
    out = out ? ggml_concat(ctx, out, o, 1) : o;
    row += rows;
  }
  cur = ggml_add(ctx, cur, ggml_mul_mat(ctx, L.wo, out));
  // feed-forward: x += W2 (silu(W1 xn) * W3 xn), xn = rmsnorm(x) * ffn_norm
  xn = ggml_mul(ctx, ggml_rms_norm(ctx, cur, c_.rmsEps), L.ffnNorm);
  ggml_tensor* h = ggml_mul(ctx, ggml_silu(ctx, ggml_mul_mat(ctx, L.w1, xn)), ggml_mul_mat(ctx, L.w3, xn));
  return ggml_add(ctx, cur, ggml_mul_mat(ctx, L.w2, h));
}

std::string Span::forward(const std::vector<StepPart>& parts, float* x) {
  int64_t T = 0;
  for (const StepPart& p : parts) T += p.rows;
  ggml_init_params ip = {meta_.size(), meta_.data(), true};
  ggml_context* ctx = ggml_init(ip);
  ggml_cgraph* gf = ggml_new_graph_custom(ctx, size_t(graphSize_), false);
  ggml_tensor* in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c_.dim, T);
  ggml_set_input(in);
  ggml_tensor* pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T);
  ggml_set_input(pos);
  std::vector<ggml_tensor*> masks;
  for (const StepPart& p : parts) {
    masks.push_back(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, p.startPos + p.rows, p.rows));
    ggml_set_input(masks.back());
  }
  ggml_tensor* cur = in;
  for (int l = 0; l < c_.end - c_.start; l++) cur = block(ctx, gf, l, cur, pos, masks, parts);
  ggml_set_output(cur);
  ggml_build_forward_expand(gf, cur);
  if (!ggml_gallocr_alloc_graph(galloc_, gf)) {
    ggml_free(ctx);
    return "could not allocate the step's activations on " + deviceName();
  }
  ggml_backend_tensor_set(in, x, 0, size_t(T * c_.dim) * sizeof(float));
  std::vector<int32_t> positions;
  for (const StepPart& p : parts)
    for (int t = 0; t < p.rows; t++) positions.push_back(p.startPos + t);
  ggml_backend_tensor_set(pos, positions.data(), 0, positions.size() * sizeof(int32_t));
  for (size_t i = 0; i < parts.size(); i++) {
    // causal: row t (position startPos + t) sees positions 0 .. startPos + t
    const int nKv = parts[i].startPos + parts[i].rows;
    std::vector<float> mask(size_t(nKv) * size_t(parts[i].rows));
    for (int t = 0; t < parts[i].rows; t++)
      for (int j = 0; j < nKv; j++) mask[size_t(t) * size_t(nKv) + size_t(j)] = j <= parts[i].startPos + t ? 0.f : -INFINITY;
    ggml_backend_tensor_set(masks[i], mask.data(), 0, mask.size() * sizeof(float));
  }
  const ggml_status st = ggml_backend_graph_compute(backend_, gf);
  if (st == GGML_STATUS_SUCCESS) ggml_backend_tensor_get(cur, x, 0, size_t(T * c_.dim) * sizeof(float));
  ggml_free(ctx);
  return st == GGML_STATUS_SUCCESS ? "" : "ggml graph compute failed on " + deviceName() + " (status " + std::to_string(int(st)) + ")";
}

void Span::readKv(Session& s, int from, int n, uint8_t* out) const {
  const size_t rb = kvRowBytes(), bytes = rb * size_t(n);
  for (size_t l = 0; l < s.k.size(); l++) {
    ggml_backend_tensor_get(s.k[l], out, rb * size_t(from), bytes);
    ggml_backend_tensor_get(s.v[l], out + bytes, rb * size_t(from), bytes);
    out += 2 * bytes;
  }
}

void Span::writeKv(Session& s, int from, int n, const uint8_t* data) {
  const size_t rb = kvRowBytes(), bytes = rb * size_t(n);
  for (size_t l = 0; l < s.k.size(); l++) {
    ggml_backend_tensor_set(s.k[l], data, rb * size_t(from), bytes);
    ggml_backend_tensor_set(s.v[l], data + bytes, rb * size_t(from), bytes);
    data += 2 * bytes;
  }
}

}  // namespace lsg
