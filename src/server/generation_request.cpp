// parse_chat_request / parse_completion_request (see generation_request.h): the fields both
// endpoints share (sampling, stop, n, streaming, extras) are read by parse_common(); each endpoint
// then reads its own (messages / prompt, token limits, logprobs flavour).
#include "server/generation_request.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "server/json_fields.h"
#include "server/structured_output.h"

namespace keel::server {
namespace {

constexpr int64_t kMaxTokensCap = std::numeric_limits<int32_t>::max();
constexpr double kMaxLogitBias = 100.0;
constexpr size_t kMaxCacheSaltBytes = 1024;
constexpr size_t kMaxCacheIdBytes = 128;

MaybeError parse_stop(const Json& body, const ParseLimits& limits, GenerationSpec* spec) {
  const Json* stop = field(body, "stop");
  if (stop == nullptr) return std::nullopt;
  std::vector<std::string> stops;
  if (stop->is_string()) {
    stops.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (size_t i = 0; i < stop->size(); ++i) {
      if (!(*stop)[i].is_string()) {
        return type_error(fmt::format("stop[{}]", i), "a string", (*stop)[i]);
      }
      stops.push_back((*stop)[i].get<std::string>());
    }
  } else {
    return type_error("stop", "a string or an array of strings", *stop);
  }
  if (stops.size() > static_cast<size_t>(limits.max_stop_strings)) {
    return ApiError::bad_request(fmt::format("`stop` may hold at most {} strings, got {}",
                                             limits.max_stop_strings, stops.size()),
                                 "stop");
  }
  for (std::string& s : stops) {
    if (s.size() > static_cast<size_t>(limits.max_stop_string_bytes)) {
      return ApiError::bad_request(fmt::format("each `stop` string may be at most {} bytes, got {}",
                                               limits.max_stop_string_bytes, s.size()),
                                   "stop");
    }
    if (!s.empty()) spec->stop.push_back(std::move(s));
  }
  return std::nullopt;
}

MaybeError parse_token_id_list(const Json& body, std::string_view name, int32_t vocab_size,
                               std::vector<int32_t>* out) {
  const Json* list = field(body, name);
  if (list == nullptr) return std::nullopt;
  if (!list->is_array()) return type_error(name, "an array of token ids", *list);
  for (const Json& v : *list) {
    const std::optional<int64_t> id = as_integer(v);
    if (!v.is_number() || !id || *id < 0 || *id >= vocab_size) {
      return ApiError::bad_request(fmt::format("`{}` must hold token ids in [0, {}), got {}", name,
                                               vocab_size, describe_value(v)),
                                   std::string(name));
    }
    out->push_back(static_cast<int32_t>(*id));
  }
  return std::nullopt;
}

MaybeError parse_logit_bias(const Json& body, int32_t vocab_size, sampling::SamplingParams* sp) {
  const Json* bias = field(body, "logit_bias");
  if (bias == nullptr) return std::nullopt;
  if (!bias->is_object()) return type_error("logit_bias", "an object", *bias);
  for (const auto& [key, value] : bias->items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= vocab_size) {
      return ApiError::bad_request(
          fmt::format("`logit_bias` keys must be token ids in [0, {}), got \"{}\"", vocab_size,
                      key.substr(0, 64)),
          "logit_bias");
    }
    if (!value.is_number() || !(value.get<double>() >= -kMaxLogitBias) ||
        !(value.get<double>() <= kMaxLogitBias)) {
      return ApiError::bad_request(
          fmt::format("`logit_bias` values must be numbers in [-100, 100], got {} for token {}",
                      describe_value(value), key.substr(0, 64)),
          "logit_bias");
    }
    sp->logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  return std::nullopt;
}

MaybeError parse_sampling(const Json& body, sampling::SamplingParams* sp) {
  std::optional<double> d;
  KEEL_API_TRY(read_number(body, "temperature", 0.0, 2.0, false, &d));
  if (d) sp->temperature = static_cast<float>(*d);
  d.reset();
  KEEL_API_TRY(read_number(body, "top_p", 0.0, 1.0, true, &d));
  if (d) sp->top_p = static_cast<float>(*d);
  d.reset();
  KEEL_API_TRY(read_number(body, "min_p", 0.0, 1.0, false, &d));
  if (d) sp->min_p = static_cast<float>(*d);
  d.reset();
  KEEL_API_TRY(read_number(body, "presence_penalty", -2.0, 2.0, false, &d));
  if (d) sp->presence_penalty = static_cast<float>(*d);
  d.reset();
  KEEL_API_TRY(read_number(body, "frequency_penalty", -2.0, 2.0, false, &d));
  if (d) sp->frequency_penalty = static_cast<float>(*d);
  d.reset();
  KEEL_API_TRY(read_number(body, "repetition_penalty", 0.0, 1e6, true, &d));
  if (d) sp->repetition_penalty = static_cast<float>(*d);
  std::optional<int64_t> i;
  KEEL_API_TRY(read_int(body, "top_k", -1, std::numeric_limits<int32_t>::max(), &i));
  if (i) sp->top_k = static_cast<int32_t>(*i);
  i.reset();
  KEEL_API_TRY(read_int(body, "seed", std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), &i));
  if (i) sp->seed = static_cast<uint64_t>(*i);
  return std::nullopt;
}

MaybeError parse_streaming(const Json& body, GenerationSpec* spec) {
  KEEL_API_TRY(read_bool(body, "stream", &spec->stream));
  const Json* opts = field(body, "stream_options");
  if (opts == nullptr) return std::nullopt;
  if (!spec->stream) {
    return ApiError::bad_request("Stream options can only be defined when `stream=True`.",
                                 "stream_options");
  }
  if (!opts->is_object()) return type_error("stream_options", "an object", *opts);
  const Json* usage = field(*opts, "include_usage");
  if (usage != nullptr) {
    if (!usage->is_boolean())
      return type_error("stream_options.include_usage", "a boolean", *usage);
    spec->include_usage = usage->get<bool>();
  }
  return std::nullopt;
}

MaybeError parse_sparse(const Json& body, GenerationSpec* spec) {
  const Json* sp = field(body, "sparse");
  if (sp == nullptr) return std::nullopt;
  if (!sp->is_object()) return type_error("sparse", "an object", *sp);
  for (const auto& [key, value] : sp->items()) {
    if (key != "policy" && key != "budget") {
      return ApiError::bad_request("`sparse` takes only `policy` and `budget`", "sparse." + key);
    }
  }
  const Json* policy = field(*sp, "policy");
  if (policy == nullptr) return ApiError::bad_request("`sparse.policy` is required", "sparse");
  static constexpr std::string_view kPolicies[] = {"dense", "streaming", "h2o", "quest", "raas"};
  if (!policy->is_string() || std::find(std::begin(kPolicies), std::end(kPolicies),
                                        policy->get<std::string>()) == std::end(kPolicies)) {
    return ApiError::bad_request(
        "`sparse.policy` must be \"dense\", \"streaming\", \"h2o\", \"quest\" or \"raas\"",
        "sparse.policy");
  }
  spec->sparse_policy = policy->get<std::string>();
  if (const Json* budget = field(*sp, "budget")) {
    if (!budget->is_number_integer() || budget->get<int64_t>() < 1 ||
        budget->get<int64_t>() > (int64_t{1} << 20)) {
      return ApiError::bad_request("`sparse.budget` must be an integer in [1, 1048576]",
                                   "sparse.budget");
    }
    spec->sparse_budget = static_cast<int32_t>(budget->get<int64_t>());
  }
  return std::nullopt;
}

MaybeError parse_speculative(const Json& body, GenerationSpec* spec) {
  const Json* sp = field(body, "speculative");
  if (sp == nullptr) return std::nullopt;
  if (!sp->is_object()) return type_error("speculative", "an object", *sp);
  engine::SpeculativeParams p;
  for (const auto& [key, value] : sp->items()) {
    int32_t* target = key == "k"           ? &p.k
                      : key == "ngram_max" ? &p.ngram_max
                      : key == "ngram_min" ? &p.ngram_min
                                           : nullptr;
    if (key == "method") continue;
    if (target == nullptr) {
      return ApiError::bad_request(
          "`speculative` takes only `method`, `k`, `ngram_max` and "
          "`ngram_min`",
          "speculative." + key);
    }
    if (!value.is_number_integer()) return type_error("speculative." + key, "an integer", value);
    // Out-of-range values are named by validate() below.
    *target = static_cast<int32_t>(std::clamp<int64_t>(value.get<int64_t>(), -1, 1 << 20));
  }
  const Json* method = field(*sp, "method");
  const std::optional<engine::SpecMethod> m =
      method != nullptr && method->is_string()
          ? engine::parse_spec_method(method->get<std::string>())
          : std::nullopt;
  if (!m) {
    return ApiError::bad_request(
        "`speculative.method` must be \"ngram\", \"draft-head\", \"draft-model\" or \"none\"",
        "speculative.method");
  }
  p.method = *m;
  if (Status st = p.validate(); !st.ok()) {
    const std::string& msg = st.message();
    return ApiError::bad_request(msg, msg.substr(0, msg.find(' ')));
  }
  spec->speculative = p;
  return std::nullopt;
}

// `early_exit`: true / false, or {"threshold": number, "layers": [int, ...]} (enabled).
MaybeError parse_early_exit(const Json& body, GenerationSpec* spec) {
  const Json* ee = field(body, "early_exit");
  if (ee == nullptr) return std::nullopt;
  engine::EarlyExitParams p;
  if (ee->is_boolean()) {
    p.enabled = ee->get<bool>();
    spec->early_exit = p;
    return std::nullopt;
  }
  if (!ee->is_object()) return type_error("early_exit", "a boolean or an object", *ee);
  p.enabled = true;
  for (const auto& [key, value] : ee->items()) {
    if (key == "threshold") {
      if (!value.is_number()) return type_error("early_exit.threshold", "a number", value);
      p.threshold = value.get<float>();
    } else if (key == "layers") {
      if (!value.is_array()) return type_error("early_exit.layers", "an array", value);
      for (const Json& l : value) {
        if (!l.is_number_integer()) return type_error("early_exit.layers", "integers", l);
        p.layers.push_back(
            static_cast<int32_t>(std::clamp<int64_t>(l.get<int64_t>(), -1, 1 << 20)));
      }
    } else {
      return ApiError::bad_request("`early_exit` takes only `threshold` and `layers`",
                                   "early_exit." + key);
    }
  }
  if (Status st = p.validate(); !st.ok()) {
    const std::string& msg = st.message();
    return ApiError::bad_request(msg, msg.substr(0, msg.find(' ')));
  }
  spec->early_exit = p;
  return std::nullopt;
}

MaybeError parse_common(const Json& body, const ParseLimits& limits, GenerationSpec* spec) {
  std::optional<std::string> s;
  KEEL_API_TRY(read_string(body, "model", &s));
  if (s) spec->model = std::move(*s);
  std::optional<int64_t> n;
  KEEL_API_TRY(read_int(body, "n", 1, limits.max_n, &n));
  if (n) spec->n = static_cast<int32_t>(*n);
  KEEL_API_TRY(parse_sampling(body, &spec->sampling));
  KEEL_API_TRY(parse_logit_bias(body, limits.vocab_size, &spec->sampling));
  KEEL_API_TRY(parse_stop(body, limits, spec));
  KEEL_API_TRY(
      parse_token_id_list(body, "stop_token_ids", limits.vocab_size, &spec->stop_token_ids));
  KEEL_API_TRY(read_bool(body, "ignore_eos", &spec->ignore_eos));
  KEEL_API_TRY(parse_streaming(body, spec));
  KEEL_API_TRY(parse_cache_salt(body, &spec->cache_salt));
  KEEL_API_TRY(parse_prompt_cache_key(body, &spec->prompt_cache_key));
  n.reset();
  KEEL_API_TRY(read_int(body, "priority", std::numeric_limits<int32_t>::min(),
                        std::numeric_limits<int32_t>::max(), &n));
  if (n) spec->priority = static_cast<int32_t>(*n);
  KEEL_API_TRY(parse_structured_output(body, &spec->grammar));
  s.reset();
  KEEL_API_TRY(read_string(body, "cache_id", &s));
  if (s) {
    if (s->empty() || s->size() > kMaxCacheIdBytes) {
      return ApiError::bad_request("`cache_id` must be a string of 1 to 128 bytes", "cache_id");
    }
    spec->cache_id = std::move(*s);
  }
  s.reset();
  KEEL_API_TRY(read_string(body, "pic_link", &s));
  if (s) {
    Result<kv::PicVariant> v = kv::PicVariant::parse(*s);
    if (!v.ok()) {
      return ApiError::bad_request(
          "`pic_link` must be \"full\", \"naive\", \"legolink-K\" (K in [0, 4096]) or "
          "\"cacheblend-R\" (R in [0, 100])",
          "pic_link");
    }
    spec->pic_link = *v;
  }
  KEEL_API_TRY(parse_sparse(body, spec));
  KEEL_API_TRY(parse_early_exit(body, spec));
  return parse_speculative(body, spec);
}

// Tool calling (tool_request.h); a forced call is a grammar of its own, so it excludes the
// structured-output fields.
MaybeError parse_tools(const Json& body, GenerationSpec* spec) {
  KEEL_API_TRY(parse_tool_request(body, &spec->tools));
  if (spec->tools.forced() && !spec->grammar.empty()) {
    return ApiError::bad_request(
        "a forced `tool_choice` (\"required\" or a function) cannot be combined with "
        "`response_format`, `grammar` or `regex`",
        "tool_choice");
  }
  return std::nullopt;
}

MaybeError check_choice_count(const GenerationSpec& spec, const ParseLimits& limits) {
  const int64_t total = static_cast<int64_t>(spec.num_prompts()) * spec.n;
  if (total > limits.max_choices) {
    return ApiError::bad_request(
        fmt::format("prompts × n = {} exceeds the limit of {} choices per request", total,
                    limits.max_choices),
        "n");
  }
  return std::nullopt;
}

MaybeError finish_sampling(GenerationSpec* spec, const ParseLimits& limits) {
  if (spec->logprobs) spec->sampling.logprobs = spec->top_logprobs;
  const Status st = spec->sampling.validate(limits.vocab_size);
  if (!st.ok()) return ApiError::bad_request(st.message());
  return std::nullopt;
}

ApiResult<GenerationSpec> parse_chat(const Json& body, const ParseLimits& limits) {
  GenerationSpec spec;
  spec.kind = ApiKind::kChat;
  const Json* messages = field(body, "messages");
  if (messages == nullptr) return ApiError::bad_request("`messages` is required", "messages");
  ApiResult<std::vector<ChatMessage>> parsed = parse_messages(*messages);
  if (!parsed.ok()) return parsed.error();
  spec.messages = std::move(parsed.value());
  KEEL_API_TRY(parse_common(body, limits, &spec));
  KEEL_API_TRY(parse_tools(body, &spec));
  std::optional<int64_t> max_tokens, max_completion_tokens, top_logprobs;
  KEEL_API_TRY(read_int(body, "max_tokens", 1, kMaxTokensCap, &max_tokens));
  KEEL_API_TRY(read_int(body, "max_completion_tokens", 1, kMaxTokensCap, &max_completion_tokens));
  if (max_completion_tokens) max_tokens = max_completion_tokens;
  if (max_tokens) spec.max_tokens = static_cast<int32_t>(*max_tokens);
  KEEL_API_TRY(read_bool(body, "logprobs", &spec.logprobs));
  KEEL_API_TRY(read_int(body, "top_logprobs", 0, sampling::kMaxLogprobs, &top_logprobs));
  if (top_logprobs) {
    if (*top_logprobs > 0 && !spec.logprobs) {
      return ApiError::bad_request("`top_logprobs` requires `logprobs` to be true", "top_logprobs");
    }
    spec.top_logprobs = static_cast<int32_t>(*top_logprobs);
  }
  KEEL_API_TRY(read_bool(body, "add_generation_prompt", &spec.add_generation_prompt));
  KEEL_API_TRY(parse_chat_template_kwargs(body, &spec.chat_template_kwargs));
  KEEL_API_TRY(check_choice_count(spec, limits));
  KEEL_API_TRY(finish_sampling(&spec, limits));
  return spec;
}

ApiResult<GenerationSpec> parse_completion(const Json& body, const ParseLimits& limits) {
  GenerationSpec spec;
  spec.kind = ApiKind::kCompletion;
  const Json* prompt = field(body, "prompt");
  if (prompt == nullptr) return ApiError::bad_request("`prompt` is required", "prompt");
  ApiResult<std::vector<PromptInput>> prompts = parse_prompt(*prompt, limits.vocab_size);
  if (!prompts.ok()) return prompts.error();
  spec.prompts = std::move(prompts.value());
  KEEL_API_TRY(parse_common(body, limits, &spec));
  std::optional<int64_t> max_tokens, logprobs, best_of;
  KEEL_API_TRY(read_int(body, "max_tokens", 1, kMaxTokensCap, &max_tokens));
  spec.max_tokens = max_tokens ? static_cast<int32_t>(*max_tokens) : 16;
  KEEL_API_TRY(read_int(body, "logprobs", 0, sampling::kMaxLogprobs, &logprobs));
  if (logprobs) {
    spec.logprobs = true;
    spec.top_logprobs = static_cast<int32_t>(*logprobs);
  }
  KEEL_API_TRY(read_bool(body, "echo", &spec.echo));
  std::optional<std::string> suffix;
  KEEL_API_TRY(read_string(body, "suffix", &suffix));
  if (suffix && !suffix->empty()) {
    return ApiError::bad_request("`suffix` is not supported", "suffix", "unsupported_value");
  }
  KEEL_API_TRY(read_int(body, "best_of", 1, kMaxTokensCap, &best_of));
  if (best_of && *best_of != 1 && *best_of != spec.n) {
    return ApiError::bad_request("`best_of` other than 1 (or n) is not supported", "best_of",
                                 "unsupported_value");
  }
  KEEL_API_TRY(check_choice_count(spec, limits));
  KEEL_API_TRY(finish_sampling(&spec, limits));
  return spec;
}

}  // namespace

MaybeError parse_prompt_cache_key(const Json& body, std::string* out) {
  std::optional<std::string> s;
  KEEL_API_TRY(read_string(body, "prompt_cache_key", &s));
  if (s) {
    if (s->size() > kMaxCacheSaltBytes) {
      return ApiError::bad_request("`prompt_cache_key` must be a string of at most 1024 bytes",
                                   "prompt_cache_key");
    }
    *out = std::move(*s);
  }
  return std::nullopt;
}

MaybeError parse_cache_salt(const Json& body, std::string* out) {
  std::optional<std::string> s;
  KEEL_API_TRY(read_string(body, "cache_salt", &s));
  if (s) {
    if (s->empty() || s->size() > kMaxCacheSaltBytes) {
      return ApiError::bad_request("`cache_salt` must be a string of 1 to 1024 bytes",
                                   "cache_salt");
    }
    *out = std::move(*s);
  }
  return std::nullopt;
}

MaybeError parse_chat_template_kwargs(const Json& body, nlohmann::ordered_json* out) {
  const Json* kwargs = field(body, "chat_template_kwargs");
  if (kwargs == nullptr) return std::nullopt;
  if (!kwargs->is_object()) return type_error("chat_template_kwargs", "an object", *kwargs);
  for (const auto& [key, value] : kwargs->items()) {
    if (tokenizer::is_reserved_variable(key)) {
      return ApiError::bad_request(
          fmt::format("`chat_template_kwargs` may not set `{}`: the server sets it", key),
          "chat_template_kwargs." + key);
    }
  }
  *out = nlohmann::ordered_json::parse(kwargs->dump());
  return std::nullopt;
}

ApiResult<GenerationSpec> parse_chat_request(const Json& body, const ParseLimits& limits) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  return parse_chat(body, limits);
}

ApiResult<GenerationSpec> parse_completion_request(const Json& body, const ParseLimits& limits) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  return parse_completion(body, limits);
}

}  // namespace keel::server
