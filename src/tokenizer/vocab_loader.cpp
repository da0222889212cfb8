// load_vocab(): GGUF tokenizer.ggml.* metadata -> Vocab, with llama.cpp's defaults (see vocab.h).
//
// Strictness: what keel relies on is validated (types, array lengths, unique token texts, merges
// of the form "left right", special ids). A special id of -1 or 0xFFFFFFFF means "unset" and keeps
// the model's default, as llama.cpp does. Any other out-of-range id is an error for the ids that
// drive encoding and stopping (bos, eos, eot, eom, unk); for the others (pad, sep, mask, fim) it
// is logged and ignored, because published GGUFs carry such values and llama.cpp ignores them.
#include <limits>
#include <optional>
#include <string>

#include "core/log.h"
#include "tokenizer/vocab.h"

namespace keel::tokenizer {
namespace {

using gguf::GgufFile;
using gguf::Value;
using gguf::ValueType;

constexpr char kPrefix[] = "tokenizer.ggml.";

std::string key_of(std::string_view name) { return std::string(kPrefix) + std::string(name); }

Status corrupt(const GgufFile& f, const std::string& msg) {
  return Status::corrupt(f.path() + ": " + msg);
}

Result<std::optional<std::string>> optional_string(const GgufFile& f, std::string_view name) {
  const Value* v = f.find(key_of(name));
  if (v == nullptr) return std::optional<std::string>();
  if (const std::string* s = v->as_string()) return std::optional<std::string>(*s);
  return corrupt(f, key_of(name) + " has type " + std::string(value_type_name(v->type())) +
                        ", expected string");
}

Status read_optional_bool(const GgufFile& f, std::string_view name, bool* out) {
  const Value* v = f.find(key_of(name));
  if (v == nullptr) return Status();
  if (auto b = v->as_bool()) {
    *out = *b;
    return Status();
  }
  return corrupt(
      f, key_of(name) + " has type " + std::string(value_type_name(v->type())) + ", expected bool");
}

// The array under `name`; nullptr when absent; an error when present but not an array.
Result<const gguf::Array*> optional_array(const GgufFile& f, std::string_view name) {
  const Value* v = f.find(key_of(name));
  if (v == nullptr) return static_cast<const gguf::Array*>(nullptr);
  if (const gguf::Array* a = v->as_array()) return a;
  return corrupt(f, key_of(name) + " has type " + std::string(value_type_name(v->type())) +
                        ", expected array");
}

Result<VocabType> vocab_type_for(const GgufFile& f, std::string_view model) {
  if (model == "llama") return VocabType::kSpm;
  if (model == "gpt2") return VocabType::kBpe;
  std::string what;
  if (model == "bert") {
    what = "WordPiece (BERT)";
  } else if (model == "t5") {
    what = "Unigram (T5)";
  } else if (model == "rwkv") {
    what = "RWKV trie";
  } else if (model == "no_vocab" || model == "none") {
    what = "no-vocabulary";
  } else if (model == "plamo2" || model == "gemma4" || model == "hybriddna" ||
             model == "whitespace") {
    what = "this";
  } else {
    return Status::unsupported(f.path() + ": unknown tokenizer model '" + std::string(model) +
                               "' (tokenizer.ggml.model)");
  }
  return Status::unsupported(f.path() + ": " + what + " tokenizer model '" + std::string(model) +
                             "' is not supported (keel implements 'llama' SPM and 'gpt2' BPE)");
}

// Model-type defaults and pre-tokenizer flags (llama.cpp's llama_vocab::impl::load).
Status apply_type_defaults(const GgufFile& f, Vocab* v) {
  SpecialTokenIds& s = v->special;
  if (v->type == VocabType::kSpm) {
    s.bos = 1;
    s.eos = 2;
    s.unk = 0;
    v->add_space_prefix = true;
    v->escape_whitespaces = true;
    v->clean_spaces = false;
    v->add_bos = true;
    v->add_eos = false;
    return Status();
  }
  s.bos = 11;  // llama.cpp's defaults for BPE vocabularies
  s.eos = 11;
  v->add_space_prefix = false;
  v->escape_whitespaces = false;
  v->clean_spaces = true;
  if (v->pre.empty()) {
    KEEL_LOG_WARN(
        "{}: no tokenizer.ggml.pre; using the 'default' pre-tokenizer (output may "
        "differ from the model's own tokenizer)",
        f.path());
    v->pre_kind = PreTokenizerKind::kDefault;
    return Status();
  }
  const PreTokenizerSpec* spec = find_pre_tokenizer_spec(v->pre);
  if (spec == nullptr) {
    return Status::unsupported(f.path() + ": unknown pre-tokenizer '" + v->pre +
                               "' (tokenizer.ggml.pre)");
  }
  v->pre_kind = spec->kind;
  v->clean_spaces = spec->clean_spaces;
  v->ignore_merges = spec->ignore_merges;
  v->add_bos = spec->add_bos;
  if (spec->no_bos) s.bos = kNoToken;
  return Status();
}

Status read_tokens(const GgufFile& f, Vocab* v) {
  KEEL_ASSIGN_OR_RETURN(const gguf::Array* tokens, optional_array(f, "tokens"));
  if (tokens == nullptr) return Status::not_found(f.path() + ": missing " + key_of("tokens"));
  if (tokens->type != ValueType::kString) {
    return corrupt(f, key_of("tokens") + " is an array of " +
                          std::string(value_type_name(tokens->type)) + ", expected strings");
  }
  const size_t n = tokens->items.size();
  if (n == 0) return corrupt(f, key_of("tokens") + " is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return corrupt(f, key_of("tokens") + " has too many entries");
  }
  KEEL_ASSIGN_OR_RETURN(const gguf::Array* scores, optional_array(f, "scores"));
  KEEL_ASSIGN_OR_RETURN(const gguf::Array* types, optional_array(f, "token_type"));
  if (scores != nullptr && scores->items.size() != n) {
    return corrupt(f, key_of("scores") + " has " + std::to_string(scores->items.size()) +
                          " entries but there are " + std::to_string(n) + " tokens");
  }
  if (types != nullptr && types->items.size() != n) {
    return corrupt(f, key_of("token_type") + " has " + std::to_string(types->items.size()) +
                          " entries but there are " + std::to_string(n) + " tokens");
  }
  v->tokens.resize(n);
  v->token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = v->tokens[i];
    t.text = *tokens->items[i].as_string();
    if (t.text.empty()) {
      KEEL_LOG_WARN("{}: empty token at index {}", f.path(), i);
      t.text = "[EMPTY_" + std::to_string(i) + "]";
    }
    if (scores != nullptr) {
      auto score = scores->items[i].as_double();
      if (!score)
        return corrupt(f, key_of("scores") + "[" + std::to_string(i) + "] is not a number");
      t.score = static_cast<float>(*score);
    }
    t.attrs = bit(TokenAttr::kNormal);
    if (types != nullptr) {
      auto type = types->items[i].as_int();
      if (!type) {
        return corrupt(f, key_of("token_type") + "[" + std::to_string(i) + "] is not an integer");
      }
      switch (*type) {  // GGUF token types (llama_token_type)
        case 1:
          t.attrs = bit(TokenAttr::kNormal);
          break;
        case 2:
          t.attrs = bit(TokenAttr::kUnknown);
          break;
        case 3:
          t.attrs = bit(TokenAttr::kControl);
          break;
        case 4:
          t.attrs = bit(TokenAttr::kUserDefined);
          break;
        case 5:
          t.attrs = bit(TokenAttr::kUnused);
          break;
        case 6:
          t.attrs = bit(TokenAttr::kByte);
          break;
        default:
          t.attrs = bit(TokenAttr::kUndefined);
          break;
      }
    }
    auto [it, inserted] = v->token_to_id.emplace(t.text, static_cast<TokenId>(i));
    if (!inserted) {
      return corrupt(f, "duplicate token '" + t.text + "' in " + key_of("tokens") + " (ids " +
                            std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
  return Status();
}

Status read_merges(const GgufFile& f, Vocab* v) {
  KEEL_ASSIGN_OR_RETURN(const gguf::Array* merges, optional_array(f, "merges"));
  if (merges == nullptr) {
    return Status::not_found(f.path() + ": missing " + key_of("merges") + " (required by 'gpt2')");
  }
  if (merges->type != ValueType::kString) {
    return corrupt(f, key_of("merges") + " is an array of " +
                          std::string(value_type_name(merges->type)) + ", expected strings");
  }
  v->merge_ranks.reserve(merges->items.size());
  for (size_t i = 0; i < merges->items.size(); ++i) {
    const std::string& m = *merges->items[i].as_string();
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= m.size()) {
      return corrupt(f, key_of("merges") + "[" + std::to_string(i) + "] = '" + m +
                            "' is not of the form 'left right'");
    }
    if (i > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return corrupt(f, key_of("merges") + " has too many entries");
    }
    v->merge_ranks.emplace(m, static_cast<int32_t>(i));  // a repeated pair keeps its first rank
  }
  return Status();
}

struct SpecialKey {
  const char* name;  // after "tokenizer.ggml."
  TokenId SpecialTokenIds::*field;
  bool strict;  // out-of-range values are errors (otherwise logged and ignored)
};

constexpr SpecialKey kSpecialKeys[] = {
    {"bos_token_id", &SpecialTokenIds::bos, true},
    {"eos_token_id", &SpecialTokenIds::eos, true},
    {"eot_token_id", &SpecialTokenIds::eot, true},
    {"eom_token_id", &SpecialTokenIds::eom, true},
    {"unknown_token_id", &SpecialTokenIds::unk, true},
    {"seperator_token_id", &SpecialTokenIds::sep, false},  // sic: llama.cpp's spelling
    {"padding_token_id", &SpecialTokenIds::pad, false},
    {"mask_token_id", &SpecialTokenIds::mask, false},
    {"fim_pre_token_id", &SpecialTokenIds::fim_pre, false},
    {"fim_suf_token_id", &SpecialTokenIds::fim_suf, false},
    {"fim_mid_token_id", &SpecialTokenIds::fim_mid, false},
    {"fim_pad_token_id", &SpecialTokenIds::fim_pad, false},
    {"fim_rep_token_id", &SpecialTokenIds::fim_rep, false},
    {"fim_sep_token_id", &SpecialTokenIds::fim_sep, false},
    {"prefix_token_id", &SpecialTokenIds::fim_pre, false},  // deprecated names
    {"suffix_token_id", &SpecialTokenIds::fim_suf, false},
    {"middle_token_id", &SpecialTokenIds::fim_mid, false},
};

Status read_special_ids(const GgufFile& f, Vocab* v) {
  for (const SpecialKey& k : kSpecialKeys) {
    TokenId& id = v->special.*k.field;
    if (id != kNoToken && !v->valid(id)) id = kNoToken;  // a default beyond a tiny vocab
    const Value* value = f.find(key_of(k.name));
    if (value == nullptr) continue;
    auto raw = value->as_int();
    if (!raw) {
      return corrupt(f, key_of(k.name) + " has type " +
                            std::string(value_type_name(value->type())) + ", expected integer");
    }
    if (*raw == -1 || *raw == std::numeric_limits<uint32_t>::max()) continue;  // "unset"
    if (*raw < 0 || *raw >= v->size()) {
      const std::string msg = key_of(k.name) + " = " + std::to_string(*raw) +
                              " is out of range for a vocabulary of " + std::to_string(v->size()) +
                              " tokens";
      if (k.strict) return corrupt(f, msg);
      KEEL_LOG_WARN("{}: {}; ignored", f.path(), msg);
      continue;
    }
    id = static_cast<TokenId>(*raw);
  }
  KEEL_TRY(read_optional_bool(f, "add_bos_token", &v->add_bos));
  KEEL_TRY(read_optional_bool(f, "add_eos_token", &v->add_eos));
  bool add_sep = false;
  KEEL_TRY(read_optional_bool(f, "add_sep_token", &add_sep));
  if (add_sep) {
    KEEL_LOG_WARN("{}: {} is set, but keel does not append SEP tokens (encoder-only models)",
                  f.path(), key_of("add_sep_token"));
  }
  if (v->add_bos && v->special.bos == kNoToken) {
    return corrupt(f, key_of("add_bos_token") + " is true but there is no BOS token");
  }
  if (v->add_eos && v->special.eos == kNoToken) {
    return corrupt(f, key_of("add_eos_token") + " is true but there is no EOS token");
  }
  return Status();
}

}  // namespace

Result<Vocab> load_vocab(const GgufFile& file) {
  Vocab v;
  KEEL_ASSIGN_OR_RETURN(std::optional<std::string> model, optional_string(file, "model"));
  if (!model) return Status::not_found(file.path() + ": missing " + key_of("model"));
  v.model = *model;
  KEEL_ASSIGN_OR_RETURN(v.type, vocab_type_for(file, v.model));
  KEEL_ASSIGN_OR_RETURN(std::optional<std::string> pre, optional_string(file, "pre"));
  v.pre = pre.value_or("");
  if (const Value* name = file.find("general.name"); name && name->as_string()) {
    v.general_name = *name->as_string();
  }
  KEEL_TRY(apply_type_defaults(file, &v));
  KEEL_TRY(read_optional_bool(file, "add_space_prefix", &v.add_space_prefix));
  KEEL_TRY(read_tokens(file, &v));
  if (v.type == VocabType::kBpe) KEEL_TRY(read_merges(file, &v));
  KEEL_TRY(read_special_ids(file, &v));
  finalize_special_tokens(&v);
  return v;
}

}  // namespace keel::tokenizer
