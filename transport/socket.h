// socket.h: small TCP helpers shared by the bootstrap and the tcp transport: listen, connect with
// retry, full-message send/recv with deadlines and an abort flag, and address discovery.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/status.h"

namespace strata::net {

/// Monotonic seconds.
double nowSec();

/// Opens a listening socket on all interfaces (port 0 = any); returns fd and the chosen port
/// (network order).
Status listenAny(uint16_t portNetOrder, int* fd, uint16_t* boundPortNetOrder);
/// A usable network interface: name, IPv4 address and netmask (network order).
struct Interface {
  std::string name;
  uint32_t addr = 0;
  uint32_t mask = 0;
};
/// True if `ifname` is selected by a NCCL-style interface list: comma-separated name prefixes;
/// a leading '^' makes it a list to exclude, a leading '=' makes names match exactly.
bool interfaceMatches(const std::string& spec, const std::string& ifname);
/// The interfaces that are up and have an IPv4 address, selected by STRATA_SOCKET_IFNAME (else
/// NCCL_SOCKET_IFNAME), sorted by name: the rails. Without either: every interface but loopback,
/// docker bridges and strata-run's virtual-cluster bridges (loopback alone when nothing else is up).
std::vector<Interface> usableInterfaces();
/// The IPv4 address (network order) to advertise: STRATA_SOCKET_ADDR if set, else the first
/// usable interface's address, else 127.0.0.1.
uint32_t advertisedAddr();
/// Resolves a host name or dotted address (network order).
Status resolveHost(const std::string& host, uint32_t* addrNetOrder);
std::string addrToString(uint32_t addrNetOrder, uint16_t portNetOrder);

/// Connects to addr:port, retrying refused connections until `deadline` (nowSec() based); with
/// `fromAddr` (network order, 0: any) the socket is bound to that local address first.
Status connectTo(uint32_t addrNetOrder, uint16_t portNetOrder, double deadline, int* fd, uint32_t fromAddr = 0);
/// Starts a non-blocking connect to addr:port (from `fromAddr` when not 0); *fd is the
/// non-blocking socket, connected or still connecting (finishConnect tells).
Status startConnect(uint32_t addrNetOrder, uint16_t portNetOrder, uint32_t fromAddr, int* fd);
/// Without blocking: *done once the connect of startConnect succeeded; an error if it failed.
Status finishConnect(int fd, bool* done);
/// Accepts one connection, waiting until `deadline`; fails fast when *abort becomes true.
Status acceptOne(int listenFd, double deadline, const std::atomic<bool>* abort, int* fd);

/// Sends / receives exactly n bytes on a blocking-or-not socket, waiting with poll() until
/// `deadline`. `what` names the peer in errors ("rank 3").
Status sendAll(int fd, const void* p, size_t n, double deadline, const std::atomic<bool>* abort,
               const std::string& what);
Status recvAll(int fd, void* p, size_t n, double deadline, const std::atomic<bool>* abort,
               const std::string& what);

void setNonBlocking(int fd);
void setNoDelay(int fd);
void closeFd(int* fd);

}  // namespace strata::net
