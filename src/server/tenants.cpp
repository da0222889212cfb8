// Tenants (see tenants.h).
#include "server/tenants.h"

#include <fmt/format.h>
#include <sys/stat.h>

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

Result<std::unique_ptr<Tenants>> Tenants::open(std::string path, const Clock* clock) {
  std::unique_ptr<Tenants> t(new Tenants(std::move(path), clock));
  MutexLock lock(t->mu_);
  KEEL_TRY(t->load(file_id(t->path_)));
  return t;
}

int64_t Tenants::now_ms() const {
  const Clock& c = clock_ != nullptr ? *clock_ : static_cast<const Clock&>(steady_);
  return c.now_ns() / 1'000'000;
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

Tenants::Decision Tenants::admit(const std::string& tenant, int64_t estimate_tokens) {
  MutexLock lock(mu_);
  Decision d;
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return d;
  TenantState& t = it->second;
  const QuotaAdmission a = limiter_admit(&t.limiter, t.spec.limits, now_ms(), estimate_tokens);
  switch (a.hit) {
    case LimitHit::kNone:
      ++t.requests;
      d.entry_id = a.entry_id;
      break;
    case LimitHit::kRequests:
      ++t.rejected_requests;
      break;
    case LimitHit::kTokens:
    case LimitHit::kTooLarge:
      ++t.rejected_tokens;
      break;
    case LimitHit::kConcurrency:
      ++t.rejected_concurrency;
      break;
  }
  if (a.hit != LimitHit::kNone) d.error = limit_error(tenant, t.spec.limits, a, estimate_tokens);
  d.headers = headers_locked(t);
  return d;
}

void Tenants::settle(const std::string& tenant, uint64_t entry_id, int64_t prompt_tokens,
                     int64_t generated_tokens) {
  MutexLock lock(mu_);
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return;
  TenantState& t = it->second;
  t.prompt_tokens += prompt_tokens;
  t.generated_tokens += generated_tokens;
  limiter_settle(&t.limiter, entry_id, prompt_tokens + generated_tokens);
}

HeaderList Tenants::headers(const std::string& tenant) {
  MutexLock lock(mu_);
  const auto it = tenants_.find(tenant);
  return it == tenants_.end() ? HeaderList{} : headers_locked(it->second);
}

HeaderList Tenants::headers_locked(const TenantState& t) const {
  const RateLimitView v = limiter_view(t.limiter, t.spec.limits, now_ms());
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
           out += fmt::format("{}{{tenant=\"{}\"}} {}\n", name, tenant, t.limiter.in_flight);
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
  return out;
}

}  // namespace keel::server
