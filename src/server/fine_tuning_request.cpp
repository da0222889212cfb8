// POST /v1/fine_tuning/jobs' body (fine_tuning_request.h).
#include "server/fine_tuning_request.h"

#include <fmt/format.h>

#include "server/json_fields.h"

namespace keel::server {
namespace {

// A required string.
MaybeError read_required_string(const Json& body, std::string_view name, std::string* out) {
  std::optional<std::string> v;
  if (MaybeError e = read_string(body, name, &v)) return e;
  if (!v || v->empty()) {
    return ApiError::bad_request(fmt::format("Missing required parameter: '{}'.", name),
                                 std::string(name));
  }
  *out = std::move(*v);
  return std::nullopt;
}

// "auto" (→ nullopt) or an integer in [lo, hi].
MaybeError read_auto_int(const Json& obj, std::string_view prefix, std::string_view name,
                         int64_t lo, int64_t hi, std::optional<int32_t>* out) {
  const Json* v = field(obj, name);
  const std::string param = fmt::format("{}{}", prefix, name);
  if (v == nullptr || (v->is_string() && v->get_ref<const std::string&>() == "auto")) {
    return std::nullopt;
  }
  const std::optional<int64_t> n = as_integer(*v);
  if (!n || *n < lo || *n > hi) {
    return ApiError::bad_request(
        fmt::format("`{}` must be \"auto\" or an integer in [{}, {}], got {}", param, lo, hi,
                    describe_value(*v)),
        param);
  }
  *out = static_cast<int32_t>(*n);
  return std::nullopt;
}

MaybeError read_hyperparameters(const Json& h, std::string_view prefix, FtHyperparameters* out) {
  if (!h.is_object()) return type_error(prefix.substr(0, prefix.size() - 1), "an object", h);
  KEEL_API_TRY(read_auto_int(h, prefix, "n_epochs", 1, 50, &out->n_epochs));
  KEEL_API_TRY(read_auto_int(h, prefix, "batch_size", 1, 256, &out->batch_size));
  const Json* lr = field(h, "learning_rate_multiplier");
  if (lr != nullptr && !(lr->is_string() && lr->get_ref<const std::string&>() == "auto")) {
    const std::string param = fmt::format("{}learning_rate_multiplier", prefix);
    if (!lr->is_number() || !(lr->get<double>() > 0.0) || lr->get<double>() > 100.0) {
      return ApiError::bad_request(
          fmt::format("`{}` must be \"auto\" or a number in (0, 100], got {}", param,
                      describe_value(*lr)),
          param);
    }
    out->learning_rate_multiplier = lr->get<double>();
  }
  return std::nullopt;
}

// method: {type: "supervised", supervised: {hyperparameters}}; sets *given when it holds them.
MaybeError read_method(const Json& body, FtHyperparameters* out, bool* given) {
  const Json* method = field(body, "method");
  if (method == nullptr) return std::nullopt;
  if (!method->is_object()) return type_error("method", "an object", *method);
  std::optional<std::string> type;
  KEEL_API_TRY(read_string(*method, "type", &type));
  if (type && *type != "supervised") {
    return ApiError::bad_request(
        fmt::format("Only the \"supervised\" method is offered here, not \"{}\".",
                    type->substr(0, 32)),
        "method.type");
  }
  const Json* sup = field(*method, "supervised");
  if (sup == nullptr) return std::nullopt;
  if (!sup->is_object()) return type_error("method.supervised", "an object", *sup);
  const Json* h = field(*sup, "hyperparameters");
  if (h == nullptr) return std::nullopt;
  *given = true;
  return read_hyperparameters(*h, "method.supervised.hyperparameters.", out);
}

MaybeError read_suffix(const Json& body, std::optional<std::string>* out) {
  KEEL_API_TRY(read_string(body, "suffix", out));
  if (!*out) return std::nullopt;
  bool ok = !(*out)->empty() && (*out)->size() <= 64;
  for (char c : **out) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.');
  }
  if (!ok) {
    return ApiError::bad_request(
        "`suffix` must have 1 to 64 characters of letters, digits, '-', '_' and '.'", "suffix");
  }
  return std::nullopt;
}

MaybeError read_metadata(const Json& body, Json* out) {
  const Json* metadata = field(body, "metadata");
  if (metadata == nullptr) return std::nullopt;
  if (!metadata->is_object()) return type_error("metadata", "an object", *metadata);
  if (metadata->size() > 16) {
    return ApiError::bad_request("`metadata` may hold at most 16 keys", "metadata");
  }
  for (const auto& [key, value] : metadata->items()) {
    if (key.size() > 64 || !value.is_string() || value.get_ref<const std::string&>().size() > 512) {
      return ApiError::bad_request(
          "`metadata` keys must be at most 64 characters and values strings of at most 512",
          "metadata");
    }
  }
  *out = *metadata;
  return std::nullopt;
}

}  // namespace

ApiResult<FineTuningCreate> parse_fine_tuning_create(const Json& body) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  FineTuningCreate c;
  KEEL_API_TRY(read_required_string(body, "model", &c.model));
  KEEL_API_TRY(read_required_string(body, "training_file", &c.training_file));
  KEEL_API_TRY(read_string(body, "validation_file", &c.validation_file));
  KEEL_API_TRY(read_suffix(body, &c.suffix));
  KEEL_API_TRY(read_int(body, "seed", 0, 2147483647, &c.seed));
  KEEL_API_TRY(read_metadata(body, &c.metadata));
  if (const Json* h = field(body, "hyperparameters")) {
    KEEL_API_TRY(read_hyperparameters(*h, "hyperparameters.", &c.hyperparameters));
  }
  bool in_method = false;
  FtHyperparameters from_method;
  KEEL_API_TRY(read_method(body, &from_method, &in_method));
  if (in_method) {
    if (field(body, "hyperparameters") != nullptr) {
      return ApiError::bad_request(
          "Give the hyperparameters either at the top level or under "
          "method.supervised.hyperparameters, not both.",
          "hyperparameters");
    }
    c.hyperparameters = from_method;
  }
  if (const Json* integrations = field(body, "integrations")) {
    if (!integrations->is_array() || !integrations->empty()) {
      return ApiError::bad_request("Integrations (Weights & Biases) are not offered by keel.",
                                   "integrations");
    }
  }
  return c;
}

}  // namespace keel::server
