// `keel bench-serve`: turns the flags into a loadgen::BenchServeConfig (parsing the few values
// that are strings on the command line: rate, goodput SLOs, percentiles, headers, extra body),
// runs the benchmark, prints vLLM's result table to stdout (progress notes go to stderr) and
// saves the JSON result when asked. Bad values exit 2 and a failed run exits 1, each with one
// line on stderr.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "loadgen/bench_serve.h"
#include "loadgen/report.h"

namespace keel::cli {
namespace {

Result<double> parse_number(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
    // reported below
  }
  return Status::invalid_argument(what + ": '" + text + "' is not a number");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Status parse_goodput(const std::vector<std::string>& pairs, loadgen::GoodputSlo* slo) {
  for (const std::string& pair : pairs) {
    const size_t colon = pair.find(':');
    if (colon == std::string::npos) {
      return Status::invalid_argument("goodput: '" + pair + "' is not KEY:MS (ttft, tpot, e2el)");
    }
    const std::string key = pair.substr(0, colon);
    KEEL_ASSIGN_OR_RETURN(double ms, parse_number(pair.substr(colon + 1), "goodput " + key));
    if (key == "ttft") {
      slo->ttft_ms = ms;
    } else if (key == "tpot") {
      slo->tpot_ms = ms;
    } else if (key == "e2el") {
      slo->e2el_ms = ms;
    } else {
      return Status::invalid_argument("goodput: unknown metric '" + key +
                                      "' (expected ttft, tpot or e2el)");
    }
  }
  return Status();
}

Result<loadgen::BenchServeConfig> to_config(const BenchServeOptions& o) {
  loadgen::BenchServeConfig c;
  c.base_url = o.base_url;
  c.endpoint = o.endpoint;
  c.model = o.model;
  c.api_key = o.api_key;
  if (c.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY")) c.api_key = env;
  }
  for (const std::string& h : o.headers) {
    const size_t eq = h.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::invalid_argument("header: '" + h + "' is not Name=value");
    }
    c.headers.emplace_back(h.substr(0, eq), h.substr(eq + 1));
  }
  c.request_timeout_s = o.request_timeout_s;
  loadgen::WorkloadConfig& w = c.workload;
  w.dataset = o.dataset == "shared-prefix" ? loadgen::DatasetKind::kSharedPrefix
              : o.dataset == "rag"         ? loadgen::DatasetKind::kRag
              : o.dataset == "long-decode" ? loadgen::DatasetKind::kLongDecode
                                           : loadgen::DatasetKind::kRandom;
  c.length_bucket = o.length_bucket > 0                              ? o.length_bucket
                    : w.dataset == loadgen::DatasetKind::kLongDecode ? 512
                                                                     : 0;
  c.kv_poll_s = o.kv_poll_interval_s;
  const bool chat = loadgen::api_kind_for(o.endpoint) == loadgen::ApiKind::kChatCompletions;
  const bool text = o.prompt_format == "text" || (o.prompt_format == "auto" && chat);
  w.format = text ? loadgen::PromptFormat::kText : loadgen::PromptFormat::kTokenIds;
  w.num_prompts = o.num_prompts;
  w.input_len = o.input_len;
  w.output_len = o.output_len;
  w.range_ratio = o.range_ratio;
  w.num_groups = o.num_groups;
  w.prefix_len = o.prefix_len;
  w.suffix_len = o.suffix_len;
  w.rag_num_docs = o.rag_num_docs;
  w.rag_docs_per_request = o.rag_docs_per_request;
  w.rag_doc_len = o.rag_doc_len;
  w.rag_question_len = o.rag_question_len;
  w.vocab_size = o.vocab_size;
  w.min_token_id = o.min_token_id;
  w.seed = o.seed;
  KEEL_ASSIGN_OR_RETURN(c.load.request_rate, parse_number(o.request_rate, "request-rate"));
  c.load.burstiness = o.burstiness;
  c.load.max_concurrency = o.max_concurrency;
  c.load.seed = o.seed;
  c.temperature = o.temperature;
  c.ignore_eos = o.ignore_eos;
  if (!o.extra_body.empty()) {
    c.extra_body = nlohmann::json::parse(o.extra_body, nullptr, /*allow_exceptions=*/false);
    if (c.extra_body.is_discarded() || !c.extra_body.is_object()) {
      return Status::invalid_argument("extra-body: not a JSON object: " + o.extra_body);
    }
  }
  KEEL_TRY(parse_goodput(o.goodput, &c.goodput));
  c.percentiles.clear();
  for (const std::string& p : split(o.metric_percentiles, ',')) {
    KEEL_ASSIGN_OR_RETURN(double v, parse_number(p, "metric-percentiles"));
    c.percentiles.push_back(v);
  }
  c.initial_test = !o.skip_test_request;
  c.keep_text = o.save_detailed;
  c.disconnect_prob = o.disconnect_prob;
  KEEL_TRY(c.validate());
  return c;
}

// Hundreds of concurrent streams need as many sockets: lift the soft descriptor limit.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace

int run_bench_serve(const BenchServeOptions& opts) {
  auto config = to_config(opts);
  if (!config.ok()) {
    std::fprintf(stderr, "keel: bench-serve: %s\n", config.error().message().c_str());
    return 2;
  }
  std::vector<std::string> metrics = split(opts.percentile_metrics, ',');
  for (const std::string& m : metrics) {
    const auto& all = loadgen::all_metric_names();
    if (std::find(all.begin(), all.end(), m) == all.end()) {
      std::fprintf(stderr, "keel: bench-serve: percentile-metrics: unknown metric '%s'\n",
                   m.c_str());
      return 2;
    }
  }
  raise_fd_limit();
  auto note = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  auto result = loadgen::run_bench_serve(std::move(*config), note);
  if (!result.ok()) {
    std::fprintf(stderr, "keel: bench-serve: %s\n", result.error().message().c_str());
    return 1;
  }
  std::fputs(loadgen::format_report(*result, metrics).c_str(), stdout);
  std::fflush(stdout);
  if (!opts.save_result.empty()) {
    Status st =
        loadgen::save_json(loadgen::result_to_json(*result, opts.save_detailed), opts.save_result);
    if (!st.ok()) {
      std::fprintf(stderr, "keel: bench-serve: %s\n", st.message().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace keel::cli
