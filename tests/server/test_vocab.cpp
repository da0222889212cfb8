// The synthetic test vocabulary and ChatML formatter (see test_vocab.h).
#include "test_vocab.h"

#include <cstdio>

#include "core/check.h"
#include "tokenizer/vocab.h"

namespace keel::server::testing {

tokenizer::Tokenizer make_test_tokenizer() {
  using tokenizer::TokenAttr;
  tokenizer::Vocab v;
  v.type = tokenizer::VocabType::kSpm;
  v.model = "llama";
  auto add = [&v](std::string text, TokenAttr attr, float score = 0.0f) {
    v.token_to_id.emplace(text, static_cast<int32_t>(v.tokens.size()));
    v.tokens.push_back({std::move(text), score, tokenizer::bit(attr)});
  };
  add("<unk>", TokenAttr::kUnknown);
  add("<s>", TokenAttr::kControl);
  add("</s>", TokenAttr::kControl);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    add(hex, TokenAttr::kByte);
  }
  // "\xE2\x96\x81" is U+2581 (SPM's space); "\x65" is 'e' (a plain "e" would extend the escape).
  const char* words[] = {"\xE2\x96\x81Hello",
                         "\xE2\x96\x81world",
                         "!",
                         "\xE2\x96\x81The",
                         "\xE2\x96\x81\x65nd",
                         "ST",
                         "OP",
                         "\xE2\x96\x81more",
                         "\xE2\x96\x81"};
  for (const char* w : words) add(w, TokenAttr::kNormal, -1.0f);
  v.special.unk = kUnk;
  v.special.bos = kBos;
  v.special.eos = kEos;
  v.add_bos = true;
  v.add_space_prefix = true;
  v.escape_whitespaces = true;
  tokenizer::finalize_special_tokens(&v);
  Result<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::from_vocab(std::move(v));
  KEEL_CHECK_MSG(tok.ok(), tok.status().to_string().c_str());
  KEEL_CHECK(tok->vocab_size() == kVocabSize);
  return std::move(tok).value();
}

Result<tokenizer::TrackedText> chatml_tracked(std::span<const ChatMessage> messages,
                                              bool add_generation_prompt,
                                              const nlohmann::ordered_json& /*tools*/,
                                              const nlohmann::ordered_json& /*kwargs*/) {
  tokenizer::TrackedText out;
  for (const ChatMessage& m : messages) {
    if (m.content == "__template_error__") return Status::invalid_argument("template rejected");
    out.text += "<|im_start|>" + m.role + "\n";
    tokenizer::append_span(&out.plain, out.text.size(), out.text.size() + m.content.size());
    out.text += m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out.text += "<|im_start|>assistant\n";
  return out;
}

Result<std::string> chatml(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  KEEL_ASSIGN_OR_RETURN(tokenizer::TrackedText t, chatml_tracked(messages, add_generation_prompt));
  return std::move(t.text);
}

}  // namespace keel::server::testing
