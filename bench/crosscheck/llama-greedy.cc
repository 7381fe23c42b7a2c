// Greedy decoding with llama.cpp's own engine (libllama from the opt-in build of
// bench/crosscheck/build-llama-cpp.ts; this file is ours, llama.cpp's code stays out of the
// repository): the reference side of `npm run crosscheck`. Prompt tokens are given as ids so
// both engines see the same input whatever their tokenizers do.
//   llama-greedy <model.gguf> <threads> <new tokens> <id,id,...>
// prints one JSON line: {"tokens":[...],"prefillMs":..,"decodeMs":..}
#include <llama.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char*, void*) {}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: llama-greedy model threads n ids\n");
    return 2;
  }
  if (!std::getenv("LLAMA_GREEDY_LOG")) llama_log_set(quiet, nullptr);
  llama_backend_init();
  const int threads = std::atoi(argv[2]), n = std::atoi(argv[3]);
  std::vector<llama_token> prompt;
  std::stringstream ss(argv[4]);
  for (std::string item; std::getline(ss, item, ',');) prompt.push_back(std::atoi(item.c_str()));
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(prompt.size() + n + 8);
  cp.n_batch = cp.n_ubatch = uint32_t(prompt.size() > 512 ? prompt.size() : 512);
  cp.n_threads = cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  auto argmax = [&](int i) {
    const float* l = llama_get_logits_ith(ctx, i);
    int best = 0;
    for (int v = 1; v < vocab; v++)
      if (l[v] > l[best]) best = v;
    return best;
  };
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  if (llama_decode(ctx, llama_batch_get_one(prompt.data(), int32_t(prompt.size()))) != 0) return 1;
  const double prefillMs = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  std::vector<llama_token> out;
  llama_token tok = argmax(-1);
  out.push_back(tok);
  t0 = clk::now();
  for (int i = 1; i < n; i++) {
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return 1;
    tok = argmax(-1);
    out.push_back(tok);
  }
  const double decodeMs = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  std::printf("{\"tokens\":[");
  for (size_t i = 0; i < out.size(); i++) std::printf("%s%d", i ? "," : "", out[i]);
  std::printf("],\"prefillMs\":%.3f,\"decodeMs\":%.3f,\"decodeSteps\":%d}\n", prefillMs, decodeMs, n - 1);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
