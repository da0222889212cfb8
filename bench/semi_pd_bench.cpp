// semi-PD against the colocated engine on one model, in-process (no HTTP): greedy equality of
// concurrent requests, single-request TTFT and TPOT (colocated with 1 and 2 threads, semi-PD 1,1;
// ratios to colocated -t 1; the first inter-token gap — semi-PD's hand-off — apart from the rest),
// and the re-split downtime under load (keel:semi_pd_switch_seconds) against the decode step.
//   keel_semi_pd_bench MODEL.gguf [REPEATS]
// Figures: docs/benchmarks.md.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_features.h"
#include "engine/engine.h"
#include "engine/semi_pd_engine.h"
#include "model/model.h"

namespace keel::engine {
namespace {

using Clock = std::chrono::steady_clock;

// One request's tokens and the time of each event.
class TimingSink final : public OutputSink {
 public:
  void on_event(TokenEvent ev) override {
    std::lock_guard lock(mu_);
    for (int32_t t : ev.tokens) {
      tokens_.push_back(t);
      times_.push_back(Clock::now());
    }
    if (ev.finish) {
      done_ = true;
      cv_.notify_all();
    }
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  std::vector<int32_t> tokens_;
  std::vector<Clock::time_point> times_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  return r;
}

std::vector<int32_t> prompt_of(int i, int len) {
  std::vector<int32_t> p = {1};
  for (int j = 1; j < len; ++j) p.push_back(259 + (i * 31 + j * 7) % 240);
  return p;
}

EngineConfig config(int threads) {
  EngineConfig c;
  c.threads = threads;
  c.isa = kernels::best_isa(detect_cpu_features());
  c.eog_token_ids = {2};
  return c;
}

std::vector<std::shared_ptr<TimingSink>> run(EngineClient& e, int n, int prompt_len, int out) {
  std::vector<std::shared_ptr<TimingSink>> sinks;
  for (int i = 0; i < n; ++i) {
    sinks.push_back(std::make_shared<TimingSink>());
    if (!e.submit(greedy(prompt_of(i, prompt_len), out), sinks.back()).ok()) std::abort();
  }
  for (auto& s : sinks) s->wait();
  return sinks;
}

struct Latency {
  double ttft_ms = 0;
  double tpot_ms = 0;
  double first_gap_ms = 0;  // first → second token (semi-PD: includes the hand-off to decode)
  double steady_ms = 0;     // mean gap over the tokens after the second
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Medians over `repeats` single requests, one at a time (out ≥ 3).
Latency single(EngineClient& e, int repeats, int prompt_len, int out) {
  std::vector<double> ttft, tpot, first_gap, steady;
  const auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  for (int i = 0; i < repeats; ++i) {
    auto sink = std::make_shared<TimingSink>();
    const auto t0 = Clock::now();
    if (!e.submit(greedy(prompt_of(i, prompt_len), out), sink).ok()) std::abort();
    sink->wait();
    const auto& t = sink->times_;
    ttft.push_back(ms(t.front() - t0));
    tpot.push_back(ms(t.back() - t.front()) / static_cast<double>(t.size() - 1));
    first_gap.push_back(ms(t[1] - t[0]));
    steady.push_back(ms(t.back() - t[1]) / static_cast<double>(t.size() - 2));
  }
  return {median(ttft), median(tpot), median(first_gap), median(steady)};
}

void print_latency(const char* name, const Latency& l, const Latency* base) {
  std::printf("  %-16s TTFT %.3f ms", name, l.ttft_ms);
  if (base != nullptr) std::printf(" (%.2fx)", l.ttft_ms / base->ttft_ms);
  std::printf(", TPOT %.4f ms", l.tpot_ms);
  if (base != nullptr) std::printf(" (%.2fx)", l.tpot_ms / base->tpot_ms);
  std::printf(", 1st->2nd token %.3f ms, later steps %.4f ms", l.first_gap_ms, l.steady_ms);
  if (base != nullptr) std::printf(" (%.2fx)", l.steady_ms / base->steady_ms);
  std::printf("\n");
}

int main_impl(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: keel_semi_pd_bench MODEL.gguf [REPEATS]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 20;
  auto model = model::Model::open(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.error().to_string().c_str());
    return 1;
  }
  const int kPrompt = 200, kOut = 100, kConcurrent = 8;
  EngineConfig semi = config(1);
  semi.semi_pd = SemiPdSplit{1, 1};
  // Greedy equality: 8 concurrent requests, semi-PD against the colocated engine.
  std::vector<std::vector<int32_t>> colocated_tokens;
  {
    auto e = Engine::start(**model, config(1));
    for (auto& s : run(**e, kConcurrent, kPrompt, kOut)) colocated_tokens.push_back(s->tokens_);
  }
  int equal = 0;
  {
    auto e = SemiPdEngine::start(**model, semi);
    if (!e.ok()) {
      std::fprintf(stderr, "%s\n", e.error().to_string().c_str());
      return 1;
    }
    auto sinks = run(**e, kConcurrent, kPrompt, kOut);
    for (int i = 0; i < kConcurrent; ++i) equal += sinks[i]->tokens_ == colocated_tokens[i];
  }
  std::printf("greedy equality: %d / %d concurrent requests (%d prompt, %d output tokens)\n", equal,
              kConcurrent, kPrompt, kOut);
  // Single-request latency.
  std::printf("single request, %d prompt + %d output tokens, median of %d:\n", kPrompt, kOut,
              repeats);
  Latency base{};
  for (int t : {1, 2}) {
    auto e = Engine::start(**model, config(t));
    const Latency l = single(**e, repeats, kPrompt, kOut);
    if (t == 1) base = l;
    print_latency(t == 1 ? "colocated -t 1:" : "colocated -t 2:", l, t == 1 ? nullptr : &base);
  }
  {
    auto e = SemiPdEngine::start(**model, semi);
    print_latency("semi-PD 1,1:", single(**e, repeats, kPrompt, kOut), &base);
  }
  // Re-split downtime under load: 8 requests of 400 output tokens; the split toggles every 10 ms.
  {
    auto e = SemiPdEngine::start(**model, semi);
    const int32_t big = std::min<int32_t>(2, static_cast<int32_t>(allowed_cores().size()));
    std::vector<std::shared_ptr<TimingSink>> sinks;
    for (int i = 0; i < kConcurrent; ++i) {
      sinks.push_back(std::make_shared<TimingSink>());
      if (!(*e)->submit(greedy(prompt_of(i, 64), 400), sinks.back()).ok()) std::abort();
    }
    int switches = 0;
    for (int k = 0; k < 40 && (*e)->stats().num_tracked > 0; ++k, ++switches) {
      (void)(*e)->set_split(k % 2 == 0 ? SemiPdSplit{big, big} : SemiPdSplit{1, 1});
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (auto& s : sinks) s->wait();
    int same = 0;
    {
      auto c = Engine::start(**model, config(1));
      for (int i = 0; i < kConcurrent; ++i) {
        auto sink = std::make_shared<TimingSink>();
        (void)(*c)->submit(greedy(prompt_of(i, 64), 400), sink);
        sink->wait();
        same += sink->tokens_ == sinks[i]->tokens_;
      }
    }
    const MetricsSnapshot m = (*e)->metrics();
    const HistogramSnapshot& h = m.semi_pd->switch_seconds;
    const HistogramSnapshot& itl = m.inter_token_latency_seconds;
    double max_bound = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      if (h.cumulative[i] == h.count) {
        max_bound = h.bounds[i];
        break;
      }
    }
    std::printf(
        "re-split under load (%d x split %d,%d <-> 1,1): %llu worker switches, mean downtime "
        "%.1f us, all <= %.0f us; mean decode step (ITL) %.1f us; outputs equal to colocated: "
        "%d / %d\n",
        switches, big, big, static_cast<unsigned long long>(h.count),
        h.count ? 1e6 * h.sum / static_cast<double>(h.count) : 0.0, 1e6 * max_bound,
        itl.count ? 1e6 * itl.sum / static_cast<double>(itl.count) : 0.0, same, kConcurrent);
  }
  return 0;
}

}  // namespace
}  // namespace keel::engine

int main(int argc, char** argv) { return keel::engine::main_impl(argc, argv); }
