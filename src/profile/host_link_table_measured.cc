#include "profile/host_link_table_measured.h"

namespace infinipipe::profile {

cost::HostLinkTable host_link_table(const HostLinks& measured) {
  cost::HostLinkTable t;
  for (const std::string& name : measured.hosts) t.hosts.push_back({name, 0});
  for (int64_t h : measured.host_of_rank) ++t.hosts[static_cast<size_t>(h)].slots;
  t.host_of_rank = measured.host_of_rank;
  t.links.resize(measured.bandwidth.size());
  for (size_t k = 0; k < t.links.size(); ++k)
    t.links[k] = {measured.bandwidth[k], measured.latency_s[k]};
  t.validate();
  return t;
}

}  // namespace infinipipe::profile
