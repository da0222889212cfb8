// The fleet over several JEs (see fleet_merge.h).
#include "cluster/gateway/fleet_merge.h"

#include <map>
#include <set>
#include <utility>

namespace keel::cluster {
namespace {

// Adds `from`'s numbers into `into`, key by key (both JSON objects of counters); other values are
// kept from the first that had them.
void add_counters(Json* into, const Json& from) {
  if (!from.is_object()) return;
  if (!into->is_object()) *into = Json::object();
  for (const auto& [key, value] : from.items()) {
    const auto it = into->find(key);
    if (it == into->end()) {
      (*into)[key] = value;
    } else if (it->is_number_integer() && value.is_number_integer()) {
      *it = it->get<int64_t>() + value.get<int64_t>();
    } else if (it->is_number() && value.is_number()) {
      *it = it->get<double>() + value.get<double>();
    }
  }
}

// The predictor's counters: requests and seconds summed, buckets [predicted, actual, n] by pair.
Json merge_predictors(const std::vector<const FleetStatus*>& up) {
  int64_t requests = 0;
  double seconds = 0;
  std::map<std::pair<int64_t, int64_t>, int64_t> buckets;
  for (const FleetStatus* s : up) {
    if (!s->predictor.is_object()) continue;
    requests += s->predictor.value("requests", int64_t{0});
    seconds += s->predictor.value("seconds", 0.0);
    for (const Json& b : s->predictor.value("buckets", Json::array())) {
      if (!b.is_array() || b.size() != 3 || !b[0].is_number_integer() ||
          !b[1].is_number_integer() || !b[2].is_number_integer()) {
        continue;
      }
      buckets[{b[0].get<int64_t>(), b[1].get<int64_t>()}] += b[2].get<int64_t>();
    }
  }
  Json list = Json::array();
  for (const auto& [pa, n] : buckets) list.push_back({pa.first, pa.second, n});
  return Json{{"requests", requests}, {"seconds", seconds}, {"buckets", std::move(list)}};
}

JeSummary summary_of(const JeAnswer& a) {
  JeSummary j;
  j.address = a.address;
  if (!a.status.ok()) {
    j.id = a.last_id.empty() ? a.address : a.last_id;
    j.error = a.status.status().message();
    return j;
  }
  const FleetStatus& s = *a.status;
  j.id = s.je_id.empty() ? a.address : s.je_id;
  j.up = true;
  j.jobs_active = s.jobs_active;
  j.jobs_total = s.jobs_total;
  j.jobs_redriven = s.jobs_redriven;
  j.jobs_failed = s.jobs_failed;
  j.jobs_resubmitted = s.jobs_resubmitted;
  j.router = s.router.is_object() ? s.router : Json::object();
  return j;
}

}  // namespace

std::string describe_down_jes(const std::vector<JeSummary>& jes) {
  std::string out;
  for (const JeSummary& j : jes) {
    if (j.up) continue;
    if (!out.empty()) out += "; ";
    out += j.id == j.address ? j.address : j.id + " (" + j.address + ")";
    if (!j.error.empty()) out += ": " + j.error;
  }
  return out;
}

Result<FleetStatus> merge_fleet_statuses(const std::vector<JeAnswer>& answers) {
  std::vector<JeSummary> jes;
  std::vector<const FleetStatus*> up;
  for (const JeAnswer& a : answers) {
    jes.push_back(summary_of(a));
    if (a.status.ok()) up.push_back(&*a.status);
  }
  if (up.empty()) {
    return Status::unavailable("no job executor answers: " + (jes.empty()
                                                                  ? std::string("none configured")
                                                                  : describe_down_jes(jes)));
  }
  FleetStatus out = *up.front();  // its TEs, stats and limits
  out.je_id.clear();
  out.router = Json::object();
  out.jobs_active = out.jobs_total = out.jobs_redriven = out.jobs_failed = 0;
  out.jobs_resubmitted = 0;
  std::set<std::string> listed;
  for (const TeInfo& te : out.fleet.tes) listed.insert(te.address);
  for (const FleetStatus* s : up) {
    out.je_id += (out.je_id.empty() ? "" : ",") + s->je_id;
    out.jobs_active += s->jobs_active;
    out.jobs_total += s->jobs_total;
    out.jobs_redriven += s->jobs_redriven;
    out.jobs_failed += s->jobs_failed;
    out.jobs_resubmitted += s->jobs_resubmitted;
    add_counters(&out.router, s->router);
    if (s == up.front()) continue;
    for (size_t i = 0; i < s->fleet.tes.size(); ++i) {  // a TE only a later JE knows (yet)
      if (!listed.insert(s->fleet.tes[i].address).second) continue;
      out.fleet.tes.push_back(s->fleet.tes[i]);
      out.stats.push_back(i < s->stats.size() ? s->stats[i] : engine::EngineStats{});
      out.metrics.push_back(i < s->metrics.size() ? s->metrics[i] : engine::MetricsSnapshot{});
    }
  }
  out.predictor = merge_predictors(up);
  out.job_executors = std::move(jes);
  return out;
}

}  // namespace keel::cluster
