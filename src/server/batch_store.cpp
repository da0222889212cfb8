// BatchStore and the Batch object (see batch_store.h).
#include "server/batch_store.h"

namespace keel::server {
namespace {

nlohmann::json optional_time(const std::optional<int64_t>& t) {
  return t ? nlohmann::json(*t) : nlohmann::json(nullptr);
}

nlohmann::json optional_string(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

}  // namespace

std::string_view batch_status_name(BatchStatus status) {
  switch (status) {
    case BatchStatus::kValidating:
      return "validating";
    case BatchStatus::kFailed:
      return "failed";
    case BatchStatus::kInProgress:
      return "in_progress";
    case BatchStatus::kFinalizing:
      return "finalizing";
    case BatchStatus::kCompleted:
      return "completed";
    case BatchStatus::kExpired:
      return "expired";
    case BatchStatus::kCancelling:
      return "cancelling";
    case BatchStatus::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

bool is_terminal(BatchStatus status) {
  return status == BatchStatus::kFailed || status == BatchStatus::kCompleted ||
         status == BatchStatus::kExpired || status == BatchStatus::kCancelled;
}

nlohmann::json BatchRecord::to_json() const {
  nlohmann::json errs = nullptr;
  if (!errors.empty()) {
    errs = {{"object", "list"}, {"data", nlohmann::json::array()}};
    for (const BatchError& e : errors) {
      errs["data"].push_back({{"code", e.code},
                              {"message", e.message},
                              {"param", optional_string(e.param)},
                              {"line", optional_time(e.line)}});
    }
  }
  return {{"id", id},
          {"object", "batch"},
          {"endpoint", endpoint},
          {"errors", errs},
          {"input_file_id", input_file_id},
          {"completion_window", completion_window},
          {"status", batch_status_name(status)},
          {"output_file_id", optional_string(output_file_id)},
          {"error_file_id", optional_string(error_file_id)},
          {"created_at", created_at},
          {"in_progress_at", optional_time(in_progress_at)},
          {"expires_at", expires_at},
          {"finalizing_at", optional_time(finalizing_at)},
          {"completed_at", optional_time(completed_at)},
          {"failed_at", optional_time(failed_at)},
          {"expired_at", optional_time(expired_at)},
          {"cancelling_at", optional_time(cancelling_at)},
          {"cancelled_at", optional_time(cancelled_at)},
          {"request_counts", {{"total", total}, {"completed", completed}, {"failed", failed}}},
          {"metadata", metadata}};
}

void BatchStore::add(BatchRecord record) {
  std::lock_guard<std::mutex> lock(mu_);
  if (batches_.size() >= kMaxBatches) {
    for (auto it = batches_.begin(); it != batches_.end(); ++it) {
      if (is_terminal(it->second.status)) {
        seq_of_.erase(it->second.id);
        batches_.erase(it);
        break;
      }
    }
  }
  const uint64_t seq = next_seq_++;
  seq_of_[record.id] = seq;
  batches_.emplace(seq, std::move(record));
}

std::optional<BatchRecord> BatchStore::find(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return std::nullopt;
  return batches_.at(it->second);
}

std::optional<BatchRecord> BatchStore::update(std::string_view id,
                                              const std::function<void(BatchRecord&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return std::nullopt;
  BatchRecord& r = batches_.at(it->second);
  fn(r);
  return r;
}

BatchStore::Page BatchStore::list(size_t limit, std::string_view after) const {
  std::lock_guard<std::mutex> lock(mu_);
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

}  // namespace keel::server
