// Tenants (see tenants.h).
#include "server/tenants.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "core/log.h"

namespace keel::server {

std::string scoped_cache_salt(std::string_view scope, std::string_view client_salt) {
  std::string both(scope);
  both += '\n';
  both += client_salt;
  return "tenant-" + sha256_hex(both);
}

Result<std::unique_ptr<Tenants>> Tenants::open(std::string path, const Clock* clock,
                                               const std::string& quota_dir) {
  std::unique_ptr<Tenants> t(new Tenants(std::move(path), clock));
  if (!quota_dir.empty()) {
    KEEL_ASSIGN_OR_RETURN(t->shared_, QuotaDir::open(quota_dir));
  }
  MutexLock lock(t->mu_);
  KEEL_TRY(t->load(file_id(t->path_)));
  return t;
}

int64_t Tenants::now_ms() const {
  if (clock_ != nullptr) return clock_->now_ns() / 1'000'000;
  if (shared_ != nullptr) {  // the gateways' windows: a time every process reads alike
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  return steady_.now_ns() / 1'000'000;
}

Tenants::FileId Tenants::file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileId{};
  return FileId{static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                static_cast<int64_t>(st.st_size), static_cast<uint64_t>(st.st_ino)};
}

Status Tenants::load(const FileId& id) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return Status::io_error(fmt::format("cannot read the API keys file {}", path_));
  std::stringstream text;
  text << in.rdbuf();
  KEEL_ASSIGN_OR_RETURN(KeysFile file, parse_keys_file(text.str(), path_));
  for (auto& [name, state] : tenants_) state.active = false;
  for (const TenantSpec& spec : file.tenants) {
    TenantState& state = tenants_[spec.name];
    state.spec = spec;
    state.active = true;
  }
  keys_.clear();
  for (const auto& [hash, idx] : file.key_tenant) keys_.emplace(hash, file.tenants[idx].name);
  loaded_ = id;
  return Status::ok_status();
}

void Tenants::reload_if_changed() {
  const FileId id = file_id(path_);
  if (id == loaded_) return;
  if (Status s = load(id); !s.ok()) {
    // Counted once per change of the file; the keys loaded before stay in force.
    loaded_ = id;
    ++reload_errors_;
    KEEL_LOG_WARN("API keys file not reloaded (the keys loaded before stay): {}", s.to_string());
    return;
  }
  ++reloads_;
  KEEL_LOG_INFO("API keys file {} reloaded: {} keys, {} tenants", path_, keys_.size(),
                tenants_.size());
}

std::optional<TenantGrant> Tenants::authenticate(std::string_view key) {
  if (key.empty()) return std::nullopt;
  const std::string hash = sha256_hex(key);
  MutexLock lock(mu_);
  reload_if_changed();
  const auto it = keys_.find(hash);
  if (it == keys_.end()) return std::nullopt;
  const TenantSpec& spec = tenants_.at(it->second).spec;
  return TenantGrant{spec.name, spec.weight, spec.cache_salt.value_or(spec.name)};
}

namespace {

ApiError limit_error(const std::string& tenant, const TenantLimits& limits, const QuotaAdmission& a,
                     int64_t estimate) {
  std::string message;
  std::string type = "requests";
  switch (a.hit) {
    case LimitHit::kRequests:
      message = fmt::format(
          "Rate limit reached for tenant {} on requests per minute (RPM): "
          "Limit {}. Please try again in {}.",
          tenant, limits.requests_per_minute, format_reset(a.retry_after_ms));
      break;
    case LimitHit::kTokens:
      type = "tokens";
      message = fmt::format(
          "Rate limit reached for tenant {} on tokens per minute (TPM): Limit "
          "{}, Requested {} (prompt + max_tokens). Please try again in {}.",
          tenant, limits.tokens_per_minute, estimate, format_reset(a.retry_after_ms));
      break;
    case LimitHit::kTooLarge:
      type = "tokens";
      message = fmt::format(
          "Request too large for tenant {} on tokens per minute (TPM): Limit "
          "{}, Requested {} (prompt + max_tokens). Lower max_tokens or the "
          "prompt.",
          tenant, limits.tokens_per_minute, estimate);
      break;
    case LimitHit::kConcurrency:
      message = fmt::format(
          "Concurrency limit reached for tenant {}: at most {} requests in "
          "flight (max_concurrent). Please try again when one finishes.",
          tenant, limits.max_concurrent);
      break;
    case LimitHit::kNone:
      break;
  }
  ApiError e = ApiError::rate_limited(std::move(message));
  e.type = type;
  e.code = "rate_limit_exceeded";
  e.retry_after_s.reset();
  if (a.hit != LimitHit::kTooLarge) {
    e.retry_after_s = static_cast<int>((a.retry_after_ms + 999) / 1000);
  }
  return e;
}

}  // namespace

namespace {

void count_decision(LimitHit hit, int64_t* requests, int64_t* rejected_requests,
                    int64_t* rejected_tokens, int64_t* rejected_concurrency) {
  switch (hit) {
    case LimitHit::kNone:
      ++*requests;
      break;
    case LimitHit::kRequests:
      ++*rejected_requests;
      break;
    case LimitHit::kTokens:
    case LimitHit::kTooLarge:
      ++*rejected_tokens;
      break;
    case LimitHit::kConcurrency:
      ++*rejected_concurrency;
      break;
  }
}

HeaderList headers_of(const RateLimitView& v) {
  HeaderList h;
  if (v.limit_requests > 0) {
    h.emplace_back("x-ratelimit-limit-requests", std::to_string(v.limit_requests));
    h.emplace_back("x-ratelimit-remaining-requests", std::to_string(v.remaining_requests));
    h.emplace_back("x-ratelimit-reset-requests", format_reset(v.reset_requests_ms));
  }
  if (v.limit_tokens > 0) {
    h.emplace_back("x-ratelimit-limit-tokens", std::to_string(v.limit_tokens));
    h.emplace_back("x-ratelimit-remaining-tokens", std::to_string(v.remaining_tokens));
    h.emplace_back("x-ratelimit-reset-tokens", format_reset(v.reset_tokens_ms));
  }
  return h;
}

}  // namespace

std::optional<TenantLimits> Tenants::limits_of(const std::string& tenant) const {
  MutexLock lock(mu_);
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return std::nullopt;
  return it->second.spec.limits;
}

void Tenants::note_store_error(const Status& s) {
  // The request is admitted by no shared window (entry 0): quotas fail open, serving goes on.
  if (store_errors_++ % 100 == 0) {
    KEEL_LOG_WARN(
        "tenant quotas: the shared quota directory failed (admitting unchecked; {} "
        "failures so far): {}",
        store_errors_, s.to_string());
  }
}

Tenants::Decision Tenants::admit(const std::string& tenant, int64_t estimate_tokens) {
  if (shared_ != nullptr) {
    const std::optional<TenantLimits> limits = limits_of(tenant);
    if (!limits) return Decision{};
    return admit_shared(tenant, *limits, estimate_tokens);
  }
  MutexLock lock(mu_);
  Decision d;
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return d;
  TenantState& t = it->second;
  const int64_t now = now_ms();
  const QuotaAdmission a = limiter_admit(&t.limiter, t.spec.limits, now, estimate_tokens);
  count_decision(a.hit, &t.requests, &t.rejected_requests, &t.rejected_tokens,
                 &t.rejected_concurrency);
  if (a.hit == LimitHit::kNone) {
    ++t.in_flight;
    d.entry_id = a.entry_id;
  } else {
    d.error = limit_error(tenant, t.spec.limits, a, estimate_tokens);
  }
  d.headers = headers_of(limiter_view(t.limiter, t.spec.limits, now));
  return d;
}

// The file work runs outside mu_ (other tenants' requests go on meanwhile); the decision is
// counted under it.
Tenants::Decision Tenants::admit_shared(const std::string& tenant, const TenantLimits& limits,
                                        int64_t estimate) {
  Result<QuotaDir::Admission> a = shared_->admit(tenant, limits, now_ms(), estimate);
  MutexLock lock(mu_);
  TenantState& t = tenants_.at(tenant);  // tenants are never erased
  Decision d;
  if (!a.ok()) {
    note_store_error(a.status());
    ++t.requests;
    ++t.in_flight;
    return d;  // entry 0: settle() counts, and touches no window
  }
  if (a->dropped_owners > 0) {
    KEEL_LOG_INFO("tenant {}: counted out the requests in flight of {} gateway(s) gone", tenant,
                  a->dropped_owners);
  }
  count_decision(a->quota.hit, &t.requests, &t.rejected_requests, &t.rejected_tokens,
                 &t.rejected_concurrency);
  if (a->quota.hit == LimitHit::kNone) {
    ++t.in_flight;
    d.entry_id = a->quota.entry_id;
  } else {
    d.error = limit_error(tenant, limits, a->quota, estimate);
  }
  d.headers = headers_of(a->view);
  return d;
}

void Tenants::settle(const std::string& tenant, uint64_t entry_id, int64_t prompt_tokens,
                     int64_t generated_tokens) {
  {
    MutexLock lock(mu_);
    const auto it = tenants_.find(tenant);
    if (it == tenants_.end()) return;
    TenantState& t = it->second;
    t.prompt_tokens += prompt_tokens;
    t.generated_tokens += generated_tokens;
    if (t.in_flight > 0) --t.in_flight;
    if (shared_ == nullptr) {
      limiter_settle(&t.limiter, entry_id, prompt_tokens + generated_tokens);
      return;
    }
  }
  if (entry_id == 0) return;  // admitted while the directory failed: in no window
  const Status s = shared_->settle(tenant, entry_id, prompt_tokens + generated_tokens);
  if (!s.ok()) {
    MutexLock lock(mu_);
    note_store_error(s);
  }
}

HeaderList Tenants::headers(const std::string& tenant) {
  if (shared_ != nullptr) {
    const std::optional<TenantLimits> limits = limits_of(tenant);
    if (!limits) return {};
    Result<RateLimitView> v = shared_->view(tenant, *limits, now_ms());
    if (!v.ok()) {
      MutexLock lock(mu_);
      note_store_error(v.status());
      return {};
    }
    return headers_of(*v);
  }
  MutexLock lock(mu_);
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return {};
  return headers_of(limiter_view(it->second.limiter, it->second.spec.limits, now_ms()));
}

std::string Tenants::metrics_text(const std::map<std::string, double>& vtc) const {
  MutexLock lock(mu_);
  const std::map<std::string, TenantState>* tenants = &tenants_;  // read under mu_, in lambdas too
  std::string out;
  const auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& [tenant, t] : *tenants) value(name, tenant, t);
  };
  const auto simple = [&](int64_t TenantState::*member) {
    return [&out, member](const char* name, const std::string& tenant, const TenantState& t) {
      out += fmt::format("{}{{tenant=\"{}\"}} {}\n", name, tenant, t.*member);
    };
  };
  family("keel_tenant_requests_total", "counter", "Generation requests admitted per tenant.",
         simple(&TenantState::requests));
  family("keel_tenant_prompt_tokens_total", "counter",
         "Prompt tokens of the tenant's finished requests.", simple(&TenantState::prompt_tokens));
  family("keel_tenant_generation_tokens_total", "counter",
         "Generated tokens of the tenant's finished requests.",
         simple(&TenantState::generated_tokens));
  family("keel_tenant_rate_limited_total", "counter",
         "Requests refused with 429, by the limit they hit.",
         [&out](const char* name, const std::string& tenant, const TenantState& t) {
           out += fmt::format("{}{{tenant=\"{}\",limit=\"requests\"}} {}\n", name, tenant,
                              t.rejected_requests);
           out += fmt::format("{}{{tenant=\"{}\",limit=\"tokens\"}} {}\n", name, tenant,
                              t.rejected_tokens);
           out += fmt::format("{}{{tenant=\"{}\",limit=\"concurrency\"}} {}\n", name, tenant,
                              t.rejected_concurrency);
         });
  family("keel_tenant_requests_in_flight", "gauge", "Generation requests of the tenant in flight.",
         [&out](const char* name, const std::string& tenant, const TenantState& t) {
           out += fmt::format("{}{{tenant=\"{}\"}} {}\n", name, tenant, t.in_flight);
         });
  family("keel_tenant_vtc_counter", "gauge",
         "The tenant's virtual token counter in the engine's fair admission (weighted service: "
         "prompt tokens x1 + generated x2, divided by its weight).",
         [&out, &vtc](const char* name, const std::string& tenant, const TenantState&) {
           const auto it = vtc.find(tenant);
           out += fmt::format("{}{{tenant=\"{}\"}} {}\n", name, tenant,
                              it == vtc.end() ? 0.0 : it->second);
         });
  out += fmt::format(
      "# HELP keel_api_keys_reloads_total Reloads of the API keys file.\n"
      "# TYPE keel_api_keys_reloads_total counter\nkeel_api_keys_reloads_total {}\n"
      "# HELP keel_api_keys_reload_errors_total Changes of the API keys file that did not parse.\n"
      "# TYPE keel_api_keys_reload_errors_total counter\nkeel_api_keys_reload_errors_total {}\n",
      reloads_, reload_errors_);
  if (shared_ != nullptr) {
    out += fmt::format(
        "# HELP keel_tenant_quota_dir_errors_total Failures of the shared quota directory "
        "(requests admitted unchecked).\n"
        "# TYPE keel_tenant_quota_dir_errors_total counter\nkeel_tenant_quota_dir_errors_total "
        "{}\n",
        store_errors_);
  }
  return out;
}

}  // namespace keel::server
