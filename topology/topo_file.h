// topo_file.h: cluster topology files (JSON): reading them into a Cluster, and writing a Cluster
// back (the two round-trip). docs/TOPOLOGY.md has the full description and examples
// (topology/files/). Schema, version 1:
//
//   {
//     "version": 1,                         required
//     "description": "...",                 optional, free text
//     "rails": 8,                           network rails (default 0); NIC rails lie in 0 .. rails-1
//     "link_classes": {                     optional; keys: same-process shm pcie nvlink rail cross-rail
//       "nvlink": {"latency_us": 2, "bandwidth_GB_s": 360}
//     },                                    bandwidth in GB/s (1e9 bytes/s, one direction), > 0;
//                                           latency in microseconds, >= 0; what is left out keeps
//                                           its default (model.cc)
//     "node_types": {"<type>": <node description>},                    optional
//     "nodes": [<node entry>, ...]                                     required, at least one
//          or  {"count": 4, "type": "<type>", "hostname_prefix": "node"}  (node0 .. node3)
//     "placement": {"ranks_per_node": 8}    rank r on node r / 8
//          or  [0, 0, "node1", 1]           per rank: a node index or a hostname; optional
//   }
//   node entry:       {"hostname": "node0" (default node<i>), "type": "<type>", <description keys>}
//                     (the type's description first, then the entry's own keys replace it)
//   node description: {"hwloc_xml": "x.xml"  (relative to this file; cores, NUMA, GPUs and NICs
//                                             from it, replaced by the keys below),
//                      "cores": 112, "cpus": 224,
//                      "numa": [{"id": 0, "cpus": "0-55,112-167", "memory_GiB": 1024}],
//                      "gpus": [{"name", "pci_bus_id", "numa", "memory_GiB", "peak_tflops",
//                                "nvlinks", "nvswitch", "nvlink_peers": [gpu index, ...]}],
//                      "nics": [{"name" (required), "netdev", "kind": "ib"|"roce"|"eth", "port",
//                                "up" (default true), "rate_Gbit_s", "pci_bus_id", "numa", "rail",
//                                "ipv4"}]}
//   Units are in the key names: _us microseconds, _GB_s gigabytes/s, _Gbit_s gigabits/s, _GiB.
//   Left-out values are unknown (0, -1, ""), as for detection.
//
// Every error names the file and either line:column (JSON syntax) or the JSON path of the value
// (`nodes[2].gpus[0].memory_GiB: expected a number, got "80G" (a string)`). Unknown and duplicate
// keys are errors. Nothing here throws.
#pragma once

#include <string>

#include "topology/model.h"
#include "transport/status.h"

namespace strata::topology {

/// Reads a topology file. On success `out` holds the nodes, rails, costs (defaults applied for
/// the classes the file leaves out) and placement; on failure `out` is left unchanged.
Status loadTopologyFile(const std::string& path, Cluster* out);

/// The same from text: `name` is used in messages and as the source, `baseDir` resolves
/// relative "hwloc_xml" paths.
Status parseTopologyJson(const std::string& text, const std::string& name, const std::string& baseDir,
                         Cluster* out);

/// The cluster as a topology file (every node written out in full, link classes only where the
/// file set them, placement as ranks_per_node when it is node-major and uniform). Reading it back
/// gives the same cluster.
std::string clusterToJson(const Cluster& cluster);

}  // namespace strata::topology
