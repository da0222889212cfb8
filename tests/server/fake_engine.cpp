// FakeEngine (see fake_engine.h).
#include "fake_engine.h"

#include <algorithm>

namespace keel::server::testing {

using Clock = std::chrono::steady_clock;

sampling::Logprobs fake_logprobs(int32_t id, size_t pos, int32_t top) {
  sampling::Logprobs lp;
  lp.chosen = {id, -static_cast<float>(pos + 1) / 8.0f};
  lp.chosen_rank = 1;
  for (int32_t k = 0; k < top; ++k)
    lp.top.push_back({id + k, lp.chosen.logprob - static_cast<float>(k)});
  return lp;
}

FakeEngine::FakeEngine(int64_t max_model_len) : max_model_len_(max_model_len) {
  script_ = [](const engine::GenerationRequest&) { return FakeScript{}; };
  thread_ = std::thread([this] { loop(); });
}

FakeEngine::~FakeEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void FakeEngine::set_script(ScriptFn fn) {
  std::lock_guard<std::mutex> lock(mu_);
  script_ = std::move(fn);
}

Result<engine::RequestKey> FakeEngine::submit(engine::GenerationRequest request,
                                              std::shared_ptr<engine::OutputSink> sink) {
  if (unavailable_) return Status::unavailable("fake engine: draining");
  if (queue_full_) return Status::resource_exhausted("fake engine: the waiting queue is full");
  if (request.prompt_tokens.empty()) return Status::invalid_argument("fake engine: empty prompt");
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(active_.size()) >= max_waiting_) {
    return Status::resource_exhausted("fake engine: more requests than max_waiting");
  }
  if (!request.retain_as.empty() && cache_quota_full_) {
    return Status::out_of_range("fake engine: context caches may hold no more blocks");
  }
  if (!request.stop_strings.empty() && tokenizer_ == nullptr) {
    return Status::invalid_argument("fake engine: stop strings need a tokenizer");
  }
  if (!request.lora.empty() &&
      std::none_of(loras_.begin(), loras_.end(),
                   [&](const engine::LoraInfo& l) { return l.name == request.lora; })) {
    return Status::not_found("no LoRA adapter named '" + request.lora + "' is loaded");
  }
  const engine::RequestKey key = next_key_++;
  Active a;
  a.key = key;
  if (!request.stop_strings.empty()) {
    a.stops = std::make_unique<engine::StopStringDetector>(*tokenizer_, request.stop_strings);
  }
  a.script = script_(request);
  a.request = request;
  a.sink = std::move(sink);
  a.due = Clock::now() + a.script.token_delay;
  submitted_.push_back(std::move(request));
  keys_.push_back(key);
  active_.emplace(key, std::move(a));
  cv_.notify_all();
  work_cv_.notify_all();
  return key;
}

void FakeEngine::abort(engine::RequestKey key) {
  std::lock_guard<std::mutex> lock(mu_);
  ++aborts_[key];
  auto it = active_.find(key);
  if (it != active_.end()) it->second.aborted = true;
  cv_.notify_all();
  work_cv_.notify_all();
}

engine::EngineStats FakeEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  engine::EngineStats s;
  s.num_running = static_cast<int32_t>(active_.size());
  s.num_waiting = 0;
  s.kv_usage = 0.25f;
  s.prefix_queries_tokens = 40;
  s.prefix_hits_tokens = 16;
  s.generation_tokens_total = generated_;
  return s;
}

void FakeEngine::drain(std::chrono::milliseconds timeout) {
  unavailable_ = true;
  std::unique_lock<std::mutex> lock(mu_);
  const auto quiet = [&] { return active_.empty() && delivering_ == 0; };
  if (cv_.wait_for(lock, timeout, quiet)) return;
  for (auto& [key, a] : active_) a.aborted = true;  // as the engine cancels at the deadline
  work_cv_.notify_all();
  cv_.wait_for(lock, std::chrono::seconds(10), quiet);
}

Status FakeEngine::load_lora(const std::string& name, const std::string& path) {
  if (path.find("bad") != std::string::npos) {
    return Status::invalid_argument("cannot load LoRA adapter '" + name + "': " + path +
                                    ": not a LoRA adapter (general.type is missing, expected "
                                    "'adapter')");
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const engine::LoraInfo& l : loras_) {
    if (l.name == name) {
      return Status::invalid_argument("a LoRA adapter named '" + name + "' is already loaded");
    }
  }
  loras_.push_back(engine::LoraInfo{name, path, 8, "q,v", 1700000000});
  return Status();
}

Status FakeEngine::unload_lora(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = loras_.begin(); it != loras_.end(); ++it) {
    if (it->name == name) {
      loras_.erase(it);
      return Status();
    }
  }
  return Status::not_found("no LoRA adapter named '" + name + "' is loaded");
}

std::vector<engine::LoraInfo> FakeEngine::list_loras() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loras_;
}

std::vector<engine::GenerationRequest> FakeEngine::submitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return submitted_;
}

std::vector<engine::RequestKey> FakeEngine::keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_;
}

int FakeEngine::abort_count(engine::RequestKey key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = aborts_.find(key);
  return it == aborts_.end() ? 0 : it->second;
}

bool FakeEngine::release_cache(const std::string& id, const std::string& salt) {
  const bool released = caches_.remove(id, salt).has_value();
  std::lock_guard lock(mu_);
  release_calls_.push_back(id);
  if (released) released_caches_.push_back(id);
  return released;
}

void FakeEngine::release_kv_pin(engine::RequestKey key) {
  std::lock_guard lock(mu_);
  kv_pin_releases_.push_back(key);
}

std::vector<engine::RequestKey> FakeEngine::kv_pin_releases() const {
  std::lock_guard lock(mu_);
  return kv_pin_releases_;
}

std::vector<std::string> FakeEngine::release_calls() const {
  std::lock_guard lock(mu_);
  return release_calls_;
}

std::vector<std::string> FakeEngine::released_caches() const {
  std::lock_guard lock(mu_);
  return released_caches_;
}

int FakeEngine::total_aborts() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [k, c] : aborts_) n += c;
  return n;
}

size_t FakeEngine::num_active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_.size();
}

bool FakeEngine::wait_for_submits(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return submitted_.size() >= n; });
}

bool FakeEngine::wait_for_aborted(engine::RequestKey key, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return aborts_.count(key) > 0; });
}

bool FakeEngine::wait_for_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return active_.empty(); });
}

std::optional<engine::TokenEvent> FakeEngine::next_event(Active& a, Clock::time_point now,
                                                         bool* done) {
  *done = false;
  engine::TokenEvent ev;
  ev.num_prompt_tokens = static_cast<int32_t>(a.request.prompt_tokens.size());
  ev.num_cached_tokens = a.script.num_cached_tokens;
  if (a.aborted) {
    ev.finish = engine::FinishReason::kAbort;
    *done = true;
    return ev;
  }
  using Stall = FakeScript::Stall;
  if (a.script.stall == Stall::kQueued || a.script.stall == Stall::kPrefill) return std::nullopt;
  if (a.script.stall == Stall::kDecode && a.next >= a.script.stall_after) return std::nullopt;
  if (now < a.due) return std::nullopt;
  const size_t limit = std::min(a.script.tokens.size(), static_cast<size_t>(a.request.max_tokens));
  if (a.next < limit) {
    const int32_t id = a.script.tokens[a.next];
    ev.tokens.push_back(id);
    if (a.request.sampling.logprobs.has_value()) {
      ev.logprobs.push_back(fake_logprobs(id, a.next, a.request.sampling.logprobs.value_or(0)));
    }
    ++a.next;
    ++generated_;
    a.due = now + a.script.token_delay;
    if (a.stops != nullptr) ev.stop_string = a.stops->push(id);
    if (ev.stop_string) {
      ev.finish = engine::FinishReason::kStop;
      *done = true;
      return ev;
    }
  }
  if (a.next >= limit) {
    const bool cut = limit < a.script.tokens.size();
    ev.finish = cut ? engine::FinishReason::kLength : a.script.finish;
    ev.error = a.script.error;
    const bool normal =
        *ev.finish == engine::FinishReason::kStop || *ev.finish == engine::FinishReason::kLength;
    if (normal && a.stops != nullptr) ev.stop_string = a.stops->finish();
    if (ev.stop_string) ev.finish = engine::FinishReason::kStop;
    *done = true;
  }
  return ev;
}

void FakeEngine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const Clock::time_point now = Clock::now();
    std::vector<std::pair<std::shared_ptr<engine::OutputSink>, engine::TokenEvent>> out;
    Clock::time_point wake = now + std::chrono::milliseconds(50);
    for (auto it = active_.begin(); it != active_.end();) {
      bool done = false;
      if (std::optional<engine::TokenEvent> ev = next_event(it->second, now, &done)) {
        const engine::GenerationRequest& r = it->second.request;
        const bool normal = ev->finish == engine::FinishReason::kStop ||
                            ev->finish == engine::FinishReason::kLength;
        if (normal && !r.retain_as.empty()) {  // pinned before the final event, as the engine
          caches_.put(engine::ContextCacheTable::info_for(r, 1'700'000'000'000), {it->first, 0});
        }
        out.emplace_back(it->second.sink, std::move(*ev));
      }
      if (!done && it->second.due > now) wake = std::min(wake, it->second.due);
      it = done ? active_.erase(it) : std::next(it);
    }
    if (!out.empty()) {
      ++delivering_;
      cv_.notify_all();
      lock.unlock();
      for (auto& [sink, ev] : out) sink->on_event(std::move(ev));
      lock.lock();
      --delivering_;
      cv_.notify_all();
      continue;
    }
    work_cv_.wait_until(lock, wake);
  }
}

}  // namespace keel::server::testing
