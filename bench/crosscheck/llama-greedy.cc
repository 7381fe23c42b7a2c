// Greedy decoding with llama.cpp's own engine (libllama from the opt-in build of
// llama-cpp-native.ts; this file is ours, llama.cpp's code stays out of the repository): the
// reference side of `npm run crosscheck`.
//   llama-greedy <model.gguf> <threads> <new tokens> <prompt>
// <prompt> is one of
//   id,id,...   token ids, so both engines see the same input whatever their tokenizers do;
//   text:T      T tokenized by llama.cpp (BOS as the file says, control tokens as text), as
//               `layerswarm generate --prompt T` tokenizes it;
//   chat:T      one user turn T through llama_chat_apply_template with the file's template
//               (llama.cpp's built-in templates, no Jinja), control tokens parsed.
// With text: or chat:, decoding stops after an end-of-generation token (llama_vocab_is_eog).
// Prints one JSON line: {"prompt":[...],"tokens":[...],"margins":[...],"prefillMs":..,"decodeMs":..}
// where margins[i] is llama.cpp's top-1 minus top-2 logit at step i.
#include <llama.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char*, void*) {}

static std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text, bool special) {
  std::vector<llama_token> ids(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), true, special);
  if (n < 0) {
    ids.resize(size_t(-n));
    n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), true, special);
  }
  ids.resize(size_t(n < 0 ? 0 : n));
  return ids;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: llama-greedy model threads n (ids | text:T | chat:T)\n");
    return 2;
  }
  if (!std::getenv("LLAMA_GREEDY_LOG")) llama_log_set(quiet, nullptr);
  llama_backend_init();
  const int threads = std::atoi(argv[2]), n = std::atoi(argv[3]);
  const std::string arg = argv[4];
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> prompt;
  const bool fromText = arg.rfind("text:", 0) == 0, fromChat = arg.rfind("chat:", 0) == 0;
  if (fromText) {
    prompt = tokenize(vocab, arg.substr(5), false);
  } else if (fromChat) {
    const std::string user = arg.substr(5);
    llama_chat_message msg{"user", user.c_str()};
    const char* tmpl = llama_model_chat_template(model, nullptr);
    std::vector<char> buf(user.size() * 2 + 4096);
    const int len = llama_chat_apply_template(tmpl, &msg, 1, true, buf.data(), int32_t(buf.size()));
    if (len < 0 || size_t(len) > buf.size()) {
      std::fprintf(stderr, "llama_chat_apply_template failed (%d)\n", len);
      return 1;
    }
    prompt = tokenize(vocab, std::string(buf.data(), size_t(len)), true);
  } else {
    std::stringstream ss(arg);
    for (std::string item; std::getline(ss, item, ',');) prompt.push_back(std::atoi(item.c_str()));
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(prompt.size() + n + 8);
  cp.n_batch = cp.n_ubatch = uint32_t(prompt.size() > 512 ? prompt.size() : 512);
  cp.n_threads = cp.n_threads_batch = threads;
  if (std::getenv("LLAMA_GREEDY_F32_KV")) {  // diagnostics: f32 KV cache, attention without flash attention
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  const int nVocab = llama_vocab_n_tokens(vocab);
  std::vector<double> margins;
  auto argmax = [&](int i) {
    const float* l = llama_get_logits_ith(ctx, i);
    int best = 0;
    for (int v = 1; v < nVocab; v++)
      if (l[v] > l[best]) best = v;
    float second = -1e30f;
    for (int v = 0; v < nVocab; v++)
      if (v != best && l[v] > second) second = l[v];
    margins.push_back(double(l[best]) - double(second));
    if (std::getenv("LLAMA_GREEDY_TOP")) {  // diagnostics: the top logits of each step, on stderr
      std::vector<int> top;
      for (int k = 0; k < 4; k++) {
        int b = -1;
        for (int v = 0; v < nVocab; v++) {
          bool used = false;
          for (int t : top) used = used || t == v;
          if (!used && (b < 0 || l[v] > l[b])) b = v;
        }
        top.push_back(b);
        std::fprintf(stderr, "%s%d:%.5f", k ? " " : "step: ", b, double(l[b]));
      }
      std::fprintf(stderr, "\n");
    }
    return best;
  };
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  if (llama_decode(ctx, llama_batch_get_one(prompt.data(), int32_t(prompt.size()))) != 0) return 1;
  const double prefillMs = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  std::vector<llama_token> out;
  llama_token tok = argmax(-1);
  out.push_back(tok);
  const bool stopAtEog = fromText || fromChat;
  t0 = clk::now();
  for (int i = 1; i < n && !(stopAtEog && llama_vocab_is_eog(vocab, tok)); i++) {
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return 1;
    tok = argmax(-1);
    out.push_back(tok);
  }
  const double decodeMs = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  std::printf("{\"prompt\":[");
  for (size_t i = 0; i < prompt.size(); i++) std::printf("%s%d", i ? "," : "", prompt[i]);
  std::printf("],\"tokens\":[");
  for (size_t i = 0; i < out.size(); i++) std::printf("%s%d", i ? "," : "", out[i]);
  std::printf("],\"margins\":[");
  for (size_t i = 0; i < margins.size(); i++) std::printf("%s%.5f", i ? "," : "", margins[i]);
  std::printf("],\"prefillMs\":%.3f,\"decodeMs\":%.3f,\"decodeSteps\":%d}\n", prefillMs, decodeMs, int(out.size()) - 1);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
