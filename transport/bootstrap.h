// bootstrap.h: rendezvous before any transport exists. A unique id carries the root's address and a
// random 128-bit secret; each rank connects to the root, proves the secret and sends its RankInfo;
// the root answers with the addresses of the log2(n) ranks this rank sends to in Bruck's
// all-gather, which then gives every rank everybody's RankInfo in log2(n) rounds. Those partner
// sockets carry the small setup collectives (allgather, barrier) for the rest of the
// communicator's life (e.g. split). Each rank's listener also takes the transports' connections,
// made on first use (startOpen / pollOpen, without blocking).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/strata.h"
#include "transport/status.h"
#include "transport/waiter.h"

namespace strata {

/// What every rank tells every other rank at init.
struct RankInfo {
  int rank = -1;
  int pid = 0;
  uint64_t hostHash = 0;     ///< equal for ranks on one machine (hostname + boot id)
  uint64_t processHash = 0;  ///< equal for ranks that are threads of one process
  uint32_t addr = 0;         ///< IPv4 address (network order) of this rank's listener
  uint16_t port = 0;         ///< listener port (network order)
  uint64_t localPtr = 0;     ///< same-process peers: address of this rank's local endpoint
  char hostname[64] = {};
  uint64_t cpuMask[4] = {};  ///< CPUs this rank may run on (CPU c as bit c % 256)
  /// Node identity: the host hash, or a virtual node's (topology file placement). Ranks of one
  /// node use shared memory between them; ranks of different nodes always the network.
  uint64_t nodeHash = 0;
  char nodeName[64] = {};    ///< hostname, or the virtual node's name
  int32_t gpu = -1;          ///< CUDA device of this rank, -1: none
  int32_t homeRail = -1;     ///< rail chosen by the rank itself (-1: local rank mod its interfaces)
  /// The interfaces this rank can use between nodes, one per rail in rail order
  /// (STRATA_SOCKET_IFNAME / NCCL_SOCKET_IFNAME select them): IPv4 address and netmask.
  static constexpr int kMaxIfs = 8;
  uint32_t nifs = 0;
  uint32_t ifAddr[kMaxIfs] = {};
  uint32_t ifMask[kMaxIfs] = {};
  uint32_t ifMbps[kMaxIfs] = {};  ///< link rate from sysfs (Mbit/s; 0: unknown)
  int32_t ifNuma[kMaxIfs] = {};   ///< NUMA domain of the interface's device (-1: unknown, virtual)
  int32_t numa = -1;              ///< NUMA domain all of this rank's CPUs lie in (-1: several, unknown)
  uint32_t netCaps = 0;           ///< network transports this rank can use (net_select.h NetCaps)
  /// Communicator modes this rank asked for (kCommDeterministic): a mode any rank asks for
  /// applies to all, so that every rank chooses the same algorithms.
  uint32_t commFlags = 0;
  static constexpr uint32_t kCommDeterministic = 1;
};

/// The address of `peer` to reach on `rail` from `self`: the peer's interface in the subnet of
/// self's rail interface, *from set to that interface's address (0 and the peer's primary
/// address when there is none).
uint32_t railAddress(const RankInfo& self, const RankInfo& peer, int rail, uint32_t* from);

/// The decoded contents of a strataUniqueId.
struct UniqueIdData {
  uint32_t magic = 0;
  uint32_t rootAddr = 0;  ///< network order
  uint16_t rootPort = 0;  ///< network order
  uint8_t secret[16] = {};
  uint64_t commTag = 0;   ///< random; names shared-memory segments of this communicator
};

UniqueIdData decodeUniqueId(const strataUniqueId& id);
/// Encodes `d`, setting its magic.
strataUniqueId encodeUniqueId(const UniqueIdData& d);
std::string uniqueIdToHex(const strataUniqueId& id);
bool uniqueIdFromHex(const std::string& hex, strataUniqueId* id);

/// Creates a unique id and starts its root server on a background thread in this process. A
/// one-shot root serves one rendezvous and exits; a persistent root (strata-run's) serves rounds
/// of `nranks` joins until the process exits, so a program may create several communicators with
/// the job's id, one after the other. `rootAddr` (network order; 0: the advertised address) is
/// where ranks reach the root, e.g. strata-run's address on a virtual cluster's bridge.
Status createUniqueId(strataUniqueId* id, bool persistent, uint32_t rootAddr = 0);
/// Starts a root server for `d` on d->rootPort (0: any port, written back). Used by
/// createUniqueId and by environment launches where rank 0 serves an agreed port. With
/// `expectNranks` > 0 joins claiming another rank count are refused (else the first authenticated
/// join of a round sets it).
Status startRootServer(UniqueIdData* d, bool persistent, int expectNranks = 0);

/// One rank's side of the bootstrap: the joined world and the setup ring.
class Bootstrap {
 public:
  ~Bootstrap();
  /// Joins the rendezvous of `id` as `rank` of `nranks`; fills everybody's RankInfo. `self` is
  /// this rank's info (rank, pid, host and process hashes, localPtr); addr/port are filled in.
  static Status join(const strataUniqueId& id, int rank, int nranks, RankInfo self, double timeoutSec,
                     std::unique_ptr<Bootstrap>* out);
  /// Builds a bootstrap from already exchanged infos (used by split, which gathers them over the
  /// parent): takes ownership of `listenFd` (from openListener). Partner sockets are made on the
  /// first collective.
  static Status fromInfos(int listenFd, int rank, std::vector<RankInfo> infos, uint64_t commTag,
                          const uint8_t secret[16], double timeoutSec, std::unique_ptr<Bootstrap>* out);
  /// Opens a listener and fills self->addr/port.
  static Status openListener(int* fd, RankInfo* self);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::vector<RankInfo>& infos() const { return infos_; }
  uint64_t commTag() const { return commTag_; }
  const uint8_t* secret() const { return secret_; }
  /// This rank's listening socket, also used by transports to accept their connections.
  int listenFd() const { return listenFd_; }
  /// Sets the seconds a bootstrap exchange or connection may take: set-up runs under the join
  /// timeout (a split's, under the shorter of that and its own); then Comm::init gives it the
  /// communicator's, so that a split, an argument check or a first connection waits no longer
  /// than any other call on it.
  void setTimeout(double sec) { timeoutSec_ = sec; }

  /// Allgather of `bytes` per rank: all[r*bytes ..] = rank r's `mine`. Bruck's algorithm:
  /// ceil(log2 n) rounds, n-1 blocks received per rank.
  Status allGather(const void* mine, void* all, size_t bytes);
  Status barrier();
  /// Makes blocking bootstrap calls fail fast (abort).
  void abort() { aborted_.store(true); }
  /// Lets bootstrap calls run again after abort(): a shrink gathers the survivors through the
  /// listener of a communicator that failed.
  void resume() { aborted_.store(false); }
  const std::atomic<bool>* abortFlag() const { return &aborted_; }

  /// Connection purposes on the shared listener: setup collectives (index: Bruck round), tcp data
  /// sockets (index: socket), out-of-band sockets of the other network transports, and the
  /// survivors' gathering of a shrink (index: the shrink's number; collectives/comm_shrink.cc).
  /// kProbe: a shrinking survivor checks that this rank lives (dropped at once, silently).
  enum Kind : uint32_t { kRing = 1, kData = 2, kNetOob = 3, kShrink = 4, kProbe = 5 };
  /// Connects to `peer`'s listener and introduces itself (kind, index) with the secret. With
  /// `rail` >= 0 the connection leaves through this rank's interface of that rail, to the peer's
  /// address in the same subnet (its primary address if it has none there).
  Status connectPeer(int peer, Kind kind, int index, double deadline, int* fd, int rail = -1);
  /// Accepts the connection `peer` makes with (kind, index); connections meant for other calls are
  /// kept until asked for. Strangers (wrong secret or tag) are dropped with a warning.
  Status acceptPeer(int peer, Kind kind, int index, double deadline, int* fd);
  /// True if `peer`'s listener takes a connection by `deadline` (it lives); false if it refuses
  /// until then (its process is gone). The peer drops the probe without a word.
  bool probePeer(int peer, double deadline);

  /// A connection to a peer opened without blocking, for transports that connect on first use:
  /// the initiator connects (on `rail`, as connectPeer) and sends its hello; the other side takes
  /// the connection from the listener when it arrives.
  struct Opening {
    int peer = -1;
    Kind kind = kData;
    int index = 0;
    bool initiator = false;
    int fd = -1;            ///< initiator: the connecting socket
    bool connected = false;
    size_t helloSent = 0;
  };
  Status startOpen(int peer, Kind kind, int index, int rail, bool initiator, Opening* o);
  /// Moves `o` on without blocking; sets *fd (non-blocking, owned by the caller) once it is open,
  /// else leaves it -1. Fails naming the peer when it cannot be reached.
  Status pollOpen(Opening* o, int* fd);
  /// What an unfinished opening waits on (its socket, or the listener and half-open sockets).
  void addOpenWaitSources(const Opening& o, WaitSet* ws) const;

 private:
  Bootstrap() = default;
  /// The sockets of Bruck round k: to rank - 2^k and from rank + 2^k (connected on first use).
  Status partners(int round, int* sendFd, int* recvFd);
  /// Accepts waiting connections and reads their hellos, without blocking: complete ones go to
  /// pending_, strangers are dropped.
  void drainListener();
  /// Reads the hellos of half-open connections; drops strangers and the ones too slow.
  void serviceHalfOpen();

  int rank_ = 0, nranks_ = 1;
  int listenFd_ = -1;
  std::vector<int> sendFds_, recvFds_;  ///< per Bruck round
  uint64_t commTag_ = 0;
  uint8_t secret_[16] = {};
  double timeoutSec_ = 600;
  std::vector<RankInfo> infos_;
  std::atomic<bool> aborted_{false};
  struct Pending {
    uint32_t kind;
    int rank, index, fd;
  };
  std::vector<Pending> pending_;
  struct HalfOpen {  ///< accepted, hello not yet complete
    int fd;
    size_t got;
    double since;
    alignas(8) unsigned char hello[64];
  };
  std::vector<HalfOpen> halfOpen_;
  int dropped_ = 0;  ///< connections dropped by the listener (logged a few times, then counted)
};

}  // namespace strata
