// Instance gangs; see instance_gangs.h.
#include "control/placement/instance_gangs.h"

#include <algorithm>

namespace keel::control {

bool is_te_role(const std::string& role) {
  return role != cluster::kPpStageRole && role != cluster::kEpExpertRole;
}

bool pipelined(const cluster::StartTe& te) { return te.role == "colocated" && te.engine.pp == 2; }

cluster::StartTe stage_start(const cluster::StartTe& te) {
  cluster::StartTe s;
  s.id = te.id + "-stage1";
  s.model_path = te.model_path;
  s.role = std::string(cluster::kPpStageRole);
  s.threads = te.threads;
  s.memory_bytes = te.memory_bytes;  // a stage maps the whole file and holds its layers' KV
  s.isa = te.isa;
  s.engine.ctx_size = te.engine.ctx_size;  // what a stage reads of the engine
  s.engine.weight_layout = te.engine.weight_layout;
  s.engine.use_mmap = te.engine.use_mmap;
  return s;
}

bool expert_parallel(const cluster::StartTe& te) {
  return te.role == "colocated" && te.engine.ep > 1 && te.engine.ep_remote.empty() &&
         te.engine.ep_member == 0;
}

cluster::StartTe member_start(const cluster::StartTe& te, int32_t shard) {
  cluster::StartTe s;
  s.id = te.id + "-ep" + std::to_string(shard);
  s.model_path = te.model_path;
  s.role = std::string(cluster::kEpExpertRole);
  s.threads = te.threads;
  s.memory_bytes = (te.memory_bytes + te.engine.ep - 1) / te.engine.ep;
  s.isa = te.isa;
  s.engine.ep = te.engine.ep;  // what a member reads of the engine
  s.engine.ep_member = shard;
  s.engine.weight_layout = te.engine.weight_layout;
  s.engine.use_mmap = te.engine.use_mmap;
  return s;
}

GangStart gang_of(const std::string& instance, int32_t priority, cluster::StartTe te) {
  GangStart g{instance, priority, {}};
  if (pipelined(te)) g.tes.push_back(stage_start(te));  // stage 0 is told its address
  if (expert_parallel(te)) {  // the members first: the TE is told their addresses
    for (int32_t shard = 1; shard < te.engine.ep; ++shard) {
      g.tes.push_back(member_start(te, shard));
    }
  }
  g.tes.push_back(std::move(te));
  return g;
}

bool spread(const GangStart& g) {
  return std::any_of(g.tes.begin(), g.tes.end(),
                     [](const cluster::StartTe& t) { return t.role == cluster::kEpExpertRole; });
}

bool serves_together(const GangStart& g) {
  return std::any_of(g.tes.begin(), g.tes.end(),
                     [](const cluster::StartTe& t) { return !is_te_role(t.role); });
}

ModelGangs model_gangs(const std::string& model, int32_t priority,
                       const std::vector<cluster::StartTe>& starts) {
  ModelGangs out;
  std::vector<size_t> prefill, decode;
  for (size_t i = 0; i < starts.size(); ++i) {
    if (starts[i].role == "prefill") {
      prefill.push_back(i);
    } else if (starts[i].role == "decode") {
      decode.push_back(i);
    } else {
      out.index.push_back({i});
    }
  }
  for (size_t k = 0; k < std::max(prefill.size(), decode.size()); ++k) {
    std::vector<size_t> g;
    if (k < prefill.size()) g.push_back(prefill[k]);
    if (k < decode.size()) g.push_back(decode[k]);
    out.index.push_back(std::move(g));
  }
  size_t pairs = 0;
  for (std::vector<size_t>& g : out.index) {
    if (g.size() == 1) {
      const cluster::StartTe& te = starts[g[0]];
      const std::string kind = pipelined(te) ? "-pp-" : expert_parallel(te) ? "-ep-" : "-te-";
      GangStart gang = gang_of(model + kind + std::to_string(g[0]), priority, te);
      g.insert(g.begin(), gang.tes.size() - 1, kNotATe);  // its stage or members before it
      out.gangs.push_back(std::move(gang));
      continue;
    }
    GangStart gang{model + "-pd-" + std::to_string(pairs++), priority, {}};
    for (size_t i : g) gang.tes.push_back(starts[i]);
    out.gangs.push_back(std::move(gang));
  }
  return out;
}

}  // namespace keel::control
