// libFuzzer target: a tokenizer on arbitrary bytes, built twice — tokenizer_spm_fuzz
// (KEEL_FUZZ_SPM: SentencePiece vocabularies) and tokenizer_bpe_fuzz (byte-level BPE with each
// vocabulary's PCRE2 pre-tokenizer) — over the real vocabularies in $KEEL_SHARED_DIR/vocab
// (../shared next to the repository by default; without them the target exits 77: skipped).
// Input: one byte choosing the vocabulary and the encode flags, then text. Checks, from
// tokenizer.h and incremental_decoder.h: ids are inside the vocabulary, decode() is valid UTF-8,
// the incremental decoder agrees with decode() byte for byte — for the encoded ids and for ids
// read from the input (some outside the vocabulary) —, min_tokens() is a lower bound of the
// count, and text encoded as plain (message content) never yields a control token.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

#ifndef KEEL_SHARED_DIR_DEFAULT
#define KEEL_SHARED_DIR_DEFAULT "../shared"
#endif

namespace {

using keel::tokenizer::Tokenizer;

#ifdef KEEL_FUZZ_SPM
constexpr const char* kVocabs[] = {"llama-spm", "phi-3"};
#else
// Four different pre-tokenizer regexes (loading a vocabulary takes seconds under ASan; the unit
// tests cover every vocabulary of ../shared/vocab).
constexpr const char* kVocabs[] = {"gpt-2", "deepseek-llm", "deepseek-coder", "falcon"};
#endif

std::vector<Tokenizer>* g_tokenizers = nullptr;

void check_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool render_special) {
  const std::string text = tok.decode(ids, render_special);
  if (!keel::tokenizer::is_valid_utf8(text)) std::abort();
  keel::tokenizer::IncrementalDecoder inc(tok, render_special);
  std::string streamed;
  for (int32_t id : ids) streamed += inc.push(id);
  streamed += inc.finish();
  if (streamed != text) {
    std::fprintf(stderr, "tokenizer_fuzz: incremental decode differs from decode()\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("KEEL_SHARED_DIR");
  const std::string dir = std::string(env && *env ? env : KEEL_SHARED_DIR_DEFAULT) + "/vocab";
  g_tokenizers = new std::vector<Tokenizer>();
  for (const char* name : kVocabs) {
    const std::string path = dir + "/ggml-vocab-" + name + ".gguf";
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "skipped: %s not found (shared reference data; set KEEL_SHARED_DIR)\n",
                   path.c_str());
      std::exit(77);
    }
    auto file = keel::gguf::GgufFile::open(path, {.mode = keel::gguf::DataMode::kNone});
    if (!file.ok()) std::abort();
    auto tok = Tokenizer::from_gguf(*file);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), tok.error().to_string().c_str());
      std::abort();
    }
    g_tokenizers->push_back(std::move(tok).value());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const Tokenizer& tok = (*g_tokenizers)[(selector >> 2) % g_tokenizers->size()];
  const bool add_special = (selector & 1) != 0;
  const bool parse_special = (selector & 2) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  check_decode(tok, ids, /*render_special=*/parse_special);
  // min_tokens() is a lower bound on the token count (what the server uses to refuse early).
  const size_t n = add_special ? tok.encode(text, false, parse_special).size() : ids.size();
  if (tok.min_tokens(text) > n) std::abort();
  // Text that is all plain (a chat message's content) never yields a control token.
  if (!text.empty()) {
    keel::tokenizer::TrackedText plain{std::string(text), {{0, text.size()}}};
    for (int32_t id : tok.encode(plain, /*add_special=*/false, /*parse_special=*/true)) {
      if (id < 0 || id >= tok.vocab_size() || tok.is_control(id)) {
        std::fprintf(stderr, "tokenizer_fuzz: plain text gave token %d\n", id);
        std::abort();
      }
    }
  }

  // The input's bytes as ids (little-endian 16-bit pairs, a few past the vocabulary).
  std::vector<int32_t> raw;
  const auto bound = static_cast<uint32_t>(tok.vocab_size()) + 16;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const uint32_t v = static_cast<uint8_t>(text[i]) | static_cast<uint8_t>(text[i + 1]) << 8;
    raw.push_back(static_cast<int32_t>(v * 37u % bound));
  }
  check_decode(tok, raw, /*render_special=*/!parse_special);
  return 0;
}
