// Tenants: the API keys file loaded (tenant_keys.h) and each tenant's live state for one
// `keel serve` — its quota window (tenant_limiter.h) and its counters for /metrics. The file is
// read again whenever its modification time, size or inode differ from the loaded one (checked at
// each authentication, so the first request after an edit sees it); a file that no longer
// parses is logged and counted, and the keys loaded before stay in force. A tenant's window and
// counters survive reloads (matched by name); a tenant removed from the file keeps its counters
// but its keys stop working. With a quota directory (quota_dir.h) the windows are the ones the
// gateways of a cluster share there instead of this process's own; the counters stay per process.
//
// Thread safety: every method may be called from any thread (one mutex guards the state).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/result.h"
#include "server/api_error.h"
#include "server/http_message.h"
#include "server/quota_dir.h"
#include "server/tenant_keys.h"
#include "server/tenant_limiter.h"

namespace keel::server {

// What an authenticated request carries: its tenant, weight and prefix-cache scope.
struct TenantGrant {
  std::string tenant;
  double weight = 1.0;
  std::string cache_scope;  // TenantSpec::cache_salt, else the tenant name
};

// The cache_salt a tenant's request uses: its scope combined with the client's own cache_salt
// ("" = none), so that two tenants never share a salt unless their scopes are equal. At most
// 72 bytes.
[[nodiscard]] std::string scoped_cache_salt(std::string_view scope, std::string_view client_salt);

class Tenants {
 public:
  // Loads the keys file at `path`; `clock` (borrowed, null = a steady clock; with `quota_dir`, the
  // wall clock) times the windows. A non-empty `quota_dir` holds the windows the gateways share.
  static Result<std::unique_ptr<Tenants>> open(std::string path, const Clock* clock = nullptr,
                                               const std::string& quota_dir = "");

  // The tenant of API key `key`, after re-reading the file when it changed; nullopt for a key
  // the file does not hold.
  std::optional<TenantGrant> authenticate(std::string_view key);

  struct Decision {
    std::optional<ApiError> error;  // 429 rate_limit_exceeded naming the limit
    HeaderList headers;             // x-ratelimit-* after the decision
    uint64_t entry_id = 0;          // admitted: pass to settle()
  };
  // One generation request of `tenant` that will use at most `estimate_tokens` (prompt +
  // max_tokens, every choice): admitted within its quotas, or refused.
  Decision admit(const std::string& tenant, int64_t estimate_tokens);
  // An admitted request ended, having used these tokens: its window entry is corrected.
  void settle(const std::string& tenant, uint64_t entry_id, int64_t prompt_tokens,
              int64_t generated_tokens);
  // The x-ratelimit-* headers of `tenant` now (none for a limit it does not have).
  HeaderList headers(const std::string& tenant);

  // Prometheus text: per-tenant requests, tokens in/out, 429s by limit, requests in flight (this
  // process's) and `vtc` (the engine's virtual token counters), the file's reloads and, with a
  // quota directory, its failures.
  [[nodiscard]] std::string metrics_text(const std::map<std::string, double>& vtc) const;

 private:
  struct FileId {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    uint64_t inode = 0;
    friend bool operator==(const FileId&, const FileId&) = default;
  };
  struct TenantState {
    TenantSpec spec;
    bool active = true;     // still in the file
    LimiterState limiter;   // without a quota directory
    int32_t in_flight = 0;  // this process's generation requests in flight
    int64_t requests = 0, prompt_tokens = 0, generated_tokens = 0;
    int64_t rejected_requests = 0, rejected_tokens = 0, rejected_concurrency = 0;
  };

  Tenants(std::string path, const Clock* clock) : path_(std::move(path)), clock_(clock) {}
  [[nodiscard]] int64_t now_ms() const;
  static FileId file_id(const std::string& path);
  Status load(const FileId& id) KEEL_REQUIRES(mu_);
  void reload_if_changed() KEEL_REQUIRES(mu_);
  // The limits of a tenant of the file (nullopt: unknown).
  std::optional<TenantLimits> limits_of(const std::string& tenant) const;
  Decision admit_shared(const std::string& tenant, const TenantLimits& limits, int64_t estimate);
  void note_store_error(const Status& s) KEEL_REQUIRES(mu_);

  const std::string path_;
  const Clock* clock_;
  SteadyClock steady_;
  mutable Mutex mu_;
  FileId loaded_ KEEL_GUARDED_BY(mu_);
  std::map<std::string, std::string> keys_ KEEL_GUARDED_BY(mu_);  // SHA-256 hex → tenant
  std::map<std::string, TenantState> tenants_ KEEL_GUARDED_BY(mu_);
  int64_t reloads_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t reload_errors_ KEEL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<QuotaDir> shared_;  // null: this process's windows (set once at open)
  int64_t store_errors_ KEEL_GUARDED_BY(mu_) = 0;
};

}  // namespace keel::server
