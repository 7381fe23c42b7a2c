// llama.cpp's tokenizer on many strings in one process (libllama of the opt-in build, vocabulary
// only; this file is ours): the reference side of the tokenizer cross-check in
// `npm run crosscheck -- families`. It calls llama_tokenize as llama.cpp's llama-tokenize tool
// does (common_tokenize), without paying a model load per string.
//   llama-tokens <model.gguf> <strings file, NUL-separated UTF-8> <parse special 0|1> <add BOS 0|1>
// prints one line of space-separated ids per string.
#include <llama.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char*, void*) {}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: llama-tokens model strings special addBos\n");
    return 2;
  }
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ifstream in(argv[2], std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool special = std::atoi(argv[3]) != 0, addBos = std::atoi(argv[4]) != 0;
  size_t start = 0;
  std::vector<llama_token> ids;
  while (start <= all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    const std::string s = all.substr(start, end - start);
    ids.assign(s.size() + 8, 0);
    int n = llama_tokenize(vocab, s.data(), int32_t(s.size()), ids.data(), int32_t(ids.size()), addBos, special);
    if (n < 0) {
      ids.assign(size_t(-n), 0);
      n = llama_tokenize(vocab, s.data(), int32_t(s.size()), ids.data(), int32_t(ids.size()), addBos, special);
    }
    for (int i = 0; i < n; i++) std::printf("%s%d", i ? " " : "", ids[size_t(i)]);
    std::printf("\n");
    if (end == all.size()) break;
    start = end + 1;
  }
  llama_model_free(model);
  return 0;
}
