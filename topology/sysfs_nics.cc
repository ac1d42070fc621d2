// sysfs_nics.cc: the node's NICs from sysfs (RDMA devices and network interfaces), their IPv4
// addresses from getifaddrs, and PCI bus id normalisation (see detect.h).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if_arp.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "topology/detect.h"

namespace strata::topology {

namespace fs = std::filesystem;

namespace {

// First line of a sysfs file, trimmed; "" when it cannot be read (sysfs answers EINVAL for
// values a driver does not know, e.g. the speed of a virtual interface).
std::string readLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::vector<std::string> listDir(const fs::path& p) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The PCI function a sysfs `device` link leads to: the last path component that is a PCI
// address (a virtio NIC's device is "virtio2" below its PCI function). "" for virtual devices.
std::string pciAddressOf(const fs::path& deviceLink) {
  std::error_code ec;
  fs::path real = fs::canonical(deviceLink, ec);
  if (ec) return "";
  std::string found;
  for (const fs::path& part : real) {
    std::string id = normalizePciBusId(part.string());
    if (!id.empty()) found = id;
  }
  return found;
}

// "400 Gb/sec (4X NDR)" -> 400; "2.5 Gb/sec (1X SDR)" -> 2.5; unreadable: 0.
double parseRate(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return end != s.c_str() && v > 0 ? v : 0;
}

// The netdev of port `port` of an RDMA device: the RoCE GID table names it; else the device's
// only netdev, or the one whose dev_port matches (multi-port adapters).
std::string portNetdev(const fs::path& dev, const std::string& port, const fs::path& sysRoot) {
  std::string nd = readLine(dev / "ports" / port / "gid_attrs" / "ndevs" / "0");
  if (!nd.empty()) return nd;
  std::vector<std::string> nets = listDir(dev / "device" / "net");
  if (nets.size() == 1) return nets[0];
  const std::string devPort = std::to_string(std::atoi(port.c_str()) - 1);
  for (const std::string& n : nets) {
    if (readLine(sysRoot / "class" / "net" / n / "dev_port") == devPort) return n;
  }
  return "";
}

}  // namespace

std::string normalizePciBusId(const std::string& id) {
  // [domain:]bus:device.function, domain of 4 or 8 hex digits.
  auto hex = [](const std::string& s, size_t n) {
    auto isHex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
    return s.size() == n && std::all_of(s.begin(), s.end(), isHex);
  };
  const size_t c2 = id.rfind(':');
  const size_t c1 = c2 == std::string::npos || c2 == 0 ? std::string::npos : id.rfind(':', c2 - 1);
  const size_t dot = id.rfind('.');
  if (c1 == std::string::npos || dot == std::string::npos || dot < c2) return "";
  std::string dom = id.substr(0, c1), bus = id.substr(c1 + 1, c2 - c1 - 1), dev = id.substr(c2 + 1, dot - c2 - 1),
              fn = id.substr(dot + 1);
  if (!(hex(dom, 4) || hex(dom, 8)) || !hex(bus, 2) || !hex(dev, 2) || !hex(fn, 1)) return "";
  if (dom.size() == 8) {
    if (dom.substr(0, 4) != "0000") return "";
    dom = dom.substr(4);
  }
  std::string out = dom + ":" + bus + ":" + dev + "." + fn;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<Nic> scanSysfsNics(const std::string& sysRootArg,
                               const std::map<std::string, std::string>& ipv4ByInterface) {
  const fs::path sysRoot(sysRootArg);
  auto ipv4 = [&](const std::string& netdev) {
    auto it = ipv4ByInterface.find(netdev);
    return it == ipv4ByInterface.end() ? std::string() : it->second;
  };
  std::vector<Nic> nics;
  std::set<std::string> claimed;  // netdevs that belong to an RDMA device
  const fs::path ib = sysRoot / "class" / "infiniband";
  for (const std::string& name : listDir(ib)) {
    const fs::path dev = ib / name;
    const std::string pci = pciAddressOf(dev / "device");
    for (const std::string& port : listDir(dev / "ports")) {
      const fs::path p = dev / "ports" / port;
      Nic n;
      n.name = name;
      n.port = std::atoi(port.c_str());
      const std::string layer = readLine(p / "link_layer");
      n.kind = layer == "InfiniBand" ? "ib" : layer == "Ethernet" ? "roce" : "";
      n.up = readLine(p / "state").find("ACTIVE") != std::string::npos;  // "4: ACTIVE"
      n.rateGbps = parseRate(readLine(p / "rate"));
      n.pciBusId = pci;
      n.netdev = portNetdev(dev, port, sysRoot);
      if (!n.netdev.empty()) {
        claimed.insert(n.netdev);
        n.ipv4 = ipv4(n.netdev);
      }
      nics.push_back(n);
    }
  }
  const fs::path net = sysRoot / "class" / "net";
  for (const std::string& name : listDir(net)) {
    if (claimed.count(name)) continue;
    const std::string type = readLine(net / name / "type");
    if (name == "lo" || type == std::to_string(ARPHRD_LOOPBACK)) continue;
    Nic n;
    n.name = name;
    n.netdev = name;
    n.kind = "eth";
    n.up = readLine(net / name / "operstate") == "up";
    const long mbit = std::atol(readLine(net / name / "speed").c_str());  // Mbit/s; -1 unknown
    n.rateGbps = mbit > 0 ? mbit / 1000.0 : 0;
    n.pciBusId = pciAddressOf(net / name / "device");
    n.ipv4 = ipv4(name);
    nics.push_back(n);
  }
  return nics;
}

std::map<std::string, std::string> interfaceIpv4() {
  std::map<std::string, std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !a->ifa_name) continue;
    char buf[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf))) out.emplace(a->ifa_name, buf);  // first wins
  }
  freeifaddrs(list);
  return out;
}

}  // namespace strata::topology
