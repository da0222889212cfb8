// ResponsesStore: the stored responses of /v1/responses (`store: true`, the default). Each holds
// the Response object as last reported, the turn's input items, its previous_response_id and the
// token ids of its prompt and output, so a later turn can rebuild the conversation
// (history(): every earlier turn's input and output items, oldest first).
//
// Bounds: at most max_responses responses and max_bytes bytes (each charged its JSON sizes, 4
// bytes a token and kResponseOverheadBytes); past either the oldest finished responses are
// forgotten (queued or in-progress ones never are). A response larger than max_bytes alone is
// refused (ResourceExhausted).
//
// Durability (after attach(): `--state-dir`): each response is a record of the state store's
// "responses" collection, written when put() or update() changes it and removed with it, so
// stored responses — and the chains through them — survive a restart. A response that was queued
// or in progress when the server stopped is loaded as failed (code server_restarted): its run
// did not survive. Without attach() everything lives in memory only.
//
// Shared (attach() of a state store opened shared, `--responses-dir`): the gateways of a cluster
// keep their responses in one directory, each record written whole by rename and stamped with
// the gateway that created it (`owner`, stable across that gateway's restarts) and a version (its
// writes so far). The directory is the truth; memory is a cache of it. A finished response never
// changes again, so a cached one is only checked to still exist (one stat: another gateway may
// have deleted it); a response another gateway is still running is read again on every lookup;
// one this gateway runs is answered from memory (its progress is newer than its record). Only
// the owner writes an unfinished response, so no two gateways write one record at once. At
// attach() only this owner's unfinished responses become failed (server_restarted); another
// gateway's stay as they are. Bounds apply to what this gateway has loaded, created or read:
// past them it forgets (and removes from the directory) the oldest finished responses it knows.
// A record found damaged is set aside by the state store and answered as an error naming it
// (lookup(), history()), never a crash.
//
// Thread safety: every member may be called from any thread (one mutex, held over the state
// store's reads and writes; update()'s function runs under it and must not call back into the
// store); attach() before the store is shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mutex.h"
#include "core/result.h"
#include "server/api_error.h"
#include "state/state_store.h"

namespace keel::server {

using OrderedJson = nlohmann::ordered_json;

enum class ResponseStatus { kQueued, kInProgress, kCompleted, kIncomplete, kFailed, kCancelled };

[[nodiscard]] std::string_view response_status_name(ResponseStatus status);
[[nodiscard]] std::optional<ResponseStatus> parse_response_status(std::string_view name);
// Completed, incomplete, failed or cancelled: nothing changes it any more.
[[nodiscard]] bool is_finished(ResponseStatus status);

// 404 response_not_found for an unknown response id.
ApiError response_not_found(std::string_view id);

struct StoredResponse {
  std::string id;  // "resp_<hex>"
  // The Response object (responses_run.h); its "status" is the response's status.
  OrderedJson response = OrderedJson::object();
  OrderedJson input_items = OrderedJson::array();  // this turn's input items (normalized)
  std::string previous_response_id;                // "" when none
  std::vector<int32_t> prompt_tokens;              // the turn's prompt as the engine saw it
  std::vector<int32_t> output_tokens;              // what the model generated
  // The gateway that created it (a shared store's owner id; "" otherwise): only it runs and
  // writes the response while unfinished. Set by put(); update() keeps it.
  std::string owner;

  // From response["status"]; kFailed when it is missing or unknown.
  [[nodiscard]] ResponseStatus status() const;
  [[nodiscard]] size_t charged_bytes() const;
};

inline constexpr size_t kResponseOverheadBytes = 512;

class ResponsesStore {
 public:
  ResponsesStore(size_t max_responses, size_t max_bytes)
      : max_responses_(max_responses), max_bytes_(max_bytes) {}

  // Loads the responses `state` holds (damaged records are set aside by the state store and
  // logged; unfinished ones become failed) and keeps every later change there. `state` must
  // outlive the store. A shared `state` (StateStore::open_shared) needs `owner`, this gateway's
  // id (the same after a restart): only its unfinished responses become failed.
  Status attach(state::StateStore* state, std::string owner = {});
  // Adds or replaces response r.id; with a state store, the error when it could not be written
  // (then nothing changes). Evicts the oldest finished responses past the bounds.
  Status put(StoredResponse r);
  // Response `id`: 404 response_not_found when unknown, 500 naming the record when a shared
  // store's record of it is damaged.
  [[nodiscard]] ApiResult<StoredResponse> lookup(std::string_view id);
  // lookup() without the error (nullopt for both).
  [[nodiscard]] std::optional<StoredResponse> find(std::string_view id);
  // True when `r` is still queued or in progress on another gateway (a shared store): only that
  // gateway can cancel it.
  [[nodiscard]] bool runs_elsewhere(const StoredResponse& r) const;
  // Runs fn on response `id` under the lock and, when `persist`, writes the result (progress that
  // a restart may lose is not); the updated copy, or nullopt when unknown. A failed write is
  // logged (the copy in memory is updated anyway).
  std::optional<StoredResponse> update(std::string_view id,
                                       const std::function<void(StoredResponse&)>& fn,
                                       bool persist = true);
  // False when unknown.
  bool remove(std::string_view id);

  // The conversation before a turn that continues response `id`: for each response of the chain
  // ending at `id`, oldest first, its input items then its output items. 404
  // previous_response_not_found when `id` (or a response it continues) is not stored; 400
  // previous_response_not_finished while one of them is queued or in progress; 500 naming a
  // damaged record.
  [[nodiscard]] ApiResult<OrderedJson> history(std::string_view id);
  // The first response of the chain ending at `id` (the agent program a continuing turn belongs
  // to; program_id.h): `id` itself when it continues nothing, as far as the chain is stored.
  [[nodiscard]] std::string chain_root(std::string_view id);

  [[nodiscard]] size_t size() const;
  [[nodiscard]] size_t used_bytes() const;

 private:
  struct Entry {
    uint64_t seq = 0;      // creation order: microseconds since the epoch, unique per process
    uint64_t version = 0;  // the record's writes so far
    StoredResponse r;
    size_t bytes = 0;
  };
  [[nodiscard]] bool shared() const { return state_ != nullptr && state_->shared(); }
  // The entry of `id` as it stands now (with a shared store: checked or read again, above);
  // nullptr when unknown; Corrupt when its record is damaged.
  Result<Entry*> current_locked(const std::string& id) KEEL_REQUIRES(mu_);
  // Response `id` read from a shared store into the cache.
  Result<Entry*> read_locked(const std::string& id) KEEL_REQUIRES(mu_);
  void persist_locked(Entry& e) KEEL_REQUIRES(mu_);
  void evict_locked(size_t incoming_bytes) KEEL_REQUIRES(mu_);
  // Adds `e` (its id not cached) after evicting past the bounds.
  Entry* insert_locked(Entry e) KEEL_REQUIRES(mu_);
  // Drops `id` from memory only, or from the state store too.
  void forget_locked(const std::string& id) KEEL_REQUIRES(mu_);
  void erase_locked(const std::string& id) KEEL_REQUIRES(mu_);

  const size_t max_responses_;
  const size_t max_bytes_;
  state::StateStore* state_ = nullptr;  // set once by attach()
  std::string owner_;                   // set once by attach(): a shared store's owner id
  mutable Mutex mu_;
  uint64_t next_seq_ KEEL_GUARDED_BY(mu_) = 0;
  size_t used_bytes_ KEEL_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, Entry> entries_ KEEL_GUARDED_BY(mu_);
  // Creation order (seq, id): ids break ties between gateways.
  std::set<std::pair<uint64_t, std::string>> by_seq_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::server
