// The wire codec's messages (see wire.h): each struct of types.h ⇄ a named-field map. Encoders omit
// fields at their default; decoders start from a default-constructed value and read what is there.
// The EngineStats and TierStats fields go through tables, so a counter is named once for both
// directions.
#include "engine/wire.h"

#include <exception>
#include <string>
#include <utility>

#include "engine/wire_json.h"

namespace keel::engine::wire {
namespace {

using detail::FieldReader;
using detail::Json;

// --- enums by name (stable when the enums are reordered) ---

constexpr FinishReason kFinishReasons[] = {FinishReason::kStop, FinishReason::kLength,
                                           FinishReason::kAbort, FinishReason::kError};

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

// --- engine stats ---

template <typename Stats, typename T>
struct Field {
  const char* name;
  T Stats::*member;
};

constexpr Field<EngineStats, int32_t> kStatsI32[] = {
    {"num_running", &EngineStats::num_running},
    {"num_waiting", &EngineStats::num_waiting},
    {"num_tracked", &EngineStats::num_tracked},
    {"num_context_caches", &EngineStats::num_context_caches},
    {"num_kv_pins", &EngineStats::num_kv_pins},
};
constexpr Field<EngineStats, int64_t> kStatsI64[] = {
    {"kv_capacity_tokens", &EngineStats::kv_capacity_tokens},
    {"prefix_queries_tokens", &EngineStats::prefix_queries_tokens},
    {"prefix_hits_tokens", &EngineStats::prefix_hits_tokens},
    {"prompt_tokens_total", &EngineStats::prompt_tokens_total},
    {"generation_tokens_total", &EngineStats::generation_tokens_total},
    {"num_preemptions_total", &EngineStats::num_preemptions_total},
    {"steps_total", &EngineStats::steps_total},
    {"tier_blocks_fetched", &EngineStats::tier_blocks_fetched},
    {"tier_blocks_recomputed", &EngineStats::tier_blocks_recomputed},
    {"tier_transfers_pending", &EngineStats::tier_transfers_pending},
    {"tier_demotions_dropped", &EngineStats::tier_demotions_dropped},
    {"peer_decisions_fetch", &EngineStats::peer_decisions_fetch},
    {"peer_decisions_recompute", &EngineStats::peer_decisions_recompute},
    {"peer_blocks_fetched", &EngineStats::peer_blocks_fetched},
    {"peer_hit_tokens", &EngineStats::peer_hit_tokens},
    {"context_cache_blocks", &EngineStats::context_cache_blocks},
    {"pic_requests", &EngineStats::pic_requests},
    {"pic_tokens_linked", &EngineStats::pic_tokens_linked},
    {"pic_tokens_recomputed", &EngineStats::pic_tokens_recomputed},
    {"pic_chunks_compiled", &EngineStats::pic_chunks_compiled},
    {"pic_chunks_reused", &EngineStats::pic_chunks_reused},
    {"pic_index_blocks", &EngineStats::pic_index_blocks},
    {"sparse_requests", &EngineStats::sparse_requests},
    {"sparse_pages_released", &EngineStats::sparse_pages_released},
    {"sparse_max_pages_held", &EngineStats::sparse_max_pages_held},
    {"spec_verify_steps", &EngineStats::spec_verify_steps},
    {"spec_drafted_tokens", &EngineStats::spec_drafted_tokens},
    {"spec_accepted_tokens", &EngineStats::spec_accepted_tokens},
    {"spec_emitted_tokens", &EngineStats::spec_emitted_tokens},
    {"kv_pinned_blocks", &EngineStats::kv_pinned_blocks},
    {"kv_pins_total", &EngineStats::kv_pins_total},
    {"kv_pins_released_ttl", &EngineStats::kv_pins_released_ttl},
    {"kv_pins_released_cap", &EngineStats::kv_pins_released_cap},
    {"kv_pins_released_subsumed", &EngineStats::kv_pins_released_subsumed},
    {"kv_pins_released_unused", &EngineStats::kv_pins_released_unused},
    {"kv_pins_released_pressure", &EngineStats::kv_pins_released_pressure},
};
constexpr Field<kv::TierStats, int64_t> kTierFields[] = {
    {"blocks", &kv::TierStats::blocks},
    {"used_bytes", &kv::TierStats::used_bytes},
    {"capacity_bytes", &kv::TierStats::capacity_bytes},
    {"hits", &kv::TierStats::hits},
    {"misses", &kv::TierStats::misses},
    {"bytes_in", &kv::TierStats::bytes_in},
    {"bytes_out", &kv::TierStats::bytes_out},
    {"evictions", &kv::TierStats::evictions},
    {"corrupt", &kv::TierStats::corrupt},
    {"write_errors", &kv::TierStats::write_errors},
};

Json encode_tier(const kv::TierStats& t) {
  Json j = Json::object();
  for (const auto& f : kTierFields) j[f.name] = t.*f.member;
  return j;
}

Json encode_stats_body(const EngineStats& s) {
  Json j = Json::object();
  for (const auto& f : kStatsI32) j[f.name] = s.*f.member;
  for (const auto& f : kStatsI64) j[f.name] = s.*f.member;
  j["kv_usage"] = s.kv_usage;
  if (s.host_tier_enabled) j["host_tier"] = encode_tier(s.host_tier);
  if (s.disk_tier_enabled) j["disk_tier"] = encode_tier(s.disk_tier);
  if (!s.tenant_vtc.empty()) j["tenant_vtc"] = s.tenant_vtc;
  if (!s.tenant_kv_pinned_blocks.empty()) j["tenant_kv_pinned_blocks"] = s.tenant_kv_pinned_blocks;
  return j;
}

Status decode_tier(const Json& j, const char* name, kv::TierStats* t) {
  FieldReader r(j, std::string("engine_stats.") + name);
  for (const auto& f : kTierFields) r.i64(f.name, &(t->*f.member));
  return r.status();
}

Status decode_stats_body(const Json& j, EngineStats* s) {
  FieldReader r(j, "engine_stats");
  for (const auto& f : kStatsI32) r.i32(f.name, &(s->*f.member));
  for (const auto& f : kStatsI64) r.i64(f.name, &(s->*f.member));
  r.f32("kv_usage", &s->kv_usage);
  if (const Json* t = r.object("host_tier")) {
    s->host_tier_enabled = true;
    KEEL_TRY(decode_tier(*t, "host_tier", &s->host_tier));
  }
  if (const Json* t = r.object("disk_tier")) {
    s->disk_tier_enabled = true;
    KEEL_TRY(decode_tier(*t, "disk_tier", &s->disk_tier));
  }
  if (const Json* t = r.object("tenant_vtc")) {
    for (const auto& [tenant, counter] : t->items()) {
      if (!counter.is_number())
        return Status::invalid_argument("engine_stats.tenant_vtc: not a number");
      s->tenant_vtc.emplace(tenant, counter.get<double>());
    }
  }
  if (const Json* t = r.object("tenant_kv_pinned_blocks")) {
    for (const auto& [tenant, blocks] : t->items()) {
      if (!blocks.is_number_integer() || blocks.get<int64_t>() < 0) {
        return Status::invalid_argument(
            "engine_stats.tenant_kv_pinned_blocks: not a non-negative integer");
      }
      s->tenant_kv_pinned_blocks.emplace(tenant, blocks.get<int64_t>());
    }
  }
  return r.status();
}

// --- metrics ---

constexpr Field<MetricsSnapshot, HistogramSnapshot> kHistograms[] = {
    {"time_to_first_token_seconds", &MetricsSnapshot::time_to_first_token_seconds},
    {"inter_token_latency_seconds", &MetricsSnapshot::inter_token_latency_seconds},
    {"e2e_request_latency_seconds", &MetricsSnapshot::e2e_request_latency_seconds},
    {"request_queue_time_seconds", &MetricsSnapshot::request_queue_time_seconds},
    {"request_prompt_tokens", &MetricsSnapshot::request_prompt_tokens},
    {"request_generation_tokens", &MetricsSnapshot::request_generation_tokens},
    {"early_exit_layers", &MetricsSnapshot::early_exit_layers},
};

Json encode_metrics_body(const MetricsSnapshot& m) {
  Json j = Json::object();
  for (const auto& f : kHistograms) {
    const HistogramSnapshot& h = m.*f.member;
    j[f.name] = Json{
        {"bounds", h.bounds}, {"cumulative", h.cumulative}, {"sum", h.sum}, {"count", h.count}};
  }
  Json finished = Json::object();
  for (FinishReason r : kFinishReasons) {
    finished[std::string(finish_reason_name(r))] = m.request_finished_total[static_cast<size_t>(r)];
  }
  j["request_finished_total"] = std::move(finished);
  if (m.semi_pd) {  // the split and the decisions; the switch histogram stays in the process
    const SemiPdMetrics& p = *m.semi_pd;
    j["semi_pd"] =
        Json{{"split_prefill", p.split_prefill},     {"split_decode", p.split_decode},
             {"prefill_threads", p.prefill_threads}, {"decode_threads", p.decode_threads},
             {"num_switches", p.num_switches},       {"decisions", p.decisions}};
  }
  if (m.moe_expert_tokens) {
    const ExpertTokens& e = *m.moe_expert_tokens;
    j["moe_expert_tokens"] =
        Json{{"n_layer", e.n_layer}, {"n_expert", e.n_expert}, {"tokens", e.tokens}};
  }
  return j;
}

// An MoE model's counts: n_layer and n_expert in [1, 65536], n_layer · n_expert counts, none
// negative.
Status decode_expert_tokens(const Json& j, ExpertTokens* e) {
  FieldReader r(j, "metrics.moe_expert_tokens");
  r.i32("n_layer", &e->n_layer, 1, 65536);
  r.i32("n_expert", &e->n_expert, 1, 65536);
  std::vector<uint64_t> tokens;
  r.u64_list("tokens", &tokens);
  KEEL_TRY(r.status());
  if (tokens.size() != static_cast<size_t>(e->n_layer) * static_cast<size_t>(e->n_expert)) {
    return Status::invalid_argument("metrics.moe_expert_tokens.tokens: needs n_layer x n_expert");
  }
  e->tokens.reserve(tokens.size());
  for (const uint64_t t : tokens) {
    if (t > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::invalid_argument("metrics.moe_expert_tokens.tokens: out of range");
    }
    e->tokens.push_back(static_cast<int64_t>(t));
  }
  return {};
}

Status decode_semi_pd_metrics(const Json& j, SemiPdMetrics* p) {
  FieldReader r(j, "metrics.semi_pd");
  r.i32("split_prefill", &p->split_prefill, 0);
  r.i32("split_decode", &p->split_decode, 0);
  r.i32("prefill_threads", &p->prefill_threads, 0);
  r.i32("decode_threads", &p->decode_threads, 0);
  r.i64("num_switches", &p->num_switches, 0);
  if (const Json* d = r.object("decisions")) {
    for (const auto& [reason, n] : d->items()) {
      if (!n.is_number_integer()) return Status::invalid_argument("metrics.semi_pd.decisions");
      p->decisions[reason] = n.get<int64_t>();
    }
  }
  return r.status();
}

Status decode_metrics_body(const Json& j, MetricsSnapshot* m) {
  FieldReader r(j, "metrics");
  for (const auto& f : kHistograms) {
    const Json* h = r.object(f.name);
    if (h == nullptr) continue;
    HistogramSnapshot& out = m->*f.member;
    FieldReader hr(*h, std::string("metrics.") + f.name);
    hr.f64_list("bounds", &out.bounds);
    hr.u64_list("cumulative", &out.cumulative);
    hr.f64("sum", &out.sum);
    hr.u64("count", &out.count);
    // Consumers index cumulative by bound; an empty histogram (no bounds, no counts) is allowed.
    const bool empty = out.bounds.empty() && out.cumulative.empty();
    if (hr.ok() && !empty && out.cumulative.size() != out.bounds.size() + 1) {
      hr.fail("cumulative", "needs one count per bound and one for +Inf");
    }
    KEEL_TRY(hr.status());
  }
  if (const Json* finished = r.object("request_finished_total")) {
    FieldReader fr(*finished, "metrics.request_finished_total");
    for (FinishReason reason : kFinishReasons) {
      fr.i64(std::string(finish_reason_name(reason)).c_str(),
             &m->request_finished_total[static_cast<size_t>(reason)], 0);
    }
    KEEL_TRY(fr.status());
  }
  if (const Json* p = r.object("semi_pd"))
    KEEL_TRY(decode_semi_pd_metrics(*p, &m->semi_pd.emplace()));
  if (const Json* e = r.object("moe_expert_tokens")) {
    KEEL_TRY(decode_expert_tokens(*e, &m->moe_expert_tokens.emplace()));
  }
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
