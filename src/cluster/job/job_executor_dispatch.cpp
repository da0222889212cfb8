// JobExecutor's dispatch (see job_executor.h): the router's choice over the TEs that reported, the
// task built for it, and the asynchronous call that hands it to the TE — tried on the next TE the
// router picks when one refuses or does not answer (it is taken out of service), never waiting on
// a link's reader thread. dispatch() waits for the same on the monitor thread.
#include <algorithm>
#include <future>
#include <utility>

#include "cluster/job/job_executor.h"
#include "cluster/job/job_executor_entries.h"
#include "core/log.h"

namespace keel::cluster {

// One dispatch across its tries (one TE each).
struct JobExecutor::DispatchTry {
  JobRef ref;
  bool retry = false;
  size_t tries = 0;
  Status last = Status::unavailable("no healthy task executor");
  std::function<void(Status, Json)> done;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point sent;  // the last try's call
};

std::optional<JobExecutor::Choice> JobExecutor::choose_te(const Job& job, bool count_no_capacity) {
  FleetSnapshot fleet;
  for (const auto& te : tes_) {
    if (te->reported && !te->draining) fleet.tes.push_back(te->info);
  }
  // KV kept across tool calls: the TE holding the program's pin, if one is remembered.
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  sticky_.expire(now);
  const std::string sticky =
      sticky_.te_for_program(job.request.tenant, job.request.program, now).value_or("");
  const RouteInput input{.fleet = fleet,
                         .index = index_,
                         .heatmap = config_.heatmap ? &*config_.heatmap : nullptr,
                         .model = config_.model,
                         .prompt_tokens = static_cast<int64_t>(job.request.prompt_tokens.size()),
                         .prompt_block_hashes = job.block_hashes,
                         .predicted_decode_tokens = job.predicted_tokens,
                         .config = config_.router,
                         .cursor = cursor_++,
                         .sticky_te_id = sticky};
  const RouteDecision decision = route(input);
  if (count_no_capacity || decision.branch != RouteBranch::kNoCapacity) counters_.record(decision);
  if (decision.branch == RouteBranch::kNoCapacity) return std::nullopt;
  std::optional<Choice> choice;
  for (size_t i = 0; i < tes_.size(); ++i) {
    if (tes_[i]->info.id == decision.te_id) choice = Choice{i, std::nullopt, std::nullopt};
  }
  if (choice && !tes_[choice->te]->kv_fetch.empty()) choice->peer = peer_hint(job, decision.te_id);
  if (!choice || decision.pd != PdMode::kPdDisaggregated) return choice;
  for (size_t i = 0; i < tes_.size(); ++i) {
    if (tes_[i]->info.id == decision.decode_te_id) choice->decode_te = i;
  }
  return choice;
}

std::optional<PeerHint> JobExecutor::peer_hint(const Job& job, const std::string& te_id) const {
  std::vector<PeerCandidate> candidates;
  std::vector<std::string> ids;
  for (const auto& te : tes_) {
    if (!te->reported) continue;
    candidates.push_back(PeerCandidate{te->info.id, te->kv_fetch, te->info.healthy, {}});
    ids.push_back(te->info.id);
  }
  const std::vector<PrefixMatch> matches = index_.match(job.block_hashes, ids);
  for (size_t i = 0; i < candidates.size(); ++i) candidates[i].match = matches[i];
  return choose_peer_hint(te_id, candidates);
}

void JobExecutor::count_out(size_t te, const Result<Json>& why) {
  TeEntry& e = *tes_[te];
  if (!e.info.healthy) return;  // already out: it keeps the state that took it out
  e.info.healthy = false;
  const bool silent = !why.ok() && e.link && !e.link->closed();  // no answer in time
  e.info.state = silent ? health::TeState::kHung : health::TeState::kDead;
}

SubmitTask JobExecutor::task_for(Job& job, const Choice& chosen) {
  SubmitTask task;
  job.te = chosen.te;
  job.decode_te.reset();
  task.ref = job.ref;
  task.attempt = job.attempt;
  task.reply_to = job.reply_to;
  task.request = job.request;
  // A re-drive: the tokens generated so far become prompt, marked as generated. At least one
  // token is left to generate, so the final event comes from the new attempt.
  const int32_t n =
      std::min<int32_t>(static_cast<int32_t>(job.generated.size()), job.request.max_tokens - 1);
  if (n > 0) {
    task.request.prompt_tokens.insert(task.request.prompt_tokens.end(), job.generated.begin(),
                                      job.generated.begin() + n);
    task.request.resumed_tokens = n;
  }
  // Disaggregated: this TE computes the prompt and one token, then hands the KV to the decode TE
  // (only worth it when more than one token is left).
  if (chosen.decode_te && job.request.max_tokens - n > 1) {
    job.decode_te = chosen.decode_te;
    task.prefill_only = true;
    task.transfer_to = tes_[*chosen.decode_te]->kv_transfer;
    task.request.max_tokens = n + 1;
  }
  if (chosen.peer) task.peer = *chosen.peer;
  if (job.request.keep_kv && !task.prefill_only) note_pin(job, chosen.te);
  TeLoad& load = tes_[chosen.te]->info.load;  // counted now; the next report corrects it
  load.pending_tokens +=
      static_cast<int64_t>(task.request.prompt_tokens.size()) + task.request.max_tokens;
  return task;
}

void JobExecutor::dispatch_async(const JobRef& ref, bool retry,
                                 std::function<void(Status, Json)> done) {
  auto d = std::make_shared<DispatchTry>();
  d->ref = ref;
  d->retry = retry;
  d->done = std::move(done);
  dispatch_step(std::move(d));
}

void JobExecutor::dispatch_step(std::shared_ptr<DispatchTry> d) {
  SubmitTask task;
  std::shared_ptr<net::Link> te_link;
  size_t te = 0;
  std::optional<Status> end;
  {
    MutexLock lock(mu_);
    const auto it = jobs_.find(d->ref);
    if (d->tries >= tes_.size()) {
      end = d->last;
    } else if (it == jobs_.end()) {
      end = Status::cancelled("job gone");
    } else if (const std::optional<Choice> chosen = choose_te(*it->second, !d->retry); !chosen) {
      end = d->last;
    } else {
      te = chosen->te;
      te_link = tes_[te]->link;
      task = task_for(*it->second, *chosen);
    }
    if (!end) ++calls_in_flight_;
  }
  if (end) return d->done(*end, Json::object());
  net::Message message = encode(task);
  d->sent = Clock::now();
  te_link->call_async(std::move(message), config_.task_call_timeout,
                      [this, d = std::move(d), te](Result<Json> reply) mutable {
                        on_task_reply(std::move(d), te, std::move(reply));
                        MutexLock lock(mu_);
                        if (--calls_in_flight_ == 0) cv_.notify_all();
                      });
}

void JobExecutor::on_task_reply(std::shared_ptr<DispatchTry> d, size_t te, Result<Json> reply) {
  if (reply.ok()) {
    const Status s = decode_status_body(*reply);
    if (s.ok() || s.code() != StatusCode::kUnavailable) {
      const auto seconds = [](Clock::duration x) {
        return std::chrono::duration<double>(x).count();
      };
      const Clock::time_point now = Clock::now();
      Json hops = reply->contains("hops") && (*reply)["hops"].is_object() ? (*reply)["hops"]
                                                                          : Json::object();
      hops["je_route"] = seconds(d->sent - d->started);
      hops["te_call"] = seconds(now - d->sent);
      return d->done(s, std::move(hops));
    }
    d->last = s;  // that TE is stopping: try another
  } else {
    d->last = reply.status();
  }
  {
    MutexLock lock(mu_);  // tes_ may grow (add_te) meanwhile: read under the lock
    KEEL_LOG_WARN("je {}: te {} did not take a task: {}; taking it out of service", config_.id,
                  tes_[te]->address, d->last.message());
    count_out(te, reply);
    const auto it = jobs_.find(d->ref);
    if (it != jobs_.end()) it->second->te.reset();
  }
  ++d->tries;
  dispatch_step(std::move(d));
}

Status JobExecutor::dispatch(const JobRef& ref, bool retry) {
  std::promise<Status> placed;
  std::future<Status> result = placed.get_future();
  dispatch_async(ref, retry, [&placed](Status s, const Json&) { placed.set_value(std::move(s)); });
  return result.get();
}

void JobExecutor::dispatch_decode(const JobRef& ref) {
  SubmitTask task;
  std::shared_ptr<net::Link> te_link;
  size_t te = 0;
  {
    MutexLock lock(mu_);
    const auto it = jobs_.find(ref);
    if (it == jobs_.end() || it->second->aborted) return;
    Job& job = *it->second;
    if (!job.decode_te || !tes_[*job.decode_te]->info.healthy) {
      job.decode_te.reset();
      to_redrive_.push_back(ref);  // routed afresh (counts as an attempt)
      return;
    }
    te = *job.decode_te;
    te_link = tes_[te]->link;
    job.te = te;
    task.ref = ref;
    task.attempt = job.attempt;
    task.reply_to = job.reply_to;
    task.request = job.request;
    task.request.prompt_tokens.insert(task.request.prompt_tokens.end(), job.generated.begin(),
                                      job.generated.end());
    task.request.resumed_tokens = static_cast<int32_t>(job.generated.size());
  }
  Result<Json> reply = te_link->call(encode(task), config_.task_call_timeout);
  const Status s = reply.ok() ? decode_status_body(*reply) : reply.status();
  if (s.ok()) return;
  {
    MutexLock lock(mu_);  // tes_ may grow (add_te) meanwhile: read under the lock
    KEEL_LOG_WARN("je {}: decode te {} did not take job {}: {}", config_.id, tes_[te]->address,
                  ref.job, s.message());
  }
  if (s.code() != StatusCode::kUnavailable && reply.ok()) return fail_job(ref, s.message());
  MutexLock lock(mu_);
  count_out(te, reply);
  const auto it = jobs_.find(ref);
  if (it != jobs_.end()) {
    it->second->te.reset();
    it->second->decode_te.reset();
    to_redrive_.push_back(ref);
  }
}

}  // namespace keel::cluster
