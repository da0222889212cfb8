// finalize_special_tokens(): llama.cpp's text-based special-token fix-ups (see vocab.h).
//
// GGUF files do not say everything: which tokens end a turn, which FIM tokens exist, or that
// Phi-3's special tokens swallow the whitespace after them. llama.cpp recognises them by text;
// keel does the same so that it stops, partitions and renders exactly like llama.cpp. Where
// llama.cpp's choice depends on hash-map iteration order (several EOT-looking tokens), keel takes
// the lowest id.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "tokenizer/vocab.h"

namespace keel::tokenizer {
namespace {

// "<｜end▁of▁sentence｜>" and friends use U+FF5C (EF BD 9C) and U+2581 (E2 96 81).
#define KEEL_FW_BAR "\xEF\xBD\x9C"
#define KEEL_LOWER_BLOCK "\xE2\x96\x81"

constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<" KEEL_FW_BAR "end" KEEL_LOWER_BLOCK "of" KEEL_LOWER_BLOCK "sentence" KEEL_FW_BAR ">",
    "<end_of_utterance>",
};
constexpr std::array<std::string_view, 1> kEomTexts = {"<|eom_id|>"};
constexpr std::array<std::string_view, 8> kFimPreTexts = {
    "<|fim_prefix|>",  "<fim-prefix>",
    "<fim_prefix>",    "<" KEEL_FW_BAR "fim" KEEL_LOWER_BLOCK "begin" KEEL_FW_BAR ">",
    "<PRE>",           KEEL_LOWER_BLOCK "<PRE>",
    "<|code_prefix|>", "<|prefix|>"};
constexpr std::array<std::string_view, 8> kFimSufTexts = {
    "<|fim_suffix|>",  "<fim-suffix>",
    "<fim_suffix>",    "<" KEEL_FW_BAR "fim" KEEL_LOWER_BLOCK "hole" KEEL_FW_BAR ">",
    "<SUF>",           KEEL_LOWER_BLOCK "<SUF>",
    "<|code_suffix|>", "<|suffix|>"};
constexpr std::array<std::string_view, 8> kFimMidTexts = {
    "<|fim_middle|>",  "<fim-middle>",
    "<fim_middle>",    "<" KEEL_FW_BAR "fim" KEEL_LOWER_BLOCK "end" KEEL_FW_BAR ">",
    "<MID>",           KEEL_LOWER_BLOCK "<MID>",
    "<|code_middle|>", "<|middle|>"};
constexpr std::array<std::string_view, 5> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                          "<PAD>", "[PAD]"};
constexpr std::array<std::string_view, 5> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>",
                                                          "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepTexts = {"<|file_sep|>"};

constexpr std::array<std::string_view, 22> kEogTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<" KEEL_FW_BAR "end" KEEL_LOWER_BLOCK "of" KEEL_LOWER_BLOCK "sentence" KEEL_FW_BAR ">",
    "[e~[",
};

#undef KEEL_FW_BAR
#undef KEEL_LOWER_BLOCK

void add_attr(Vocab* v, TokenId id, TokenAttr a) {
  v->tokens[static_cast<size_t>(id)].attrs |= bit(a);
}
void set_attr(Vocab* v, TokenId id, TokenAttr a, bool on) {
  uint32_t& attrs = v->tokens[static_cast<size_t>(id)].attrs;
  attrs = on ? (attrs | bit(a)) : (attrs & ~bit(a));
}

// When `*id` is unset, sets it to the lowest id whose text is in `texts` and marks it control.
template <size_t N>
void detect(Vocab* v, const std::array<std::string_view, N>& texts, TokenId* id) {
  if (*id != kNoToken) return;
  TokenId best = kNoToken;
  for (std::string_view text : texts) {
    const TokenId t = v->find(text);
    if (t != kNoToken && (best == kNoToken || t < best)) best = t;
  }
  if (best == kNoToken) return;
  *id = best;
  add_attr(v, best, TokenAttr::kControl);
}

void build_eog(Vocab* v) {
  SpecialTokenIds& s = v->special;
  std::vector<TokenId> eog;
  for (TokenId id : {s.fim_pad, s.fim_rep, s.fim_sep}) {
    if (id != kNoToken) eog.push_back(id);
  }
  for (std::string_view text : kEogTexts) {
    const TokenId id = v->find(text);
    if (id == kNoToken) continue;
    eog.push_back(id);
    add_attr(v, id, TokenAttr::kControl);
  }
  // gpt-oss: these structural tokens are always rendered.
  for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const TokenId id = v->find(text);
    if (id != kNoToken) v->tokens[static_cast<size_t>(id)].attrs = bit(TokenAttr::kUserDefined);
  }
  for (TokenId id : {s.eos, s.eot, s.eom}) {
    if (id != kNoToken) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  const auto has = [&](std::string_view text) {
    const TokenId id = v->find(text);
    return id != kNoToken && std::binary_search(eog.begin(), eog.end(), id);
  };
  const auto drop = [&](std::string_view text, TokenAttr new_attr) {
    const TokenId id = v->find(text);
    eog.erase(std::remove(eog.begin(), eog.end(), id), eog.end());
    v->tokens[static_cast<size_t>(id)].attrs = bit(new_attr);
  };
  // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
  if (has("<|end|>") &&
      ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>")))) {
    drop("<|end|>", TokenAttr::kUserDefined);
  }
  // gemma4: "</s>" is an ordinary token there.
  if (has("<|tool_response>") && has("</s>")) drop("</s>", TokenAttr::kNormal);
  v->eog_ids = std::move(eog);
}

void apply_model_attrs(Vocab* v) {
  std::string name = v->general_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto set_by_text = [&](std::string_view text, TokenAttr a, bool on) {
    if (TokenId id = v->find(text); id != kNoToken) set_attr(v, id, a, on);
  };
  if (v->pre.find("jina-v2-de") != std::string::npos ||
      v->pre.find("jina-v2-es") != std::string::npos ||
      v->pre.find("jina-v2-code") != std::string::npos) {
    set_by_text("<mask>", TokenAttr::kLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (TokenId id : v->special_cache) set_attr(v, id, TokenAttr::kRstrip, true);
    set_by_text("</s>", TokenAttr::kRstrip, true);
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
      set_by_text(text, TokenAttr::kRstrip, false);
    }
  } else if (name.find("modern-bert") != std::string::npos) {
    set_by_text("[MASK]", TokenAttr::kLstrip, true);
  }
}

}  // namespace

void finalize_special_tokens(Vocab* v) {
  SpecialTokenIds& s = v->special;
  detect(v, kEotTexts, &s.eot);
  detect(v, kEomTexts, &s.eom);
  detect(v, kFimPreTexts, &s.fim_pre);
  detect(v, kFimSufTexts, &s.fim_suf);
  detect(v, kFimMidTexts, &s.fim_mid);
  detect(v, kFimPadTexts, &s.fim_pad);
  detect(v, kFimRepTexts, &s.fim_rep);
  detect(v, kFimSepTexts, &s.fim_sep);
  // Control tokens named "unused" are unused.
  for (TokenData& t : v->tokens) {
    if ((t.attrs & bit(TokenAttr::kControl)) && t.text.find("unused") != std::string::npos) {
      t.attrs |= bit(TokenAttr::kUnused);
    }
  }
  build_eog(v);
  v->special_cache.clear();
  const uint32_t special_mask =
      bit(TokenAttr::kControl) | bit(TokenAttr::kUserDefined) | bit(TokenAttr::kUnknown);
  for (TokenId id = 0; id < v->size(); ++id) {
    if (v->tokens[static_cast<size_t>(id)].attrs & special_mask) v->special_cache.push_back(id);
  }
  std::stable_sort(v->special_cache.begin(), v->special_cache.end(), [&](TokenId a, TokenId b) {
    return v->tokens[static_cast<size_t>(a)].text.size() >
           v->tokens[static_cast<size_t>(b)].text.size();
  });
  apply_model_attrs(v);
}

}  // namespace keel::tokenizer
