// check_same_vocabulary / open_draft_model (see draft_model.h).
#include "draft/draft_model.h"

#include <string_view>

#include "gguf/reader.h"

namespace keel::draft {
namespace {

constexpr std::string_view kTokens = "tokenizer.ggml.tokens";

Status differs(const std::string& draft_name, const std::string& what) {
  return Status::invalid_argument("draft model " + draft_name +
                                  ": its vocabulary differs from the target's: " + what);
}

// A metadata value as text for a message ("(none)" when absent).
std::string describe(const gguf::Value* v) {
  if (v == nullptr) return "(none)";
  if (const std::string* s = v->as_string()) return "'" + *s + "'";
  if (std::optional<int64_t> i = v->as_int()) return std::to_string(*i);
  return "(a " + std::string(gguf::value_type_name(v->type())) + ")";
}

bool same_value(const gguf::Value* a, const gguf::Value* b) {
  if (a == nullptr || b == nullptr) return a == b;
  if (a->as_string() != nullptr || b->as_string() != nullptr) {
    return a->as_string() != nullptr && b->as_string() != nullptr &&
           *a->as_string() == *b->as_string();
  }
  return a->as_int() == b->as_int();
}

}  // namespace

Status check_same_vocabulary(const model::Model& target, const model::Model& draft,
                             const std::string& draft_name) {
  const int64_t nt = target.hparams().n_vocab, nd = draft.hparams().n_vocab;
  if (nt != nd) {
    return differs(draft_name,
                   std::to_string(nd) + " tokens, the target has " + std::to_string(nt));
  }
  const gguf::GgufFile& tf = target.file();
  const gguf::GgufFile& df = draft.file();
  if (tf.find(kTokens) == nullptr) return Status();  // no tokenizer to compare: the ids suffice
  for (const char* key :
       {"tokenizer.ggml.model", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    const gguf::Value* a = tf.find(key);
    const gguf::Value* b = df.find(key);
    if (!same_value(a, b)) {
      return differs(draft_name,
                     std::string(key) + " is " + describe(b) + ", the target's is " + describe(a));
    }
  }
  const gguf::Array* ta = tf.find(kTokens)->as_array();
  const gguf::Value* dv = df.find(kTokens);
  const gguf::Array* da = dv != nullptr ? dv->as_array() : nullptr;
  if (da == nullptr) return differs(draft_name, "it has no tokenizer.ggml.tokens");
  if (ta == nullptr || ta->items.size() != da->items.size()) {
    return differs(draft_name, std::to_string(da->items.size()) + " token texts, the target has " +
                                   (ta == nullptr ? "none" : std::to_string(ta->items.size())));
  }
  for (size_t i = 0; i < ta->items.size(); ++i) {
    if (!same_value(&ta->items[i], &da->items[i])) {
      return differs(draft_name, "token " + std::to_string(i) + " is " + describe(&da->items[i]) +
                                     ", not " + describe(&ta->items[i]));
    }
  }
  return Status();
}

Result<std::unique_ptr<model::Model>> open_draft_model(const std::string& path,
                                                       const model::Model& target) {
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::open(path));
  KEEL_TRY(check_same_vocabulary(target, *m, path));
  return m;
}

}  // namespace keel::draft
