// SemiPdWorker implementation (see semi_pd_worker.h): the worker loop, the prefill and decode
// iterations, the finish rules (the colocated engine's: stop strings, EOG and stop ids, length)
// and the core-set switch.
#include "engine/semi_pd_worker.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/check.h"
#include "core/log.h"
#include "engine/finish_rule.h"
#include "engine/semi_pd_split.h"
#include "engine/steady_time.h"
#include "sampling/draft_verify.h"

namespace keel::engine {

SemiPdWorker::SemiPdWorker(SemiPdRole role, const SemiPdShared* shared, kernels::Isa isa,
                           std::vector<int> cores)
    : role_(role), shared_(shared), isa_(isa), next_cores_(std::move(cores)) {
  KEEL_CHECK(!next_cores_.empty());
}

SemiPdWorker::~SemiPdWorker() {
  stop();
  join();
  abort_left();
}

void SemiPdWorker::start(SemiPdWorker* peer) {
  peer_ = peer;
  thread_ = std::thread([this] { run(); });
}

void SemiPdWorker::push(std::unique_ptr<SemiPdRequest> r, bool front) {
  {
    MutexLock lock(mu_);
    (front ? inbox_front_ : inbox_).push_back(std::move(r));
  }
  cv_.notify_all();
}

void SemiPdWorker::set_cores(std::vector<int> cores) {
  KEEL_CHECK(!cores.empty());
  {
    MutexLock lock(mu_);
    next_cores_ = std::move(cores);
    wake_ = true;
  }
  cv_.notify_all();
}

void SemiPdWorker::wake() {
  {
    MutexLock lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void SemiPdWorker::stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void SemiPdWorker::join() {
  if (thread_.joinable()) thread_.join();
}

void SemiPdWorker::abort_left() {
  KEEL_CHECK(!thread_.joinable());
  std::deque<std::unique_ptr<SemiPdRequest>> left;
  {
    MutexLock lock(mu_);
    left.swap(inbox_front_);
    for (auto& r : inbox_) left.push_back(std::move(r));
    inbox_.clear();
  }
  for (auto& r : running_) left.push_back(std::move(r));
  for (auto& r : waiting_) left.push_back(std::move(r));
  running_.clear();
  waiting_.clear();
  for (auto& r : left) finish(*r, FinishReason::kAbort, TokenEvent{});
  publish_counts();
}

void SemiPdWorker::run() {
  const int32_t max_tokens = role_ == SemiPdRole::kPrefill
                                 ? shared_->config->scheduler.max_batched_tokens
                                 : shared_->config->scheduler.max_num_seqs;
  ctx_ = std::make_unique<model::Context>(*shared_->model, max_tokens);
  ctx_->count_experts(shared_->expert_counts);
  bool worked = true;
  while (take_inbox(worked)) {
    apply_cores();
    drop_cancelled();
    worked = role_ == SemiPdRole::kPrefill ? prefill_step() : decode_step();
    if (worked) num_steps_.fetch_add(1);
    publish_counts();
  }
}

bool SemiPdWorker::take_inbox(bool worked) {
  UniqueLock lock(mu_);
  const auto news = [this] {
    mu_.assert_held();
    return stop_ || wake_ || !inbox_.empty() || !inbox_front_.empty();
  };
  if (running_.empty() && waiting_.empty()) {
    cv_.wait(lock.native(), news);
  } else if (!worked) {  // blocked on KV blocks: the peer frees some soon; do not spin
    cv_.wait_for(lock.native(), std::chrono::microseconds(500), news);
  }
  if (stop_) return false;
  wake_ = false;
  while (!inbox_front_.empty()) {  // preempted requests first, oldest at the front
    waiting_.push_front(std::move(inbox_front_.back()));
    inbox_front_.pop_back();
  }
  for (auto& r : inbox_) {
    if (r->probe != nullptr && role_ == SemiPdRole::kDecode && shared_->on_hand_off) {
      r->probe->decode_blocks = r->blocks;
      r->probe->allocated_received = shared_->blocks->num_allocated();
      shared_->on_hand_off(*r->probe);
      r->probe.reset();
    }
    waiting_.push_back(std::move(r));
  }
  inbox_.clear();
  return true;
}

namespace {

// A pool of cores.size() threads whose workers (threads 1..n-1) are pinned to cores[1..]; thread 0
// is whoever runs it, pinned by the worker when it takes the pool over.
std::unique_ptr<ThreadPool> pinned_pool(const std::vector<int>& cores) {
  auto pool = std::make_unique<ThreadPool>(static_cast<int>(cores.size()));
  std::atomic<int> failures{0};
  pool->run([&](int idx, int) {
    if (idx > 0 && !pin_current_thread(cores[static_cast<size_t>(idx) % cores.size()])) {
      failures.fetch_add(1);
    }
  });
  if (failures.load() > 0) KEEL_LOG_WARN("semi-PD: {} compute threads not pinned", failures.load());
  return pool;
}

}  // namespace

void SemiPdWorker::apply_cores() {
  if (preparing_.valid()) {  // a pool for the new cores is being built off this thread
    if (preparing_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    const int64_t t0 = now_ns();
    take_pool(preparing_.get());
    shared_->switch_seconds->observe(seconds_between(t0, now_ns()));
    return;
  }
  std::vector<int> cores;
  {
    MutexLock lock(mu_);
    if (next_cores_.empty()) return;
    cores.swap(next_cores_);
  }
  if (pool_ == nullptr) {  // start-up: nothing to compute with yet
    take_pool({pinned_pool(cores), cores});
    return;
  }
  // Delayed switching: this worker goes on with its old pool while the new one is built.
  preparing_ = std::async(std::launch::async, [cores = std::move(cores)]() mutable {
    auto pool = pinned_pool(cores);
    return PreparedPool{std::move(pool), std::move(cores)};
  });
}

void SemiPdWorker::take_pool(PreparedPool p) {
  ops_.reset();
  pool_ = std::move(p.pool);
  cores_ = std::move(p.cores);
  if (!pin_current_thread(cores_.front())) KEEL_LOG_WARN("semi-PD: worker thread not pinned");
  ops_ = std::make_unique<kernels::Ops>(isa_, pool_.get());
  num_threads_.store(static_cast<int32_t>(cores_.size()));
}

void SemiPdWorker::drop_cancelled() {
  auto gone = [](const std::unique_ptr<SemiPdRequest>& r) { return r->cancelled->load(); };
  for (auto& r : running_) {
    if (gone(r)) finish(*r, FinishReason::kAbort, TokenEvent{});
  }
  std::erase_if(running_, gone);
  for (auto& r : waiting_) {
    if (gone(r)) finish(*r, FinishReason::kAbort, TokenEvent{});
  }
  std::erase_if(waiting_, gone);
}

void SemiPdWorker::publish_counts() {
  num_waiting_.store(static_cast<int32_t>(waiting_.size()));
  num_running_.store(static_cast<int32_t>(running_.size()));
}

void SemiPdWorker::admit_prefills() {
  const int32_t bs = shared_->config->block_size;
  while (!waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < shared_->config->scheduler.max_num_seqs) {
    SemiPdRequest& r = *waiting_.front();
    const auto want = static_cast<int32_t>((r.tokens.size() + bs - 1) / bs);
    const int32_t need = want - static_cast<int32_t>(r.blocks.size());
    if (need > 0 && !shared_->blocks->allocate(need, &r.blocks)) break;  // decode frees later
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

bool SemiPdWorker::prefill_step() {
  admit_prefills();
  if (running_.empty()) return false;
  model::Batch batch;
  std::vector<Scheduled> sched;
  int32_t budget = shared_->config->scheduler.max_batched_tokens;
  for (auto& r : running_) {
    const int32_t left = static_cast<int32_t>(r->tokens.size()) - r->num_computed;
    const int32_t n = std::min(left, budget);
    if (n <= 0) break;
    const int32_t seq = batch.add_seq(r->blocks);
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = r->num_computed + i;
      batch.add(r->tokens[pos], pos, seq, i == left - 1);
    }
    sched.push_back({r.get(), n, n == left});
    budget -= n;
  }
  std::vector<std::pair<int32_t, std::optional<sampling::Logprobs>>> tokens;
  const int64_t t0 = now_ns();
  if (!forward(batch, sched, &tokens)) return true;
  size_t t = 0;
  std::vector<SemiPdRequest*> done;  // finished or handed off
  for (const Scheduled& s : sched) {
    s.r->num_computed += s.n;
    if (!s.samples) continue;
    done.push_back(s.r);
    emit(*s.r, tokens[t].first, std::move(tokens[t].second));
    ++t;
  }
  for (auto it = running_.begin(); it != running_.end();) {
    if (std::find(done.begin(), done.end(), it->get()) == done.end()) {
      ++it;
      continue;
    }
    if (!(*it)->sink) {  // finished by emit()
      it = running_.erase(it);
      continue;
    }
    hand_off(std::move(*it));
    it = running_.erase(it);
  }
  if (shared_->on_prefill_step) {
    shared_->on_prefill_step(seconds_between(t0, now_ns()) * static_cast<double>(cores_.size()),
                             static_cast<int32_t>(done.size()));
  }
  return true;
}

void SemiPdWorker::hand_off(std::unique_ptr<SemiPdRequest> r) {
  if (shared_->on_hand_off) {
    r->probe = std::make_unique<SemiPdHandOff>();
    r->probe->key = r->key;
    r->probe->prefill_blocks = r->blocks;
    r->probe->allocated_sent = shared_->blocks->num_allocated();
  }
  peer_->push(std::move(r));  // by reference: the table moves, no KV byte is copied
}

bool SemiPdWorker::decode_step() {
  const int32_t bs = shared_->config->block_size;
  while (!waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < shared_->config->scheduler.max_num_seqs) {
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  // Each running request needs a block for its next position; when the pool is out, the newest
  // running request goes back to prefill (recompute), never an older one for a newer.
  for (size_t i = 0; i < running_.size();) {
    SemiPdRequest& r = *running_[i];
    const int32_t want = r.num_computed / bs + 1;
    if (static_cast<int32_t>(r.blocks.size()) >= want ||
        shared_->blocks->allocate(want - static_cast<int32_t>(r.blocks.size()), &r.blocks)) {
      ++i;
      continue;
    }
    std::unique_ptr<SemiPdRequest> victim = std::move(running_.back());
    running_.pop_back();
    shared_->blocks->release(victim->blocks);
    victim->blocks.clear();
    victim->num_computed = 0;
    num_preemptions_.fetch_add(1);
    peer_->push(std::move(victim), /*front=*/true);
  }
  if (running_.empty()) return false;
  model::Batch batch;
  std::vector<Scheduled> sched;
  for (auto& r : running_) {
    const int32_t seq = batch.add_seq(r->blocks);
    batch.add(r->tokens.back(), r->num_computed, seq, true);
    sched.push_back({r.get(), 1, true});
  }
  std::vector<std::pair<int32_t, std::optional<sampling::Logprobs>>> tokens;
  if (!forward(batch, sched, &tokens)) return true;
  for (size_t i = 0; i < sched.size(); ++i) {
    sched[i].r->num_computed += 1;
    emit(*sched[i].r, tokens[i].first, std::move(tokens[i].second));
  }
  std::erase_if(running_, [](const std::unique_ptr<SemiPdRequest>& r) { return !r->sink; });
  return true;
}

bool SemiPdWorker::forward(
    const model::Batch& batch, const std::vector<Scheduled>& sched,
    std::vector<std::pair<int32_t, std::optional<sampling::Logprobs>>>* tokens) {
  logits_.clear();
  const Status st = ctx_->forward(batch, *shared_->storage, *ops_, &logits_);
  if (!st.ok()) {
    for (const Scheduled& s : sched) {
      TokenEvent e;
      e.error = "forward pass failed: " + st.to_string();
      finish(*s.r, FinishReason::kError, std::move(e));
    }
    std::erase_if(running_, [](const std::unique_ptr<SemiPdRequest>& r) { return !r->sink; });
    return false;
  }
  const auto n_vocab = static_cast<size_t>(shared_->model->hparams().n_vocab);
  size_t row = 0;
  std::vector<sampling::SampleOutput> out;
  for (const Scheduled& s : sched) {
    if (!s.samples) continue;
    KEEL_CHECK(logits_.size() >= (row + 1) * n_vocab);
    out.clear();
    sampling::verify_drafts(*s.r->sampler,
                            std::span<float>(logits_.data() + row * n_vocab, n_vocab), {}, &out);
    KEEL_CHECK(out.size() == 1);
    tokens->emplace_back(out[0].token, std::move(out[0].logprobs));
    ++row;
  }
  return true;
}

bool SemiPdWorker::emit(SemiPdRequest& r, int32_t token,
                        std::optional<sampling::Logprobs> logprobs) {
  const int64_t t = now_ns();
  if (r.first_token_ns == 0) {
    r.first_token_ns = t;
    const double ttft = seconds_between(r.arrival_ns, t);
    shared_->metrics->time_to_first_token_seconds.observe(ttft);
    if (shared_->on_first_token) shared_->on_first_token(ttft);
  } else {
    shared_->metrics->inter_token_latency_seconds.observe(seconds_between(r.last_token_ns, t));
  }
  r.last_token_ns = t;
  r.tokens.push_back(token);
  ++r.num_generated;
  TokenEvent event;
  event.tokens.push_back(token);
  if (logprobs) event.logprobs.push_back(std::move(*logprobs));
  const FinishCheck check{&r.request, r.num_generated, shared_->config->eog_token_ids,
                          shared_->config->scheduler.max_model_len, r.stops.get()};
  if (const auto reason = finish_rule(check, token, &event)) {
    finish(r, *reason, std::move(event));
    return false;
  }
  r.sink->on_event(std::move(event));
  return true;
}

void SemiPdWorker::finish(SemiPdRequest& r, FinishReason reason, TokenEvent event) {
  if (!r.sink) return;  // already finished
  shared_->blocks->release(r.blocks);
  r.blocks.clear();
  const int64_t t = now_ns();
  event.finish = reason;
  event.num_prompt_tokens = r.request.num_original_prompt_tokens();
  event.num_cached_tokens = 0;  // semi-PD runs without a prefix cache
  observe_finished(*shared_->metrics, reason, r.request, r.arrival_ns, r.num_generated, t);
  std::shared_ptr<OutputSink> sink = std::move(r.sink);  // r.sink null marks it finished
  sink->on_event(std::move(event));
  shared_->on_finished(r);
}

}  // namespace keel::engine
