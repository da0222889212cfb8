// `keel cluster scale`: the by-hand trigger of a scale-out — a scale_out call on a running
// cluster's control port (`keel cluster up --warm-pool N`), in a role (--role: colocated, prefill
// or decode); prints each bound TE and its phases.
#include <cstdio>

#include "cluster_commands.h"
#include "control/scaleout/cluster_scaler.h"
#include "net/link.h"

namespace keel::cli {
namespace {

Status scale_main(const ClusterScaleOptions& o) {
  KEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<net::Link> link,
      net::Link::connect(
          o.control, std::chrono::milliseconds(5000), [](net::Link&, net::Message) {}, nullptr));
  Result<cluster::Json> reply =
      link->call({std::string(control::kScaleOut), cluster::Json{{"tes", o.tes}, {"role", o.role}}},
                 std::chrono::milliseconds(600000));
  link->close();
  if (!reply.ok()) return reply.status();
  if (o.json) {
    std::printf("%s\n", reply->dump(2).c_str());
  } else {
    for (const cluster::Json& te : reply->value("tes", cluster::Json::array())) {
      std::printf("%s (%s) at %s: ready %.3f s, first token %.3f s after the decision (%s)\n",
                  te.value("te", std::string()).c_str(), te.value("role", o.role).c_str(),
                  te.value("address", std::string()).c_str(), te.value("ready_s", 0.0),
                  te.value("first_token_s", 0.0),
                  te.value("from_store", false) ? "model store" : "file");
    }
    for (const cluster::Json& e : reply->value("errors", cluster::Json::array())) {
      std::printf("error: %s\n", e.get<std::string>().c_str());
    }
  }
  if (!reply->value("ok", false)) return Status::unavailable("scale-out incomplete");
  return {};
}

}  // namespace

int run_cluster_scale(const ClusterScaleOptions& opts) {
  const Status s = scale_main(opts);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
