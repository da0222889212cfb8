// ResponsesStore (see responses_store.h).
#include "server/responses_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "core/log.h"

namespace keel::server {
namespace {

constexpr std::string_view kResponsesCollection = "responses";
constexpr std::array<std::string_view, 6> kResponseStatusNames = {
    "queued", "in_progress", "completed", "incomplete", "failed", "cancelled"};
// A chain longer than this is refused (it could only come from a cycle of damaged records).
constexpr size_t kMaxChainLength = 100'000;

nlohmann::json response_to_state_json(const StoredResponse& r, uint64_t seq, uint64_t version) {
  return {{"seq", seq},
          {"version", version},
          {"owner", r.owner},
          {"response", nlohmann::json(r.response)},
          {"input_items", nlohmann::json(r.input_items)},
          {"previous_response_id", r.previous_response_id},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens}};
}

struct LoadedResponse {
  StoredResponse r;
  uint64_t seq = 0;
  uint64_t version = 0;
};

Result<LoadedResponse> response_from_state_json(const nlohmann::json& j) {
  try {
    LoadedResponse out;
    StoredResponse& r = out.r;
    r.response = OrderedJson(j.at("response"));
    r.id = r.response.at("id").get<std::string>();
    r.input_items = OrderedJson(j.at("input_items"));
    r.previous_response_id = j.at("previous_response_id").get<std::string>();
    r.prompt_tokens = j.at("prompt_tokens").get<std::vector<int32_t>>();
    r.output_tokens = j.at("output_tokens").get<std::vector<int32_t>>();
    r.owner = j.value("owner", std::string());
    if (!r.response.is_object() || !r.input_items.is_array()) {
      return Status::corrupt("a stored response's record has the wrong shape");
    }
    out.seq = j.at("seq").get<uint64_t>();
    out.version = j.value("version", uint64_t{0});
    return out;
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(fmt::format("a stored response's record is malformed: {}", e.what()));
  }
}

// Microseconds since the epoch: creation order across the gateways sharing a store.
uint64_t now_micros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// 500 naming a damaged record.
ApiError damaged_response(std::string_view id, const Status& st) {
  return ApiError::internal(
      fmt::format("Stored response '{}' could not be read: {}", id, st.message()));
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

Status ResponsesStore::attach(state::StateStore* state, std::string owner) {
  if (state->shared() && owner.empty()) {
    return Status::invalid_argument("responses: a shared store needs this gateway's owner id");
  }
  state_ = state;
  owner_ = std::move(owner);
  KEEL_ASSIGN_OR_RETURN(std::vector<state::Record> records,
                        state->load_records(kResponsesCollection));
  std::vector<LoadedResponse> loaded;
  for (const state::Record& rec : records) {
    Result<LoadedResponse> r = response_from_state_json(rec.value);
    if (!r.ok() || r->r.id != rec.id) {
      KEEL_LOG_WARN("responses: {} is left out: {}", rec.id,
                    r.ok() ? "its record names another response" : r.status().message());
      continue;
    }
    loaded.push_back(std::move(*r));
  }
  std::sort(loaded.begin(), loaded.end(),
            [](const auto& a, const auto& b) { return a.seq < b.seq; });
  MutexLock lock(mu_);
  for (LoadedResponse& l : loaded) {
    // Another gateway's run may still be going: only this owner's (or an unowned) one stopped.
    const bool interrupted =
        !is_finished(l.r.status()) && (!shared() || l.r.owner.empty() || l.r.owner == owner_);
    if (interrupted) fail_interrupted_response(&l.r);
    next_seq_ = std::max(next_seq_, l.seq + 1);
    Entry* e = insert_locked(Entry{.seq = l.seq, .version = l.version, .r = std::move(l.r)});
    if (interrupted) persist_locked(*e);
  }
  KEEL_LOG_INFO("responses: {} stored responses from {}{}", entries_.size(), state->dir(),
                shared() ? " (shared; this gateway is " + owner_ + ")" : std::string());
  return {};
}

void ResponsesStore::persist_locked(Entry& e) {
  if (state_ == nullptr) return;
  ++e.version;
  if (Status st = state_->put_record(kResponsesCollection, e.r.id,
                                     response_to_state_json(e.r, e.seq, e.version));
      !st.ok()) {
    KEEL_LOG_WARN("responses: {} not written to the state directory: {}", e.r.id, st.message());
  }
}

ResponsesStore::Entry* ResponsesStore::insert_locked(Entry e) {
  e.bytes = e.r.charged_bytes();
  evict_locked(e.bytes);
  used_bytes_ += e.bytes;
  by_seq_.emplace(e.seq, e.r.id);
  const std::string id = e.r.id;
  return &(entries_[id] = std::move(e));
}

void ResponsesStore::forget_locked(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  used_bytes_ -= it->second.bytes;
  by_seq_.erase({it->second.seq, id});
  entries_.erase(it);
}

void ResponsesStore::erase_locked(const std::string& id) {
  forget_locked(id);
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

Result<ResponsesStore::Entry*> ResponsesStore::read_locked(const std::string& id) {
  Result<nlohmann::json> j = state_->read_record(kResponsesCollection, id);
  forget_locked(id);  // whatever was cached is older than what the directory has
  if (!j.ok()) {
    const StatusCode code = j.status().code();
    if (code == StatusCode::kNotFound || code == StatusCode::kInvalidArgument) return nullptr;
    return j.status();
  }
  Result<LoadedResponse> r = response_from_state_json(*j);
  if (!r.ok()) return r.status();
  if (r->r.id != id) return Status::corrupt(fmt::format("its record names '{}'", r->r.id));
  return insert_locked(Entry{.seq = r->seq, .version = r->version, .r = std::move(r->r)});
}

Result<ResponsesStore::Entry*> ResponsesStore::current_locked(const std::string& id) {
  auto it = entries_.find(id);
  if (!shared()) return it == entries_.end() ? nullptr : &it->second;
  if (it != entries_.end()) {
    const StoredResponse& r = it->second.r;
    if (is_finished(r.status())) {  // never written again: only a removal can have happened
      if (state_->has_record(kResponsesCollection, id)) return &it->second;
      forget_locked(id);
      return nullptr;
    }
    if (r.owner == owner_) return &it->second;  // runs here: memory is ahead of the record
  }
  return read_locked(id);
}

Status ResponsesStore::put(StoredResponse r) {
  if (r.owner.empty()) r.owner = owner_;
  Entry e{.seq = 0, .version = 0, .r = std::move(r), .bytes = 0};
  e.bytes = e.r.charged_bytes();
  if (e.bytes > max_bytes_) {
    return Status::resource_exhausted(fmt::format(
        "response {} needs {} bytes, more than the store holds ({})", e.r.id, e.bytes, max_bytes_));
  }
  MutexLock lock(mu_);
  auto old = entries_.find(e.r.id);
  if (old != entries_.end()) {
    e.seq = old->second.seq;
    e.version = old->second.version;
  } else {
    next_seq_ = std::max(next_seq_, now_micros());
    e.seq = next_seq_++;
  }
  if (state_ != nullptr) {
    KEEL_TRY(state_->put_record(kResponsesCollection, e.r.id,
                                response_to_state_json(e.r, e.seq, e.version + 1)));
  }
  ++e.version;
  forget_locked(e.r.id);
  insert_locked(std::move(e));
  return {};
}

ApiResult<StoredResponse> ResponsesStore::lookup(std::string_view id) {
  MutexLock lock(mu_);
  Result<Entry*> e = current_locked(std::string(id));
  if (!e.ok()) return damaged_response(id, e.status());
  if (*e == nullptr) return response_not_found(id);
  return (*e)->r;
}

bool ResponsesStore::runs_elsewhere(const StoredResponse& r) const {
  return shared() && !is_finished(r.status()) && r.owner != owner_;
}

std::optional<StoredResponse> ResponsesStore::find(std::string_view id) {
  ApiResult<StoredResponse> r = lookup(id);
  if (!r.ok()) return std::nullopt;
  return std::move(r.value());
}

std::optional<StoredResponse> ResponsesStore::update(std::string_view id,
                                                     const std::function<void(StoredResponse&)>& fn,
                                                     bool persist) {
  MutexLock lock(mu_);
  auto it = entries_.find(std::string(id));
  if (it == entries_.end()) return std::nullopt;
  Entry& e = it->second;
  const std::string owner = e.r.owner;
  fn(e.r);
  e.r.owner = owner;
  used_bytes_ -= e.bytes;
  e.bytes = e.r.charged_bytes();
  used_bytes_ += e.bytes;
  if (persist) persist_locked(e);
  return e.r;
}

bool ResponsesStore::remove(std::string_view id) {
  MutexLock lock(mu_);
  Result<Entry*> e = current_locked(std::string(id));
  if (e.ok() && *e == nullptr) return false;
  erase_locked(std::string(id));  // a damaged record was set aside already
  return e.ok();
}

ApiResult<OrderedJson> ResponsesStore::history(std::string_view id) {
  MutexLock lock(mu_);
  std::vector<OrderedJson> turns;  // newest first: each turn's items (copies: reads may evict)
  std::string next(id), after;
  while (!next.empty()) {
    Result<Entry*> e =
        turns.size() < kMaxChainLength ? current_locked(next) : Result<Entry*>(nullptr);
    if (!e.ok()) return damaged_response(next, e.status());
    if (*e == nullptr) {
      ApiError err = ApiError::bad_request(
          after.empty() ? fmt::format("Previous response with id '{}' not found.", next)
                        : fmt::format("Previous response with id '{}' not found (response '{}' "
                                      "continues it).",
                                      next, after),
          "previous_response_id", "previous_response_not_found");
      err.status = 404;
      return err;
    }
    const StoredResponse& r = (*e)->r;
    if (!is_finished(r.status())) {
      return ApiError::bad_request(
          fmt::format("Previous response '{}' is still {}; wait until it finishes.", next,
                      response_status_name(r.status())),
          "previous_response_id", "previous_response_not_finished");
    }
    OrderedJson items = r.input_items;
    auto output = r.response.find("output");
    if (output != r.response.end() && output->is_array()) {
      for (const OrderedJson& item : *output) items.push_back(item);
    }
    turns.push_back(std::move(items));
    after = next;
    next = r.previous_response_id;
  }
  OrderedJson items = OrderedJson::array();
  for (auto t = turns.rbegin(); t != turns.rend(); ++t) {
    for (OrderedJson& item : *t) items.push_back(std::move(item));
  }
  return items;
}

std::string ResponsesStore::chain_root(std::string_view id) {
  MutexLock lock(mu_);
  std::string root(id);
  for (size_t n = 0; n < kMaxChainLength; ++n) {
    Result<Entry*> e = current_locked(root);
    if (!e.ok() || *e == nullptr || (*e)->r.previous_response_id.empty()) break;
    root = (*e)->r.previous_response_id;
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
