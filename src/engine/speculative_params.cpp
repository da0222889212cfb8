// SpeculativeParams: method names and validation.
#include "engine/speculative_params.h"

namespace keel::engine {

std::string_view spec_method_name(SpecMethod m) {
  switch (m) {
    case SpecMethod::kNone:
      return "none";
    case SpecMethod::kNgram:
      return "ngram";
    case SpecMethod::kDraftHead:
      return "draft-head";
    case SpecMethod::kDraftModel:
      return "draft-model";
  }
  return "none";
}

std::optional<SpecMethod> parse_spec_method(std::string_view name) {
  if (name == "none") return SpecMethod::kNone;
  if (name == "ngram") return SpecMethod::kNgram;
  if (name == "draft-head") return SpecMethod::kDraftHead;
  if (name == "draft-model") return SpecMethod::kDraftModel;
  return std::nullopt;
}

Status SpeculativeParams::validate() const {
  if (k < 1 || k > kMaxSpecK) {
    return Status::invalid_argument("speculative.k must be in [1, " + std::to_string(kMaxSpecK) +
                                    "], got " + std::to_string(k));
  }
  if (ngram_min < 1 || ngram_min > kMaxSpecNgram) {
    return Status::invalid_argument("speculative.ngram_min must be in [1, " +
                                    std::to_string(kMaxSpecNgram) + "], got " +
                                    std::to_string(ngram_min));
  }
  if (ngram_max < ngram_min || ngram_max > kMaxSpecNgram) {
    return Status::invalid_argument(
        "speculative.ngram_max must be in [ngram_min (" + std::to_string(ngram_min) + "), " +
        std::to_string(kMaxSpecNgram) + "], got " + std::to_string(ngram_max));
  }
  return Status::ok_status();
}

}  // namespace keel::engine
