// QuotaDir: tenants' quota windows shared by the gateways of a cluster through one directory
// (`--quota-dir`, by default `<--responses-dir>/quotas`; docs/tenants.md, "Across gateways").
// Every admission, settlement and header read of a tenant takes an exclusive flock on
// `<dir>/<tenant>.lock`, reads `<dir>/<tenant>.quota` (quota_record.h), and writes it back by
// rename, so the gateways' decisions are serialized as one gateway's would be: no more than the
// quota is admitted in any 60 s, whichever gateways the requests come through.
//
// Requests in flight are counted per gateway (its owner id, random per QuotaDir). Each QuotaDir
// holds an exclusive flock on `<dir>/owners/<owner>.lock` for its life; a gateway that finds
// another owner's requests in flight and can lock that owner's file knows the owner is gone (a
// killed process releases its flocks) and counts them out. Locks are waited for at most
// kQuotaLockWaitMs (a peer stopped while holding one cannot stall this gateway): then IoError,
// and the caller decides (Tenants admits by its own window and counts the failure).
//
// The directory must be on a file system whose flocks hold across the gateways' hosts (a local
// one for gateways on one host; NFSv4 across hosts). Times are wall-clock milliseconds, so the
// gateways' clocks must agree (NTP) when they are on different hosts.
//
// Thread safety: every method may be called from any thread (the flocks serialize threads too).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "server/quota_record.h"

namespace keel::server {

inline constexpr int64_t kQuotaLockWaitMs = 500;

class QuotaDir {
 public:
  // Creates `dir` (and `dir/owners`) when missing and takes this gateway's owner lock.
  static Result<std::unique_ptr<QuotaDir>> open(std::string dir);
  ~QuotaDir();
  QuotaDir(const QuotaDir&) = delete;
  QuotaDir& operator=(const QuotaDir&) = delete;

  struct Admission {
    QuotaAdmission quota;        // entry_id: the shared window's entry (settle() takes it)
    RateLimitView view;          // the x-ratelimit-* view after the decision
    int32_t dropped_owners = 0;  // gone gateways whose requests in flight were counted out
  };
  // One request of `tenant` charging `tokens` at `now_ms` (wall clock), within `limits` counted
  // over every gateway's admissions.
  Result<Admission> admit(const std::string& tenant, const TenantLimits& limits, int64_t now_ms,
                          int64_t tokens);
  // This gateway's admitted request `entry_id` ended having used `tokens`.
  Status settle(const std::string& tenant, uint64_t entry_id, int64_t tokens);
  Result<RateLimitView> view(const std::string& tenant, const TenantLimits& limits, int64_t now_ms);

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] const std::string& owner() const { return owner_; }

 private:
  QuotaDir(std::string dir, std::string owner, int owner_fd)
      : dir_(std::move(dir)), owner_(std::move(owner)), owner_fd_(owner_fd) {}
  // Runs `fn` on the tenant's record under its lock; writes the record back when `fn` says so.
  template <typename Fn>
  Status with_record(const std::string& tenant, Fn fn);
  // Whether gateway `owner` still holds its owner lock (another process or QuotaDir).
  [[nodiscard]] bool owner_alive(const std::string& owner) const;

  const std::string dir_;
  const std::string owner_;
  const int owner_fd_;
};

}  // namespace keel::server
