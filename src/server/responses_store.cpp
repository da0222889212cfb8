// ResponsesStore (see responses_store.h).
#include "server/responses_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/log.h"

namespace keel::server {
namespace {

constexpr std::string_view kResponsesCollection = "responses";
constexpr std::array<std::string_view, 6> kResponseStatusNames = {
    "queued", "in_progress", "completed", "incomplete", "failed", "cancelled"};
// A chain longer than this is refused (it could only come from a cycle of damaged records).
constexpr size_t kMaxChainLength = 100'000;

nlohmann::json response_to_state_json(const StoredResponse& r, uint64_t seq) {
  return {{"seq", seq},
          {"response", nlohmann::json(r.response)},
          {"input_items", nlohmann::json(r.input_items)},
          {"previous_response_id", r.previous_response_id},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens}};
}

Result<std::pair<StoredResponse, uint64_t>> response_from_state_json(const nlohmann::json& j) {
  try {
    StoredResponse r;
    r.response = OrderedJson(j.at("response"));
    r.id = r.response.at("id").get<std::string>();
    r.input_items = OrderedJson(j.at("input_items"));
    r.previous_response_id = j.at("previous_response_id").get<std::string>();
    r.prompt_tokens = j.at("prompt_tokens").get<std::vector<int32_t>>();
    r.output_tokens = j.at("output_tokens").get<std::vector<int32_t>>();
    if (!r.response.is_object() || !r.input_items.is_array()) {
      return Status::corrupt("a stored response's record has the wrong shape");
    }
    return std::make_pair(std::move(r), j.at("seq").get<uint64_t>());
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(fmt::format("a stored response's record is malformed: {}", e.what()));
  }
}

// A run that did not survive the restart.
void fail_interrupted_response(StoredResponse* r) {
  r->response["status"] = "failed";
  r->response["error"] = {{"code", "server_restarted"},
                          {"message", "The server stopped before this response finished."}};
}

}  // namespace

ApiError response_not_found(std::string_view id) {
  ApiError e = ApiError::bad_request(fmt::format("Response with id '{}' not found.", id),
                                     "response_id", "response_not_found");
  e.status = 404;
  return e;
}

std::string_view response_status_name(ResponseStatus status) {
  return kResponseStatusNames[static_cast<size_t>(status)];
}

std::optional<ResponseStatus> parse_response_status(std::string_view name) {
  for (size_t i = 0; i < kResponseStatusNames.size(); ++i) {
    if (kResponseStatusNames[i] == name) return static_cast<ResponseStatus>(i);
  }
  return std::nullopt;
}

bool is_finished(ResponseStatus status) {
  switch (status) {
    case ResponseStatus::kQueued:
    case ResponseStatus::kInProgress:
      return false;
    case ResponseStatus::kCompleted:
    case ResponseStatus::kIncomplete:
    case ResponseStatus::kFailed:
    case ResponseStatus::kCancelled:
      return true;
  }
  return true;
}

ResponseStatus StoredResponse::status() const {
  auto it = response.find("status");
  if (it == response.end() || !it->is_string()) return ResponseStatus::kFailed;
  return parse_response_status(it->get<std::string>()).value_or(ResponseStatus::kFailed);
}

size_t StoredResponse::charged_bytes() const {
  return response.dump().size() + input_items.dump().size() + previous_response_id.size() +
         4 * (prompt_tokens.size() + output_tokens.size()) + kResponseOverheadBytes;
}

Status ResponsesStore::attach(state::StateStore* state) {
  state_ = state;
  KEEL_ASSIGN_OR_RETURN(std::vector<state::Record> records,
                        state->load_records(kResponsesCollection));
  std::vector<std::pair<StoredResponse, uint64_t>> loaded;
  for (const state::Record& rec : records) {
    Result<std::pair<StoredResponse, uint64_t>> r = response_from_state_json(rec.value);
    if (!r.ok() || r->first.id != rec.id) {
      KEEL_LOG_WARN("responses: {} is left out: {}", rec.id,
                    r.ok() ? "its record names another response" : r.status().message());
      continue;
    }
    loaded.push_back(std::move(*r));
  }
  std::sort(loaded.begin(), loaded.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  MutexLock lock(mu_);
  for (auto& [r, seq] : loaded) {
    const bool interrupted = !is_finished(r.status());
    if (interrupted) fail_interrupted_response(&r);
    Entry e{.seq = seq, .r = std::move(r), .bytes = 0};
    e.bytes = e.r.charged_bytes();
    next_seq_ = std::max(next_seq_, seq + 1);
    if (interrupted) persist_locked(e);
    evict_locked(e.bytes);
    used_bytes_ += e.bytes;
    by_seq_[seq] = e.r.id;
    const std::string id = e.r.id;
    entries_[id] = std::move(e);
  }
  KEEL_LOG_INFO("responses: {} stored responses from {}", entries_.size(), state->dir());
  return {};
}

void ResponsesStore::persist_locked(const Entry& e) {
  if (state_ == nullptr) return;
  if (Status st =
          state_->put_record(kResponsesCollection, e.r.id, response_to_state_json(e.r, e.seq));
      !st.ok()) {
    KEEL_LOG_WARN("responses: {} not written to the state directory: {}", e.r.id, st.message());
  }
}

void ResponsesStore::erase_locked(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  used_bytes_ -= it->second.bytes;
  by_seq_.erase(it->second.seq);
  entries_.erase(it);
  if (state_ != nullptr) (void)state_->remove_record(kResponsesCollection, id);
}

void ResponsesStore::evict_locked(size_t incoming_bytes) {
  auto it = by_seq_.begin();
  while (it != by_seq_.end() &&
         (entries_.size() + 1 > max_responses_ || used_bytes_ + incoming_bytes > max_bytes_)) {
    const std::string id = it->second;
    ++it;
    if (is_finished(entries_.at(id).r.status())) erase_locked(id);
  }
}

Status ResponsesStore::put(StoredResponse r) {
  Entry e{.seq = 0, .r = std::move(r), .bytes = 0};
  e.bytes = e.r.charged_bytes();
  if (e.bytes > max_bytes_) {
    return Status::resource_exhausted(fmt::format(
        "response {} needs {} bytes, more than the store holds ({})", e.r.id, e.bytes, max_bytes_));
  }
  MutexLock lock(mu_);
  auto old = entries_.find(e.r.id);
  e.seq = old != entries_.end() ? old->second.seq : next_seq_++;
  if (state_ != nullptr) {
    KEEL_TRY(state_->put_record(kResponsesCollection, e.r.id, response_to_state_json(e.r, e.seq)));
  }
  if (old != entries_.end()) {
    used_bytes_ -= old->second.bytes;
    by_seq_.erase(old->second.seq);
    entries_.erase(old);
  }
  evict_locked(e.bytes);
  used_bytes_ += e.bytes;
  by_seq_[e.seq] = e.r.id;
  const std::string id = e.r.id;
  entries_[id] = std::move(e);
  return {};
}

std::optional<StoredResponse> ResponsesStore::find(std::string_view id) const {
  MutexLock lock(mu_);
  auto it = entries_.find(std::string(id));
  if (it == entries_.end()) return std::nullopt;
  return it->second.r;
}

std::optional<StoredResponse> ResponsesStore::update(std::string_view id,
                                                     const std::function<void(StoredResponse&)>& fn,
                                                     bool persist) {
  MutexLock lock(mu_);
  auto it = entries_.find(std::string(id));
  if (it == entries_.end()) return std::nullopt;
  Entry& e = it->second;
  fn(e.r);
  used_bytes_ -= e.bytes;
  e.bytes = e.r.charged_bytes();
  used_bytes_ += e.bytes;
  if (persist) persist_locked(e);
  return e.r;
}

bool ResponsesStore::remove(std::string_view id) {
  MutexLock lock(mu_);
  if (entries_.find(std::string(id)) == entries_.end()) return false;
  erase_locked(std::string(id));
  return true;
}

ApiResult<OrderedJson> ResponsesStore::history(std::string_view id) const {
  MutexLock lock(mu_);
  std::vector<const StoredResponse*> chain;
  std::string next(id);
  while (!next.empty()) {
    auto it = entries_.find(next);
    if (it == entries_.end() || chain.size() >= kMaxChainLength) {
      ApiError e = ApiError::bad_request(
          next == id ? fmt::format("Previous response with id '{}' not found.", next)
                     : fmt::format("Previous response with id '{}' not found (response '{}' "
                                   "continues it).",
                                   next, chain.back()->id),
          "previous_response_id", "previous_response_not_found");
      e.status = 404;
      return e;
    }
    if (!is_finished(it->second.r.status())) {
      return ApiError::bad_request(
          fmt::format("Previous response '{}' is still {}; wait until it finishes.", next,
                      response_status_name(it->second.r.status())),
          "previous_response_id", "previous_response_not_finished");
    }
    chain.push_back(&it->second.r);
    next = it->second.r.previous_response_id;
  }
  OrderedJson items = OrderedJson::array();
  for (auto r = chain.rbegin(); r != chain.rend(); ++r) {
    for (const OrderedJson& item : (*r)->input_items) items.push_back(item);
    auto output = (*r)->response.find("output");
    if (output == (*r)->response.end() || !output->is_array()) continue;
    for (const OrderedJson& item : *output) items.push_back(item);
  }
  return items;
}

std::string ResponsesStore::chain_root(std::string_view id) const {
  MutexLock lock(mu_);
  std::string root(id);
  for (size_t n = 0; n < kMaxChainLength; ++n) {
    auto it = entries_.find(root);
    if (it == entries_.end() || it->second.r.previous_response_id.empty()) break;
    root = it->second.r.previous_response_id;
  }
  return root;
}

size_t ResponsesStore::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

size_t ResponsesStore::used_bytes() const {
  MutexLock lock(mu_);
  return used_bytes_;
}

}  // namespace keel::server
