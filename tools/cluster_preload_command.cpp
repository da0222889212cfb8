// `keel cluster preload`: puts a model's run-time image into the host's model store (or drops it,
// or lists the store) by hand — the step the cluster's forecast takes on its own.
#include <cstdio>

#include "builtin_models.h"
#include "cluster_commands.h"
#include "core/cpu_features.h"
#include "core/file_system.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "store/model_store.h"

namespace keel::cli {
namespace {

Status preload_main(const ClusterPreloadOptions& opts) {
  const store::StoreConfig config{opts.store_dir, opts.store_budget};
  KEEL_TRY(config.validate());
  PosixFileSystem fs;
  store::ModelStore s(config, &fs);
  if (opts.list) {
    KEEL_ASSIGN_OR_RETURN(std::vector<store::EntryInfo> entries, s.entries());
    for (const store::EntryInfo& e : entries) {
      std::printf("%s  %llu bytes\n", e.path.c_str(), static_cast<unsigned long long>(e.bytes));
    }
    return {};
  }
  if (opts.model_path.empty()) return Status::invalid_argument("preload: -m MODEL is required");
  const std::optional<std::string_view> forced =
      opts.isa.empty() ? std::nullopt : std::optional<std::string_view>(opts.isa);
  KEEL_ASSIGN_OR_RETURN(kernels::Isa isa, opts.isa.empty()
                                              ? kernels::choose_isa_from_env(detect_cpu_features())
                                              : kernels::choose_isa(detect_cpu_features(), forced));
  std::string path;
  {
    ThreadPool pool(1);
    KEEL_ASSIGN_OR_RETURN(path, resolve_model_path(opts.model_path, pool));
  }
  if (opts.drop) {
    KEEL_ASSIGN_OR_RETURN(store::StoreKey key,
                          store::key_for_file(fs, path, kernels::isa_name(isa)));
    KEEL_TRY(s.remove(key));
    std::printf("dropped %s\n", s.path_of(key).c_str());
    return {};
  }
  KEEL_ASSIGN_OR_RETURN(store::PreloadResult r, s.preload(path, kernels::isa_name(isa)));
  for (const std::string& e : r.evicted) std::printf("evicted %s\n", e.c_str());
  std::printf("%s %s (%llu bytes, %.3f s)\n", r.already_present ? "present" : "preloaded",
              r.path.c_str(), static_cast<unsigned long long>(r.bytes), r.seconds);
  return {};
}

}  // namespace

int run_cluster_preload(const ClusterPreloadOptions& opts) {
  const Status s = preload_main(opts);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
