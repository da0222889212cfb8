// The human table and the JSON result; see the header.
#include "loadgen/report.h"

#include <cmath>
#include <fstream>

#include <fmt/format.h>

namespace keel::loadgen {
namespace {

using nlohmann::json;

const LatencyStats& stats_of(const BenchmarkMetrics& m, std::string_view name) {
  if (name == "ttft") return m.ttft;
  if (name == "tpot") return m.tpot;
  if (name == "itl") return m.itl;
  return m.e2el;
}

struct MetricLabels {
  std::string_view key, short_name, header;
};
constexpr MetricLabels kLabels[] = {
    {"ttft", "TTFT", "Time to First Token"},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
    {"itl", "ITL", "Inter-token Latency"},
    {"e2el", "E2EL", "End-to-end Latency"},
};

void line(std::string* out, std::string_view label, const std::string& value) {
  *out += fmt::format("{:<40} {:<10}\n", label, value);
}
std::string num(double v) { return fmt::format("{:.2f}", v); }

std::string centered(std::string_view title, char fill) {
  const size_t width = 50;
  if (title.size() >= width) return std::string(title) + "\n";
  const size_t left = (width - title.size()) / 2;
  return std::string(left, fill) + std::string(title) +
         std::string(width - title.size() - left, fill) + "\n";
}

json config_json(const BenchServeConfig& c) {
  const WorkloadConfig& w = c.workload;
  json j = {
      {"base_url", c.base_url},
      {"endpoint", c.endpoint},
      {"dataset_name", dataset_kind_name(w.dataset)},
      {"prompt_format", prompt_format_name(w.format)},
      {"num_prompts", w.num_prompts},
      {"output_len", w.output_len},
      {"range_ratio", w.range_ratio},
      {"seed", c.load.seed},
      {"temperature", c.temperature},
      {"ignore_eos", c.ignore_eos},
      {"request_timeout_s", c.request_timeout_s},
      {"extra_body", c.extra_body},
      {"metric_percentiles", c.percentiles},
      {"disconnect_prob", c.disconnect_prob},
  };
  if (w.dataset == DatasetKind::kRandom || w.dataset == DatasetKind::kLongDecode) {
    j["input_len"] = w.input_len;
  } else if (w.dataset == DatasetKind::kRag) {
    j["rag_num_docs"] = w.rag_num_docs;
    j["rag_docs_per_request"] = w.rag_docs_per_request;
    j["rag_doc_len"] = w.rag_doc_len;
    j["rag_question_len"] = w.rag_question_len;
  } else {
    j["num_groups"] = w.num_groups;
    j["prefix_len"] = w.prefix_len;
    j["suffix_len"] = w.suffix_len;
  }
  if (w.format == PromptFormat::kTokenIds) {
    j["vocab_size"] = w.vocab_size;
    j["min_token_id"] = w.min_token_id;
  }
  json slo = json::object();
  if (c.goodput.ttft_ms) slo["ttft"] = *c.goodput.ttft_ms;
  if (c.goodput.tpot_ms) slo["tpot"] = *c.goodput.tpot_ms;
  if (c.goodput.e2el_ms) slo["e2el"] = *c.goodput.e2el_ms;
  j["goodput"] = slo;
  return j;
}

void add_details(const BenchServeResult& r, json* j) {
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(),
       itls = json::array(), latencies = json::array(), starts = json::array(),
       errors = json::array(), texts = json::array();
  for (const RequestRecord& rec : r.records) {
    input_lens.push_back(rec.usage_prompt_tokens.value_or(rec.prompt_len));
    output_lens.push_back(rec.success ? output_tokens_of(rec) : 0);
    ttfts.push_back(rec.ttft_s);
    itls.push_back(rec.itl_s);
    latencies.push_back(rec.latency_s);
    starts.push_back(rec.start_s);
    errors.push_back(rec.error);
    texts.push_back(rec.generated_text);
  }
  (*j)["input_lens"] = std::move(input_lens);
  (*j)["output_lens"] = std::move(output_lens);
  (*j)["ttfts"] = std::move(ttfts);
  (*j)["itls"] = std::move(itls);
  (*j)["latencies"] = std::move(latencies);
  (*j)["start_times"] = std::move(starts);
  (*j)["errors"] = std::move(errors);
  if (r.config.keep_text) (*j)["generated_texts"] = std::move(texts);
}

}  // namespace

const std::vector<std::string>& all_metric_names() {
  static const std::vector<std::string> kNames = {"ttft", "tpot", "itl", "e2el"};
  return kNames;
}

std::string percentile_word(double p) {
  if (std::floor(p) == p) return fmt::format("{}", static_cast<int64_t>(p));
  return fmt::format("{}", p);
}

std::string format_report(const BenchServeResult& result, const std::vector<std::string>& metrics) {
  const BenchmarkMetrics& m = result.metrics;
  const BenchServeConfig& c = result.config;
  std::string out;
  for (size_t i = 0; i < m.first_errors.size(); ++i) {
    out += fmt::format("Error {}: {}\n", i, m.first_errors[i]);
  }
  out += centered(" Serving Benchmark Result ", '=');
  line(&out, "Successful requests:", std::to_string(m.completed));
  line(&out, "Failed requests:", std::to_string(m.failed));
  if (c.disconnect_prob > 0.0) {
    line(&out, "Cancelled requests (client hung up):", std::to_string(m.cancelled));
  }
  if (c.load.max_concurrency > 0) {
    line(&out, "Maximum request concurrency:", std::to_string(c.load.max_concurrency));
  }
  if (!std::isinf(c.load.request_rate)) {
    line(&out, "Request rate configured (RPS):", num(c.load.request_rate));
  }
  line(&out, "Benchmark duration (s):", num(m.duration_s));
  line(&out, "Total input tokens:", std::to_string(m.total_input_tokens));
  line(&out, "Total generated tokens:", std::to_string(m.total_output_tokens));
  line(&out, "Request throughput (req/s):", num(m.request_throughput));
  if (m.request_goodput) line(&out, "Request goodput (req/s):", num(*m.request_goodput));
  line(&out, "Output token throughput (tok/s):", num(m.output_throughput));
  line(&out, "Peak output token throughput (tok/s):", num(m.max_output_tokens_per_s));
  line(&out, "Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
  line(&out, "Total Token throughput (tok/s):", num(m.total_token_throughput));
  for (const MetricLabels& l : kLabels) {
    bool selected = false;
    for (const std::string& name : metrics) selected = selected || name == l.key;
    if (!selected) continue;
    const LatencyStats& s = stats_of(m, l.key);
    out += centered(l.header, '-');
    line(&out, fmt::format("Mean {} (ms):", l.short_name), num(s.mean_ms));
    line(&out, fmt::format("Median {} (ms):", l.short_name), num(s.median_ms));
    line(&out, fmt::format("Std {} (ms):", l.short_name), num(s.std_ms));
    for (const auto& [p, v] : s.percentiles_ms) {
      line(&out, fmt::format("P{} {} (ms):", percentile_word(p), l.short_name), num(v));
    }
  }
  out += std::string(50, '=') + "\n";
  if (!result.by_output_length.empty()) {
    out += centered(" By output length ", '-');
    out += "output tokens    mean ITL (ms)   KV usage (%)\n";
    for (const LengthBucket& b : result.by_output_length) {
      out +=
          fmt::format("{:>6}-{:<9} {:>13.2f}   {:>12}\n", b.first_token, b.end_token - 1,
                      b.mean_itl_ms, b.kv_usage ? fmt::format("{:.2f}", *b.kv_usage * 100.0) : "-");
    }
    out += std::string(50, '=') + "\n";
  }
  if (m.num_output_from_chunks > 0) {
    out += fmt::format(
        "Note: {} of {} completed requests had no usage chunk; their output tokens are counted "
        "as streamed chunks.\n",
        m.num_output_from_chunks, m.completed);
  }
  return out;
}

json result_to_json(const BenchServeResult& r, bool detailed) {
  const BenchmarkMetrics& m = r.metrics;
  const BenchServeConfig& c = r.config;
  json j;
  j["date"] = r.date;
  j["backend"] = backend_name(api_kind_for(c.endpoint));
  j["model_id"] = c.model;
  j["num_prompts"] = c.workload.num_prompts;
  j["request_rate"] = std::isinf(c.load.request_rate) ? json("inf") : json(c.load.request_rate);
  j["burstiness"] = c.load.burstiness;
  j["max_concurrency"] = c.load.max_concurrency > 0 ? json(c.load.max_concurrency) : json(nullptr);
  j["config"] = config_json(c);
  j["duration"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["cancelled"] = m.cancelled;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.request_goodput ? json(*m.request_goodput) : json(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  j["output_tokens_from_usage"] = m.completed - m.num_output_from_chunks;
  j["output_tokens_from_chunks"] = m.num_output_from_chunks;
  j["input_tokens_from_usage"] = m.num_input_from_usage;
  j["connections_opened"] = r.connections_opened;
  for (const std::string& name : all_metric_names()) {
    const LatencyStats& s = stats_of(m, name);
    j["mean_" + name + "_ms"] = s.mean_ms;
    j["median_" + name + "_ms"] = s.median_ms;
    j["std_" + name + "_ms"] = s.std_ms;
    for (const auto& [p, v] : s.percentiles_ms)
      j["p" + percentile_word(p) + "_" + name + "_ms"] = v;
  }
  j["first_errors"] = m.first_errors;
  if (!r.by_output_length.empty()) {
    json buckets = json::array();
    for (const LengthBucket& b : r.by_output_length) {
      buckets.push_back({{"first_token", b.first_token},
                         {"end_token", b.end_token},
                         {"itl_count", b.itl_count},
                         {"mean_itl_ms", b.mean_itl_ms},
                         {"kv_usage", b.kv_usage ? json(*b.kv_usage) : json(nullptr)}});
    }
    j["by_output_length"] = buckets;
  }
  if (detailed) add_details(r, &j);
  return j;
}

Status save_json(const nlohmann::json& json, const std::string& path) {
  std::string text;
  try {
    text = json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return Status::internal(std::string("cannot encode the result: ") + e.what());
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::io_error("cannot open '" + path + "' for writing");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f) return Status::io_error("cannot write '" + path + "'");
  return Status();
}

}  // namespace keel::loadgen
