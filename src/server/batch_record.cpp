// BatchRecord and its JSON (see batch_record.h).
#include "server/batch_record.h"

#include <fmt/format.h>

namespace keel::server {
namespace {

constexpr BatchStatus kBatchStatuses[] = {
    BatchStatus::kValidating, BatchStatus::kFailed,    BatchStatus::kInProgress,
    BatchStatus::kFinalizing, BatchStatus::kCompleted, BatchStatus::kExpired,
    BatchStatus::kCancelling, BatchStatus::kCancelled,
};

nlohmann::json json_time(const std::optional<int64_t>& t) {
  return t ? nlohmann::json(*t) : nlohmann::json(nullptr);
}

nlohmann::json json_string(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

// j[key] when it is not null (json exceptions on a wrong type are caught by the caller).
template <typename T>
std::optional<T> nullable_field(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (v.is_null()) return std::nullopt;
  return v.get<T>();
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

std::optional<BatchStatus> parse_batch_status(std::string_view name) {
  for (BatchStatus s : kBatchStatuses) {
    if (batch_status_name(s) == name) return s;
  }
  return std::nullopt;
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
                              {"param", json_string(e.param)},
                              {"line", json_time(e.line)}});
    }
  }
  return {{"id", id},
          {"object", "batch"},
          {"endpoint", endpoint},
          {"errors", errs},
          {"input_file_id", input_file_id},
          {"completion_window", completion_window},
          {"status", batch_status_name(status)},
          {"output_file_id", json_string(output_file_id)},
          {"error_file_id", json_string(error_file_id)},
          {"created_at", created_at},
          {"in_progress_at", json_time(in_progress_at)},
          {"expires_at", expires_at},
          {"finalizing_at", json_time(finalizing_at)},
          {"completed_at", json_time(completed_at)},
          {"failed_at", json_time(failed_at)},
          {"expired_at", json_time(expired_at)},
          {"cancelling_at", json_time(cancelling_at)},
          {"cancelled_at", json_time(cancelled_at)},
          {"request_counts", {{"total", total}, {"completed", completed}, {"failed", failed}}},
          {"metadata", metadata}};
}

nlohmann::json BatchRecord::to_state_json(uint64_t seq) const {
  nlohmann::json j = to_json();
  j["keel"] = {{"seq", seq},
               {"planned_output_file_id", json_string(planned_output_file_id)},
               {"planned_error_file_id", json_string(planned_error_file_id)}};
  return j;
}

Result<std::pair<BatchRecord, uint64_t>> batch_record_from_state_json(const nlohmann::json& j) {
  BatchRecord r;
  uint64_t seq = 0;
  try {
    r.id = j.at("id").get<std::string>();
    r.endpoint = j.at("endpoint").get<std::string>();
    r.input_file_id = j.at("input_file_id").get<std::string>();
    r.completion_window = j.at("completion_window").get<std::string>();
    const std::string status = j.at("status").get<std::string>();
    const std::optional<BatchStatus> s = parse_batch_status(status);
    if (!s) return Status::corrupt(fmt::format("batch record: unknown status \"{}\"", status));
    r.status = *s;
    r.metadata = j.at("metadata");
    if (const nlohmann::json& errs = j.at("errors"); !errs.is_null()) {
      for (const nlohmann::json& e : errs.at("data")) {
        r.errors.push_back({e.at("code").get<std::string>(), e.at("message").get<std::string>(),
                            nullable_field<std::string>(e, "param"),
                            nullable_field<int64_t>(e, "line")});
      }
    }
    r.output_file_id = nullable_field<std::string>(j, "output_file_id");
    r.error_file_id = nullable_field<std::string>(j, "error_file_id");
    r.created_at = j.at("created_at").get<int64_t>();
    r.expires_at = j.at("expires_at").get<int64_t>();
    r.in_progress_at = nullable_field<int64_t>(j, "in_progress_at");
    r.finalizing_at = nullable_field<int64_t>(j, "finalizing_at");
    r.completed_at = nullable_field<int64_t>(j, "completed_at");
    r.failed_at = nullable_field<int64_t>(j, "failed_at");
    r.expired_at = nullable_field<int64_t>(j, "expired_at");
    r.cancelling_at = nullable_field<int64_t>(j, "cancelling_at");
    r.cancelled_at = nullable_field<int64_t>(j, "cancelled_at");
    const nlohmann::json& counts = j.at("request_counts");
    r.total = counts.at("total").get<int64_t>();
    r.completed = counts.at("completed").get<int64_t>();
    r.failed = counts.at("failed").get<int64_t>();
    const nlohmann::json& keel = j.at("keel");
    seq = keel.at("seq").get<uint64_t>();
    r.planned_output_file_id = nullable_field<std::string>(keel, "planned_output_file_id");
    r.planned_error_file_id = nullable_field<std::string>(keel, "planned_error_file_id");
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(fmt::format("batch record: {}", e.what()));
  }
  return std::pair{std::move(r), seq};
}

}  // namespace keel::server
