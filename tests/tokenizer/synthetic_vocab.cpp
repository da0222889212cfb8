// Test helper: synthetic GGUF vocabularies (see synthetic_vocab.h). Files go to a fresh
// directory under the build tree's test-tmp folder, one per load, so tests never share state.
// Thread safety: none needed (tests call it from their own thread).
#include "synthetic_vocab.h"

#include <cstdio>

#include "gguf/reader.h"
#include "support/test_support.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace keel::tokenizer::testing {

int32_t SyntheticVocab::add(const std::string& text, int32_t type, float score) {
  tokens.push_back(text);
  if (types.size() + 1 == tokens.size()) types.push_back(type);
  if (scores.size() + 1 == tokens.size()) scores.push_back(score);
  return static_cast<int32_t>(tokens.size() - 1);
}

SyntheticVocab spm_base() {
  SyntheticVocab v;
  v.add("<unk>", kUnknownType);
  v.add("<s>", kControl);
  v.add("</s>", kControl);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    v.add(hex, kByteType);
  }
  return v;
}

SyntheticVocab bpe_base(const std::string& pre) {
  SyntheticVocab v;
  v.model = "gpt2";
  v.pre = pre;
  v.scores.clear();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(byte_to_code_point(static_cast<uint8_t>(b)), &s);
    v.tokens.push_back(s);
    v.types.push_back(kNormal);
  }
  return v;
}

gguf::GgufWriter to_writer(const SyntheticVocab& v) {
  gguf::GgufWriter w;
  w.set("general.architecture", "llama");
  w.set("tokenizer.ggml.model", v.model);
  if (v.pre) w.set("tokenizer.ggml.pre", *v.pre);
  w.set("tokenizer.ggml.tokens", gguf::make_array(gguf::ValueType::kString, v.tokens));
  if (!v.scores.empty()) {
    w.set("tokenizer.ggml.scores", gguf::make_array(gguf::ValueType::kFloat32, v.scores));
  }
  if (!v.types.empty()) {
    w.set("tokenizer.ggml.token_type", gguf::make_array(gguf::ValueType::kInt32, v.types));
  }
  if (v.model == "gpt2" && !v.omit_merges) {
    w.set("tokenizer.ggml.merges", gguf::make_array(gguf::ValueType::kString, v.merges));
  }
  return w;
}

Result<Tokenizer> load_tokenizer(const gguf::GgufWriter& w) {
  const std::string path = keel::testing::make_temp_dir("tokenizer") + "/vocab.gguf";
  KEEL_TRY(w.write(path));
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile f,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone}));
  return Tokenizer::from_gguf(f);
}

Result<Tokenizer> load_tokenizer(const SyntheticVocab& v) { return load_tokenizer(to_writer(v)); }

}  // namespace keel::tokenizer::testing
