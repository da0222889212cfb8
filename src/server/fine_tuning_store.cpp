// FineTuningStore (see fine_tuning_store.h).
#include "server/fine_tuning_store.h"

#include <algorithm>

#include "core/log.h"

namespace keel::server {
namespace {

constexpr std::string_view kJobsCollection = "fine_tuning_jobs";
constexpr std::string_view kEventsCollection = "fine_tuning_events";
constexpr std::string_view kStatesCollection = "fine_tuning_states";

}  // namespace

Status FineTuningStore::attach(state::StateStore* state) {
  state_ = state;
  KEEL_ASSIGN_OR_RETURN(std::vector<state::Record> records, state->load_records(kJobsCollection));
  MutexLock lock(mu_);
  for (const state::Record& r : records) {
    Result<std::pair<FineTuningJob, uint64_t>> loaded = fine_tuning_job_from_state_json(r.value);
    if (!loaded.ok() || loaded->first.id != r.id) {
      KEEL_LOG_WARN("fine-tuning: job {} is left out: {}", r.id,
                    loaded.ok() ? "its record names another job" : loaded.status().message());
      continue;
    }
    Entry e;
    e.job = std::move(loaded->first);
    e.seq = loaded->second;
    load_events_locked(&e);
    next_seq_ = std::max(next_seq_, e.seq + 1);
    seq_of_[e.job.id] = e.seq;
    jobs_.emplace(e.seq, std::move(e));
  }
  KEEL_LOG_INFO("fine-tuning: {} jobs from {}", jobs_.size(), state->dir());
  return {};
}

void FineTuningStore::load_events_locked(Entry* e) {
  Result<std::vector<std::string>> log = state_->read_log(kEventsCollection, e->job.id);
  if (!log.ok()) {
    KEEL_LOG_WARN("fine-tuning: the events of {} are lost: {}", e->job.id, log.status().message());
    return;
  }
  for (const std::string& entry : *log) {
    const nlohmann::json batch = nlohmann::json::parse(entry, nullptr, false);
    if (!batch.is_array()) continue;  // the state store checksums entries: not expected
    for (const nlohmann::json& j : batch) {
      Result<FtEvent> ev = ft_event_from_json(j);
      if (!ev.ok()) continue;
      // Steps past the saved state of an unfinished job are taken again when it resumes.
      const std::optional<int64_t> step = ev->step();
      if (!is_terminal(e->job.status) && step && *step > e->job.state_step) continue;
      e->events.push_back(std::move(*ev));
    }
  }
  e->flushed = e->events.size();
}

FineTuningStore::Entry* FineTuningStore::find_locked(std::string_view id) {
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return nullptr;
  return &jobs_.at(it->second);
}

const FineTuningStore::Entry* FineTuningStore::find_locked(std::string_view id) const {
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return nullptr;
  return &jobs_.at(it->second);
}

void FineTuningStore::persist_locked(const Entry& e) {
  if (state_ == nullptr) return;
  if (Status st = state_->put_record(kJobsCollection, e.job.id, e.job.to_state_json(e.seq));
      !st.ok()) {
    KEEL_LOG_WARN("fine-tuning: job {} not written to the state directory: {}", e.job.id,
                  st.message());
  }
}

Status FineTuningStore::add(FineTuningJob job) {
  MutexLock lock(mu_);
  Entry e;
  e.seq = next_seq_++;
  e.job = std::move(job);
  if (state_ != nullptr) {
    KEEL_TRY(state_->put_record(kJobsCollection, e.job.id, e.job.to_state_json(e.seq)));
  }
  seq_of_[e.job.id] = e.seq;
  jobs_.emplace(e.seq, std::move(e));
  return {};
}

std::optional<FineTuningJob> FineTuningStore::find(std::string_view id) const {
  MutexLock lock(mu_);
  const Entry* e = find_locked(id);
  if (e == nullptr) return std::nullopt;
  return e->job;
}

std::optional<FineTuningJob> FineTuningStore::update(std::string_view id,
                                                     const std::function<void(FineTuningJob&)>& fn,
                                                     bool persist) {
  MutexLock lock(mu_);
  Entry* e = find_locked(id);
  if (e == nullptr) return std::nullopt;
  fn(e->job);
  if (persist) persist_locked(*e);
  return e->job;
}

std::vector<FineTuningJob> FineTuningStore::all() const {
  MutexLock lock(mu_);
  std::vector<FineTuningJob> out;
  for (const auto& [seq, e] : jobs_) out.push_back(e.job);
  return out;
}

size_t FineTuningStore::num_unfinished() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [seq, e] : jobs_) n += is_terminal(e.job.status) ? 0 : 1;
  return n;
}

FineTuningStore::Page FineTuningStore::list(size_t limit, std::string_view after) const {
  MutexLock lock(mu_);
  Page page;
  auto it = jobs_.rbegin();
  if (!after.empty()) {
    auto s = seq_of_.find(std::string(after));
    if (s == seq_of_.end()) return page;
    it = std::make_reverse_iterator(jobs_.find(s->second));  // the next older one
  }
  for (; it != jobs_.rend(); ++it) {
    if (page.jobs.size() == limit) {
      page.has_more = true;
      break;
    }
    page.jobs.push_back(it->second.job);
  }
  return page;
}

void FineTuningStore::add_event(std::string_view id, FtEvent event, bool flush) {
  MutexLock lock(mu_);
  Entry* e = find_locked(id);
  if (e == nullptr) return;
  e->events.push_back(std::move(event));
  if (!flush || state_ == nullptr) return;
  nlohmann::json batch = nlohmann::json::array();
  for (size_t i = e->flushed; i < e->events.size(); ++i) batch.push_back(e->events[i].to_json());
  if (Status st = state_->append(kEventsCollection, e->job.id, batch.dump()); !st.ok()) {
    KEEL_LOG_WARN("fine-tuning: events of {} not written to the state directory: {}", e->job.id,
                  st.message());
    return;
  }
  e->flushed = e->events.size();
}

FineTuningStore::EventPage FineTuningStore::events(std::string_view id, size_t limit,
                                                   std::string_view after) const {
  MutexLock lock(mu_);
  EventPage page;
  const Entry* e = find_locked(id);
  if (e == nullptr) return page;
  size_t end = e->events.size();  // events[0, end) are older than `after`
  if (!after.empty()) {
    auto it = std::find_if(e->events.begin(), e->events.end(),
                           [&](const FtEvent& ev) { return ev.id == after; });
    if (it == e->events.end()) return page;
    end = static_cast<size_t>(it - e->events.begin());
  }
  for (size_t i = end; i > 0; --i) {
    if (page.events.size() == limit) {
      page.has_more = true;
      break;
    }
    page.events.push_back(e->events[i - 1]);
  }
  return page;
}

std::vector<FtEvent> FineTuningStore::all_events(std::string_view id) const {
  MutexLock lock(mu_);
  const Entry* e = find_locked(id);
  return e == nullptr ? std::vector<FtEvent>{} : e->events;
}

Status FineTuningStore::put_state(std::string_view id, std::string bytes) {
  if (state_ != nullptr) return state_->put_blob(kStatesCollection, id, bytes);
  MutexLock lock(mu_);
  if (Entry* e = find_locked(id)) e->state = std::move(bytes);
  return {};
}

std::string FineTuningStore::state(std::string_view id) const {
  if (state_ != nullptr) {
    Result<std::string> blob = state_->read_blob(kStatesCollection, id);
    if (blob.ok()) return std::move(*blob);
    if (blob.status().code() != StatusCode::kNotFound) {
      KEEL_LOG_WARN("fine-tuning: the training state of {} is lost ({}): it starts over", id,
                    blob.status().message());
    }
    return {};
  }
  MutexLock lock(mu_);
  const Entry* e = find_locked(id);
  return e == nullptr ? std::string() : e->state;
}

void FineTuningStore::drop_state(std::string_view id) {
  if (state_ != nullptr) {
    (void)state_->remove_blob(kStatesCollection, id);
    return;
  }
  MutexLock lock(mu_);
  if (Entry* e = find_locked(id)) e->state.clear();
}

}  // namespace keel::server
