// The wire codec's messages (see wire.h): each struct of types.h ⇄ a named-field map. Encoders omit
// fields at their default; decoders start from a default-constructed value and read what is there.
// The stats and metrics bodies live in wire_stats.cpp.
#include "engine/wire.h"

#include <exception>
#include <string>
#include <utility>

#include "engine/wire_json.h"

namespace keel::engine::wire {
namespace {

using detail::decode_metrics_body;
using detail::decode_stats_body;
using detail::encode_metrics_body;
using detail::encode_stats_body;
using detail::FieldReader;
using detail::Json;
using detail::kFinishReasons;

// --- enums by name (stable when the enums are reordered) ---

std::string_view pic_mode_name(kv::PicMode m) {
  switch (m) {
    case kv::PicMode::kFull:
      return "full";
    case kv::PicMode::kNaive:
      return "naive";
    case kv::PicMode::kLegoLink:
      return "legolink";
    case kv::PicMode::kCacheBlend:
      return "cacheblend";
  }
  return "unknown";
}

std::string_view logprobs_source_name(sampling::LogprobsSource s) {
  switch (s) {
    case sampling::LogprobsSource::kRaw:
      return "raw";
    case sampling::LogprobsSource::kProcessed:
      return "processed";
  }
  return "unknown";
}

// Reads enum field `key` by name into *out (untouched when the field is missing); an unknown
// name is an error.
template <typename Enum, size_t N, typename NameFn>
void read_enum(FieldReader& r, const char* key, const Enum (&values)[N], NameFn name, Enum* out) {
  if (!r.has(key)) return;
  std::string text;
  r.str(key, &text);
  if (!r.ok()) return;
  for (Enum v : values) {
    if (name(v) == text) {
      *out = v;
      return;
    }
  }
  r.fail(key, "unknown value \"" + text + "\"");
}

// Reads a list of [int32, float] pairs (logit biases, top logprobs).
void read_pairs(FieldReader& r, const char* key, std::vector<std::pair<int32_t, float>>* out) {
  const Json* list = r.array(key);
  if (list == nullptr) return;
  for (const Json& pair : *list) {
    std::pair<int32_t, float> entry;
    if (!pair.is_array() || pair.size() != 2 || !detail::to_i32(pair[0], &entry.first) ||
        !detail::to_f32(pair[1], &entry.second)) {
      return r.fail(key, "expected [int32, number] pairs, got " + detail::describe(pair));
    }
    out->push_back(entry);
  }
}

// --- sampling parameters ---

Json encode_sampling(const sampling::SamplingParams& p) {
  const sampling::SamplingParams d;
  Json j = Json::object();
  if (p.temperature != d.temperature) j["temperature"] = p.temperature;
  if (p.top_k != d.top_k) j["top_k"] = p.top_k;
  if (p.top_p != d.top_p) j["top_p"] = p.top_p;
  if (p.min_p != d.min_p) j["min_p"] = p.min_p;
  if (p.repetition_penalty != d.repetition_penalty) j["repetition_penalty"] = p.repetition_penalty;
  if (p.presence_penalty != d.presence_penalty) j["presence_penalty"] = p.presence_penalty;
  if (p.frequency_penalty != d.frequency_penalty) j["frequency_penalty"] = p.frequency_penalty;
  if (!p.logit_bias.empty()) {
    Json bias = Json::array();
    for (const auto& [id, b] : p.logit_bias) bias.push_back(Json::array({id, b}));
    j["logit_bias"] = std::move(bias);
  }
  if (p.seed) j["seed"] = *p.seed;
  if (p.logprobs) j["logprobs"] = *p.logprobs;
  if (p.logprobs_source != d.logprobs_source) {
    j["logprobs_source"] = std::string(logprobs_source_name(p.logprobs_source));
  }
  return j;
}

Status decode_sampling(const Json& j, sampling::SamplingParams* p) {
  FieldReader r(j, "generation_request.sampling");
  r.f32("temperature", &p->temperature);
  r.i32("top_k", &p->top_k);
  r.f32("top_p", &p->top_p);
  r.f32("min_p", &p->min_p);
  r.f32("repetition_penalty", &p->repetition_penalty);
  r.f32("presence_penalty", &p->presence_penalty);
  r.f32("frequency_penalty", &p->frequency_penalty);
  read_pairs(r, "logit_bias", &p->logit_bias);
  r.optional_u64("seed", &p->seed);
  r.optional_i32("logprobs", &p->logprobs);
  constexpr sampling::LogprobsSource kSources[] = {sampling::LogprobsSource::kRaw,
                                                   sampling::LogprobsSource::kProcessed};
  read_enum(r, "logprobs_source", kSources, logprobs_source_name, &p->logprobs_source);
  return r.status();
}

// --- the generation request ---

Json encode_pic_variant(const kv::PicVariant& v) {
  return Json{{"mode", std::string(pic_mode_name(v.mode))}, {"k", v.k}, {"percent", v.percent}};
}

Status decode_pic_variant(const Json& j, kv::PicVariant* v) {
  FieldReader r(j, "generation_request.pic_link");
  constexpr kv::PicMode kModes[] = {kv::PicMode::kFull, kv::PicMode::kNaive, kv::PicMode::kLegoLink,
                                    kv::PicMode::kCacheBlend};
  read_enum(r, "mode", kModes, pic_mode_name, &v->mode);
  r.i32("k", &v->k);
  r.i32("percent", &v->percent);
  return r.status();
}

Json encode_request_body(const GenerationRequest& q) {
  Json j = Json::object();
  if (!q.request_id.empty()) j["request_id"] = q.request_id;
  j["prompt_tokens"] = q.prompt_tokens;
  if (Json s = encode_sampling(q.sampling); !s.empty()) j["sampling"] = std::move(s);
  j["max_tokens"] = q.max_tokens;
  if (q.resumed_tokens != 0) j["resumed_tokens"] = q.resumed_tokens;
  if (q.ignore_eos) j["ignore_eos"] = true;
  if (!q.stop_token_ids.empty()) j["stop_token_ids"] = q.stop_token_ids;
  if (!q.stop_strings.empty()) j["stop_strings"] = q.stop_strings;
  if (!q.grammar.empty()) j["grammar"] = q.grammar;
  if (!q.cache_salt.empty()) j["cache_salt"] = q.cache_salt;
  if (q.work_class != WorkClass::kInteractive) {
    j["work_class"] = std::string(work_class_name(q.work_class));
  }
  if (q.priority != 0) j["priority"] = q.priority;
  if (!q.tenant.empty()) j["tenant"] = q.tenant;
  if (q.tenant_weight != 1.0) j["tenant_weight"] = q.tenant_weight;
  if (!q.program.empty()) j["program"] = q.program;
  if (q.keep_kv) j["keep_kv"] = true;  // absent (an older peer): false
  if (!q.lora.empty()) j["lora"] = q.lora;
  if (!q.retain_as.empty()) j["retain_as"] = q.retain_as;
  if (q.retain_ms != 0) j["retain_ms"] = q.retain_ms;
  if (!q.retain_description.empty()) j["retain_description"] = q.retain_description;
  if (!q.pic_chunks.empty()) {
    Json chunks = Json::array();
    for (const kv::PicChunk& c : q.pic_chunks) chunks.push_back(Json::array({c.start, c.len}));
    j["pic_chunks"] = std::move(chunks);
  }
  if (q.pic_link) j["pic_link"] = encode_pic_variant(*q.pic_link);
  if (q.sparse) j["sparse"] = Json{{"policy", q.sparse->policy}, {"budget", q.sparse->budget}};
  if (q.speculative) {
    j["speculative"] = Json{{"method", std::string(spec_method_name(q.speculative->method))},
                            {"k", q.speculative->k},
                            {"ngram_max", q.speculative->ngram_max},
                            {"ngram_min", q.speculative->ngram_min}};
  }
  if (q.early_exit) {
    j["early_exit"] = Json{{"enabled", q.early_exit->enabled},
                           {"threshold", q.early_exit->threshold},
                           {"layers", q.early_exit->layers}};
  }
  return j;
}

Status decode_request_body(const Json& j, GenerationRequest* q) {
  FieldReader r(j, "generation_request");
  r.str("request_id", &q->request_id);
  r.i32_list("prompt_tokens", &q->prompt_tokens);
  if (const Json* s = r.object("sampling")) KEEL_TRY(decode_sampling(*s, &q->sampling));
  r.i32("max_tokens", &q->max_tokens);
  r.i32("resumed_tokens", &q->resumed_tokens);  // missing: 0, a request that is not resumed
  r.boolean("ignore_eos", &q->ignore_eos);
  r.i32_list("stop_token_ids", &q->stop_token_ids);
  r.str_list("stop_strings", &q->stop_strings);
  r.str("grammar", &q->grammar);
  r.str("cache_salt", &q->cache_salt);
  constexpr WorkClass kClasses[] = {WorkClass::kInteractive, WorkClass::kBatch,
                                    WorkClass::kTraining};
  read_enum(r, "work_class", kClasses, work_class_name, &q->work_class);  // missing: interactive
  r.i32("priority", &q->priority);
  r.str("tenant", &q->tenant);
  r.f64("tenant_weight", &q->tenant_weight);
  r.str("program", &q->program);
  r.boolean("keep_kv", &q->keep_kv);  // missing (an older peer's frame): false, no pin
  r.str("lora", &q->lora);
  r.str("retain_as", &q->retain_as);
  r.i64("retain_ms", &q->retain_ms);
  r.str("retain_description", &q->retain_description);
  if (const Json* chunks = r.array("pic_chunks")) {
    for (const Json& c : *chunks) {
      if (!c.is_array() || c.size() != 2) {
        r.fail("pic_chunks", "expected [start, len] pairs");
        break;
      }
      kv::PicChunk chunk;
      if (!detail::to_i32(c[0], &chunk.start) || !detail::to_i32(c[1], &chunk.len)) {
        r.fail("pic_chunks", "expected [start, len] int32 pairs, got " + detail::describe(c));
        break;
      }
      q->pic_chunks.push_back(chunk);
    }
  }
  if (const Json* v = r.object("pic_link")) {
    q->pic_link.emplace();
    KEEL_TRY(decode_pic_variant(*v, &*q->pic_link));
  }
  if (const Json* s = r.object("sparse")) {
    FieldReader sr(*s, "generation_request.sparse");
    q->sparse.emplace();
    sr.str("policy", &q->sparse->policy);
    sr.i32("budget", &q->sparse->budget);
    if (!sr.ok()) return sr.status();
  }
  if (const Json* s = r.object("speculative")) {
    FieldReader sr(*s, "generation_request.speculative");
    q->speculative.emplace();
    std::string method = "none";
    sr.str("method", &method);
    sr.i32("k", &q->speculative->k);
    sr.i32("ngram_max", &q->speculative->ngram_max);
    sr.i32("ngram_min", &q->speculative->ngram_min);
    if (!sr.ok()) return sr.status();
    const std::optional<SpecMethod> m = parse_spec_method(method);
    if (!m) {
      return Status::invalid_argument("generation_request.speculative.method: unknown method \"" +
                                      method + "\"");
    }
    q->speculative->method = *m;
  }
  if (const Json* s = r.object("early_exit")) {
    FieldReader er(*s, "generation_request.early_exit");
    q->early_exit.emplace();
    er.boolean("enabled", &q->early_exit->enabled);
    er.f32("threshold", &q->early_exit->threshold);
    er.i32_list("layers", &q->early_exit->layers);
    if (!er.ok()) return er.status();
  }
  return r.status();
}

// --- token events ---

Json encode_logprobs(const sampling::Logprobs& lp) {
  Json top = Json::array();
  for (const sampling::TokenLogprob& t : lp.top) top.push_back(Json::array({t.id, t.logprob}));
  return Json{{"id", lp.chosen.id},
              {"logprob", lp.chosen.logprob},
              {"rank", lp.chosen_rank},
              {"top", std::move(top)}};
}

Status decode_logprobs(const Json& j, sampling::Logprobs* lp) {
  FieldReader r(j, "token_event.logprobs[]");
  r.i32("id", &lp->chosen.id);
  r.f32("logprob", &lp->chosen.logprob);
  r.i32("rank", &lp->chosen_rank);
  std::vector<std::pair<int32_t, float>> top;
  read_pairs(r, "top", &top);
  for (const auto& [id, logprob] : top) lp->top.push_back({id, logprob});
  return r.status();
}

Json encode_event_body(const EventFrame& f) {
  const TokenEvent& e = f.event;
  Json j = Json::object();
  j["key"] = f.key;
  j["tokens"] = e.tokens;
  if (!e.logprobs.empty()) {
    Json lps = Json::array();
    for (const sampling::Logprobs& lp : e.logprobs) lps.push_back(encode_logprobs(lp));
    j["logprobs"] = std::move(lps);
  }
  if (e.finish) j["finish"] = std::string(finish_reason_name(*e.finish));
  if (e.stop_string) j["stop_string"] = *e.stop_string;
  if (!e.error.empty()) j["error"] = e.error;
  if (e.num_prompt_tokens != 0) j["num_prompt_tokens"] = e.num_prompt_tokens;
  if (e.num_cached_tokens != 0) j["num_cached_tokens"] = e.num_cached_tokens;
  return j;
}

Status decode_event_body(const Json& j, EventFrame* f) {
  FieldReader r(j, "token_event");
  TokenEvent& e = f->event;
  r.i64("key", &f->key);
  r.i32_list("tokens", &e.tokens);
  if (const Json* lps = r.array("logprobs")) {
    for (const Json& lp : *lps) {
      e.logprobs.emplace_back();
      KEEL_TRY(decode_logprobs(lp, &e.logprobs.back()));
    }
  }
  if (r.has("finish")) {
    FinishReason finish = FinishReason::kStop;
    read_enum(r, "finish", kFinishReasons, finish_reason_name, &finish);
    if (r.ok()) e.finish = finish;
  }
  r.optional_i32("stop_string", &e.stop_string);
  r.str("error", &e.error);
  r.i32("num_prompt_tokens", &e.num_prompt_tokens);
  r.i32("num_cached_tokens", &e.num_cached_tokens);
  return r.status();
}

// --- context caches ---

Json encode_caches_body(const std::vector<ContextCacheInfo>& caches) {
  Json list = Json::array();
  for (const ContextCacheInfo& c : caches) {
    Json j = Json{{"id", c.id}, {"tokens", c.tokens}};
    if (!c.cache_salt.empty()) j["cache_salt"] = c.cache_salt;
    if (!c.description.empty()) j["description"] = c.description;
    if (c.ttl_ms != 0) j["ttl_ms"] = c.ttl_ms;
    if (c.created_unix_ms != 0) j["created_unix_ms"] = c.created_unix_ms;
    list.push_back(std::move(j));
  }
  return Json{{"caches", std::move(list)}};
}

Status decode_caches_body(const Json& j, std::vector<ContextCacheInfo>* out) {
  FieldReader r(j, "context_caches");
  if (const Json* list = r.array("caches")) {
    for (const Json& c : *list) {
      if (!c.is_object()) {
        r.fail("caches", "expected objects, got " + detail::describe(c));
        break;
      }
      FieldReader cr(c, "context_caches.caches");
      ContextCacheInfo info;
      cr.str("id", &info.id);
      cr.str("cache_salt", &info.cache_salt);
      cr.i32_list("tokens", &info.tokens);
      cr.str("description", &info.description);
      cr.i64("ttl_ms", &info.ttl_ms);
      cr.i64("created_unix_ms", &info.created_unix_ms);
      KEEL_TRY(cr.status());
      out->push_back(std::move(info));
    }
  }
  return r.status();
}

// --- status ---

constexpr StatusCode kCodes[] = {
    StatusCode::kOk,        StatusCode::kInvalidArgument,    StatusCode::kNotFound,
    StatusCode::kCorrupt,   StatusCode::kUnsupported,        StatusCode::kOutOfRange,
    StatusCode::kIoError,   StatusCode::kResourceExhausted,  StatusCode::kUnavailable,
    StatusCode::kCancelled, StatusCode::kFailedPrecondition, StatusCode::kInternal};

template <typename T>
Result<T> decode_as(std::span<const uint8_t> bytes, MessageType type,
                    Status (*decode_body)(const Json&, T*)) {
  KEEL_ASSIGN_OR_RETURN(Json body, detail::unpack_body(bytes, type));
  T out;
  try {  // the reads check types before converting; this is the module boundary's backstop
    KEEL_TRY(decode_body(body, &out));
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("wire: ") + e.what());
  }
  return out;
}

}  // namespace

std::string_view message_type_name(MessageType type) {
  switch (type) {
    case MessageType::kGenerationRequest:
      return "generation_request";
    case MessageType::kTokenEvent:
      return "token_event";
    case MessageType::kEngineStats:
      return "engine_stats";
    case MessageType::kMetrics:
      return "metrics";
    case MessageType::kStatus:
      return "status";
    case MessageType::kContextCaches:
      return "context_caches";
  }
  return "unknown";
}

Bytes encode(const GenerationRequest& request) {
  return detail::pack(MessageType::kGenerationRequest, encode_request_body(request));
}
Bytes encode(const EventFrame& frame) {
  return detail::pack(MessageType::kTokenEvent, encode_event_body(frame));
}
Bytes encode(const EngineStats& stats) {
  return detail::pack(MessageType::kEngineStats, encode_stats_body(stats));
}
Bytes encode(const MetricsSnapshot& metrics) {
  return detail::pack(MessageType::kMetrics, encode_metrics_body(metrics));
}
Bytes encode(const Status& status) {
  return detail::pack(MessageType::kStatus,
                      Json{{"code", std::string(status_code_name(status.code()))},
                           {"message", status.ok() ? std::string() : status.message()}});
}

Bytes encode(const std::vector<ContextCacheInfo>& caches) {
  return detail::pack(MessageType::kContextCaches, encode_caches_body(caches));
}

Result<MessageType> peek_type(std::span<const uint8_t> bytes) {
  KEEL_ASSIGN_OR_RETURN(detail::Unpacked u, detail::unpack(bytes));
  return u.type;
}

Result<GenerationRequest> decode_request(std::span<const uint8_t> bytes) {
  return decode_as<GenerationRequest>(bytes, MessageType::kGenerationRequest, decode_request_body);
}
Result<EventFrame> decode_event(std::span<const uint8_t> bytes) {
  return decode_as<EventFrame>(bytes, MessageType::kTokenEvent, decode_event_body);
}
Result<EngineStats> decode_stats(std::span<const uint8_t> bytes) {
  return decode_as<EngineStats>(bytes, MessageType::kEngineStats, decode_stats_body);
}
Result<MetricsSnapshot> decode_metrics(std::span<const uint8_t> bytes) {
  return decode_as<MetricsSnapshot>(bytes, MessageType::kMetrics, decode_metrics_body);
}

Result<std::vector<ContextCacheInfo>> decode_caches(std::span<const uint8_t> bytes) {
  return decode_as<std::vector<ContextCacheInfo>>(bytes, MessageType::kContextCaches,
                                                  decode_caches_body);
}

Status decode_status(std::span<const uint8_t> bytes, Status* out) {
  KEEL_ASSIGN_OR_RETURN(Json body, detail::unpack_body(bytes, MessageType::kStatus));
  FieldReader r(body, "status");
  StatusCode code = StatusCode::kOk;
  read_enum(r, "code", kCodes, status_code_name, &code);
  std::string message;
  r.str("message", &message);
  KEEL_TRY(r.status());
  *out = code == StatusCode::kOk ? Status() : Status(code, message);
  return {};
}

}  // namespace keel::engine::wire
