// BatchStore (see batch_store.h).
#include "server/batch_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "core/log.h"

namespace keel::server {
namespace {

constexpr std::string_view kBatchesCollection = "batches";

}  // namespace

Status BatchStore::attach(state::StateStore* state) {
  state_ = state;
  KEEL_ASSIGN_OR_RETURN(std::vector<state::Record> records,
                        state->load_records(kBatchesCollection));
  MutexLock lock(mu_);
  for (const state::Record& r : records) {
    Result<std::pair<BatchRecord, uint64_t>> loaded = batch_record_from_state_json(r.value);
    if (!loaded.ok() || loaded->first.id != r.id) {
      KEEL_LOG_WARN("batches: {} is left out: {}", r.id,
                    loaded.ok() ? "its record names another batch" : loaded.status().message());
      continue;
    }
    auto& [record, seq] = *loaded;
    next_seq_ = std::max(next_seq_, seq + 1);
    seq_of_[record.id] = seq;
    batches_.emplace(seq, std::move(record));
  }
  KEEL_LOG_INFO("batches: {} batches from {}", batches_.size(), state->dir());
  return {};
}

void BatchStore::persist_locked(const BatchRecord& record, uint64_t seq) {
  if (state_ == nullptr) return;
  if (Status st = state_->put_record(kBatchesCollection, record.id, record.to_state_json(seq));
      !st.ok()) {
    KEEL_LOG_WARN("batches: {} not written to the state directory: {}", record.id, st.message());
  }
}

Status BatchStore::add(BatchRecord record) {
  MutexLock lock(mu_);
  const uint64_t seq = next_seq_++;
  if (state_ != nullptr)
    KEEL_TRY(state_->put_record(kBatchesCollection, record.id, record.to_state_json(seq)));
  if (batches_.size() >= kMaxBatches) {
    for (auto it = batches_.begin(); it != batches_.end(); ++it) {
      if (is_terminal(it->second.status)) {
        if (state_ != nullptr) {
          (void)state_->remove_record(kBatchesCollection, it->second.id);
          (void)state_->remove_log(kBatchesCollection, it->second.id);
        }
        seq_of_.erase(it->second.id);
        batches_.erase(it);
        break;
      }
    }
  }
  seq_of_[record.id] = seq;
  batches_.emplace(seq, std::move(record));
  return {};
}

std::optional<BatchRecord> BatchStore::find(std::string_view id) const {
  MutexLock lock(mu_);
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return std::nullopt;
  return batches_.at(it->second);
}

std::optional<BatchRecord> BatchStore::update(std::string_view id,
                                              const std::function<void(BatchRecord&)>& fn,
                                              bool persist) {
  MutexLock lock(mu_);
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return std::nullopt;
  BatchRecord& r = batches_.at(it->second);
  fn(r);
  if (persist) persist_locked(r, it->second);
  return r;
}

std::vector<BatchRecord> BatchStore::unfinished() const {
  MutexLock lock(mu_);
  std::vector<BatchRecord> out;
  for (const auto& [seq, r] : batches_) {
    if (!is_terminal(r.status)) out.push_back(r);
  }
  return out;
}

BatchStore::Page BatchStore::list(size_t limit, std::string_view after) const {
  MutexLock lock(mu_);
  Page page;
  bool started = after.empty();
  for (auto it = batches_.rbegin(); it != batches_.rend(); ++it) {
    if (!started) {
      started = it->second.id == after;
      continue;
    }
    if (page.batches.size() == limit) {
      page.has_more = true;
      break;
    }
    page.batches.push_back(it->second);
  }
  return page;
}

Status BatchStore::record_line(std::string_view id, const FinishedLine& line) {
  if (state_ == nullptr) return {};
  const nlohmann::json entry = {
      {"custom_id", line.custom_id}, {"ok", line.ok}, {"line", line.jsonl}};
  return state_->append(kBatchesCollection, id, entry.dump());
}

std::vector<FinishedLine> BatchStore::finished_lines(std::string_view id) {
  if (state_ == nullptr) return {};
  Result<std::vector<std::string>> entries = state_->read_log(kBatchesCollection, id);
  if (!entries.ok()) {
    KEEL_LOG_WARN("batches: {}: progress log unreadable ({}): its lines run again", id,
                  entries.status().message());
    return {};
  }
  std::vector<FinishedLine> lines;
  std::unordered_set<std::string> seen;
  for (const std::string& text : *entries) {
    const nlohmann::json e = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    FinishedLine line;
    try {
      line = {e.at("custom_id").get<std::string>(), e.at("ok").get<bool>(),
              e.at("line").get<std::string>()};
    } catch (const nlohmann::json::exception& ex) {
      KEEL_LOG_WARN("batches: {}: a progress entry is malformed ({}): left out", id, ex.what());
      continue;
    }
    // A line appended whole whose append then reported an error ran again: the first counts.
    if (seen.insert(line.custom_id).second) lines.push_back(std::move(line));
  }
  return lines;
}

void BatchStore::forget_lines(std::string_view id) {
  if (state_ == nullptr) return;
  if (Status st = state_->remove_log(kBatchesCollection, id); !st.ok()) {
    KEEL_LOG_WARN("batches: {}: progress log not removed: {}", id, st.message());
  }
}

}  // namespace keel::server
